package awssim

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/autoscaling/types"

	"lifeboat.dev/lifeboat/internal/event"
)

// Handlers run with s.mu held (see run).

func (s *Server) handlerTable() map[string]handlerFunc {
	return map[string]handlerFunc{
		"CreateAutoScalingGroup":              s.createAutoScalingGroup,
		"UpdateAutoScalingGroup":              s.updateAutoScalingGroup,
		"DeleteAutoScalingGroup":              s.deleteAutoScalingGroup,
		"SetDesiredCapacity":                  s.setDesiredCapacity,
		"TerminateInstanceInAutoScalingGroup": s.terminateInstanceInAutoScalingGroup,
		"DescribeAutoScalingGroups":           s.describeAutoScalingGroups,
		"DescribeAutoScalingInstances":        s.describeAutoScalingInstances,
		"SetInstanceProtection":               s.setInstanceProtection,
		"PutLifecycleHook":                    s.putLifecycleHook,
		"DescribeLifecycleHooks":              s.describeLifecycleHooks,
		"DeleteLifecycleHook":                 s.deleteLifecycleHook,
		"CompleteLifecycleAction":             s.completeLifecycleAction,
		"RecordLifecycleActionHeartbeat":      s.recordLifecycleActionHeartbeat,
		"PutWarmPool":                         s.putWarmPool,
		"DescribeWarmPool":                    s.describeWarmPool,
		"DeleteWarmPool":                      s.deleteWarmPool,
	}
}

// ---- XML shapes (element names as in the Auto Scaling API reference) ----

type xmlLaunchTemplate struct {
	LaunchTemplateID   string `xml:"LaunchTemplateId,omitempty"`
	LaunchTemplateName string `xml:"LaunchTemplateName,omitempty"`
	Version            string `xml:"Version,omitempty"`
}

type xmlInstance struct {
	InstanceID           string             `xml:"InstanceId"`
	AutoScalingGroupName string             `xml:"AutoScalingGroupName,omitempty"`
	InstanceType         string             `xml:"InstanceType"`
	AvailabilityZone     string             `xml:"AvailabilityZone"`
	LifecycleState       string             `xml:"LifecycleState"`
	HealthStatus         string             `xml:"HealthStatus"`
	LaunchTemplate       *xmlLaunchTemplate `xml:"LaunchTemplate,omitempty"`
	ProtectedFromScaleIn bool               `xml:"ProtectedFromScaleIn"`
}

type xmlTag struct {
	ResourceID        string `xml:"ResourceId"`
	ResourceType      string `xml:"ResourceType"`
	Key               string `xml:"Key"`
	Value             string `xml:"Value"`
	PropagateAtLaunch bool   `xml:"PropagateAtLaunch"`
}

type xmlWarmPoolConfig struct {
	MaxGroupPreparedCapacity *int32 `xml:"MaxGroupPreparedCapacity,omitempty"`
	MinSize                  int32  `xml:"MinSize"`
	PoolState                string `xml:"PoolState"`
	Status                   string `xml:"Status,omitempty"`
	ReuseOnScaleIn           *bool  `xml:"InstanceReusePolicy>ReuseOnScaleIn,omitempty"`
}

type xmlGroup struct {
	AutoScalingGroupName             string             `xml:"AutoScalingGroupName"`
	AutoScalingGroupARN              string             `xml:"AutoScalingGroupARN"`
	LaunchConfigurationName          string             `xml:"LaunchConfigurationName,omitempty"`
	LaunchTemplate                   *xmlLaunchTemplate `xml:"LaunchTemplate,omitempty"`
	MinSize                          int32              `xml:"MinSize"`
	MaxSize                          int32              `xml:"MaxSize"`
	DesiredCapacity                  int32              `xml:"DesiredCapacity"`
	DefaultCooldown                  int32              `xml:"DefaultCooldown"`
	AvailabilityZones                []string           `xml:"AvailabilityZones>member"`
	HealthCheckType                  string             `xml:"HealthCheckType"`
	HealthCheckGracePeriod           int32              `xml:"HealthCheckGracePeriod"`
	Instances                        []xmlInstance      `xml:"Instances>member"`
	CreatedTime                      string             `xml:"CreatedTime"`
	VPCZoneIdentifier                string             `xml:"VPCZoneIdentifier,omitempty"`
	Tags                             []xmlTag           `xml:"Tags>member"`
	TerminationPolicies              []string           `xml:"TerminationPolicies>member"`
	NewInstancesProtectedFromScaleIn bool               `xml:"NewInstancesProtectedFromScaleIn"`
	ServiceLinkedRoleARN             string             `xml:"ServiceLinkedRoleARN"`
	WarmPoolConfiguration            *xmlWarmPoolConfig `xml:"WarmPoolConfiguration,omitempty"`
	WarmPoolSize                     *int32             `xml:"WarmPoolSize,omitempty"`
}

type xmlHook struct {
	LifecycleHookName     string `xml:"LifecycleHookName"`
	AutoScalingGroupName  string `xml:"AutoScalingGroupName"`
	LifecycleTransition   string `xml:"LifecycleTransition"`
	NotificationTargetARN string `xml:"NotificationTargetARN,omitempty"`
	RoleARN               string `xml:"RoleARN,omitempty"`
	NotificationMetadata  string `xml:"NotificationMetadata,omitempty"`
	HeartbeatTimeout      int64  `xml:"HeartbeatTimeout"`
	GlobalTimeout         int64  `xml:"GlobalTimeout"`
	DefaultResult         string `xml:"DefaultResult"`
}

type xmlActivity struct {
	ActivityID           string `xml:"ActivityId"`
	AutoScalingGroupName string `xml:"AutoScalingGroupName"`
	Description          string `xml:"Description"`
	Cause                string `xml:"Cause"`
	StartTime            string `xml:"StartTime"`
	StatusCode           string `xml:"StatusCode"`
	Progress             int32  `xml:"Progress"`
	Details              string `xml:"Details"`
}

func xmlLT(lt *types.LaunchTemplateSpecification) *xmlLaunchTemplate {
	if lt == nil {
		return nil
	}
	return &xmlLaunchTemplate{LaunchTemplateID: aws.ToString(lt.LaunchTemplateId), LaunchTemplateName: aws.ToString(lt.LaunchTemplateName), Version: aws.ToString(lt.Version)}
}

func (in *instance) xml(withGroup bool) xmlInstance {
	x := xmlInstance{
		InstanceID: in.id, InstanceType: in.instanceType, AvailabilityZone: in.az,
		LifecycleState: string(in.state), HealthStatus: "Healthy", LaunchTemplate: xmlLT(in.launchTemplate),
		ProtectedFromScaleIn: in.protected,
	}
	if withGroup {
		x.AutoScalingGroupName = in.groupName
		x.HealthStatus = "HEALTHY" // DescribeAutoScalingInstances spells it this way
	}
	return x
}

func (w *warmPool) xml() *xmlWarmPoolConfig {
	x := &xmlWarmPoolConfig{MinSize: w.minSize, PoolState: string(w.poolState), ReuseOnScaleIn: aws.Bool(w.reuseOnScaleIn)}
	if w.maxPrepared >= 0 {
		x.MaxGroupPreparedCapacity = aws.Int32(w.maxPrepared)
	}
	if w.pendingDelete {
		x.Status = string(types.WarmPoolStatusPendingDelete)
	}
	return x
}

func (h *hook) xml(groupName string) xmlHook {
	return xmlHook{
		LifecycleHookName: h.name, AutoScalingGroupName: groupName, LifecycleTransition: h.transition,
		NotificationTargetARN: h.targetARN, RoleARN: h.roleARN, NotificationMetadata: h.metadata,
		HeartbeatTimeout: int64(h.heartbeat / time.Second), GlobalTimeout: int64(h.globalTimeout() / time.Second),
		DefaultResult: h.defaultResult,
	}
}

// ---- groups ----

func (s *Server) group(name string) (*group, error) {
	g, ok := s.groups[name]
	if !ok {
		return nil, validationError("AutoScalingGroup name not found - AutoScalingGroup %s not found", name)
	}
	return g, nil
}

func (s *Server) createAutoScalingGroup(ctx context.Context, f form) (any, error) {
	name, err := f.required("AutoScalingGroupName")
	if err != nil {
		return nil, err
	}
	if _, ok := s.groups[name]; ok {
		return nil, senderError("AlreadyExists", "AutoScalingGroup by this name already exists - A group with the name %s already exists", name)
	}
	g := &group{
		name:    name,
		arn:     fmt.Sprintf("arn:aws:autoscaling:%s:%s:autoScalingGroup:%s:autoScalingGroupName/%s", s.opts.Region, s.opts.AccountID, newUUID(), name),
		created: s.clock.Now(), hooks: map[string]*hook{},
		healthCheckType: "EC2", defaultCooldown: 300, terminationPolicies: []string{"Default"},
	}
	g.launchTemplate = launchTemplateParam(f, "LaunchTemplate.")
	g.launchConfigurationName = f.str("LaunchConfigurationName")
	g.mixedInstancesPolicy = f.hasPrefix("MixedInstancesPolicy.")
	if g.launchTemplate == nil && g.launchConfigurationName == "" && !g.mixedInstancesPolicy && !f.has("InstanceId") {
		return nil, validationError("Valid requests must contain either LaunchTemplate, LaunchConfigurationName, InstanceId or MixedInstancesPolicy parameter.")
	}
	minSize, err := requiredInt(f, "MinSize")
	if err != nil {
		return nil, err
	}
	maxSize, err := requiredInt(f, "MaxSize")
	if err != nil {
		return nil, err
	}
	desired, err := f.int32("DesiredCapacity")
	if err != nil {
		return nil, err
	}
	g.min, g.max, g.desired = minSize, maxSize, minSize
	if desired != nil {
		g.desired = *desired
	}
	if err := validateSizes(g.min, g.max, g.desired); err != nil {
		return nil, err
	}
	if err := s.applyGroupOptions(f, g); err != nil {
		return nil, err
	}
	if len(g.availabilityZones) == 0 {
		g.availabilityZones = []string{s.opts.Region + "a"}
	}
	for _, p := range f.members("Tags") {
		g.tags = append(g.tags, types.TagDescription{
			ResourceId: aws.String(name), ResourceType: aws.String("auto-scaling-group"),
			Key: aws.String(f.str(p + "Key")), Value: aws.String(f.str(p + "Value")),
			PropagateAtLaunch: aws.Bool(f.str(p+"PropagateAtLaunch") == "true"),
		})
	}
	var testTargets []string
	for _, p := range f.members("LifecycleHookSpecificationList") {
		h, err := s.hookFromForm(f, p, nil)
		if err != nil {
			return nil, err
		}
		g.hooks[h.name] = h
		if h.targetARN != "" {
			testTargets = append(testTargets, h.targetARN)
		}
	}
	s.groups[name] = g
	for _, t := range testTargets {
		if err := s.sendTestNotification(ctx, g, t); err != nil {
			delete(s.groups, name)
			return nil, unableToPublish(t, err)
		}
	}
	return nil, s.reconcile(ctx, g)
}

func unableToPublish(target string, err error) error {
	return validationError("Unable to publish test message to notification target %s. Please check your target and role configuration and try to put lifecycle hook again. (awssim: %v)", target, err)
}

func requiredInt(f form, key string) (int32, error) {
	if _, err := f.required(key); err != nil {
		return 0, err
	}
	v, err := f.int32(key)
	if err != nil {
		return 0, err
	}
	return *v, nil
}

func launchTemplateParam(f form, prefix string) *types.LaunchTemplateSpecification {
	if !f.hasPrefix(prefix) {
		return nil
	}
	lt := &types.LaunchTemplateSpecification{}
	if v := f.str(prefix + "LaunchTemplateId"); v != "" {
		lt.LaunchTemplateId = aws.String(v)
	}
	if v := f.str(prefix + "LaunchTemplateName"); v != "" {
		lt.LaunchTemplateName = aws.String(v)
	}
	if v := f.str(prefix + "Version"); v != "" {
		lt.Version = aws.String(v)
	}
	return lt
}

func validateSizes(minSize, maxSize, desired int32) error {
	if minSize < 0 || maxSize < 0 {
		return validationError("MinSize and MaxSize must not be negative")
	}
	if maxSize < minSize {
		return validationError("Max bound, %d, must be greater than or equal to min bound, %d", maxSize, minSize)
	}
	if desired < minSize || desired > maxSize {
		return validationError("Desired capacity:%d must be between the specified min size:%d and max size:%d", desired, minSize, maxSize)
	}
	return nil
}

// applyGroupOptions reads the parameters Create and Update share.
func (s *Server) applyGroupOptions(f form, g *group) error {
	if f.hasPrefix("Filters.") {
		return validationError("awssim does not simulate Filters")
	}
	if azs := f.list("AvailabilityZones"); len(azs) > 0 {
		g.availabilityZones = azs
	}
	if f.has("VPCZoneIdentifier") {
		g.vpcZoneIdentifier = f.str("VPCZoneIdentifier")
	}
	if v, err := f.bool("NewInstancesProtectedFromScaleIn"); err != nil {
		return err
	} else if v != nil {
		g.newInstancesProtected = *v
	}
	if v, err := f.int32("DefaultCooldown"); err != nil {
		return err
	} else if v != nil {
		g.defaultCooldown = *v
	}
	if v := f.str("HealthCheckType"); v != "" {
		g.healthCheckType = v
	}
	if v, err := f.int32("HealthCheckGracePeriod"); err != nil {
		return err
	} else if v != nil {
		g.healthCheckGracePeriod = *v
	}
	if tp := f.list("TerminationPolicies"); len(tp) > 0 {
		g.terminationPolicies = tp
	}
	return nil
}

func (s *Server) updateAutoScalingGroup(ctx context.Context, f form) (any, error) {
	name, err := f.required("AutoScalingGroupName")
	if err != nil {
		return nil, err
	}
	g, err := s.group(name)
	if err != nil {
		return nil, err
	}
	minSize, err := f.int32("MinSize")
	if err != nil {
		return nil, err
	}
	maxSize, err := f.int32("MaxSize")
	if err != nil {
		return nil, err
	}
	desired, err := f.int32("DesiredCapacity")
	if err != nil {
		return nil, err
	}
	newMin, newMax, newDesired := g.min, g.max, g.desired
	if minSize != nil {
		newMin = *minSize
	}
	if maxSize != nil {
		newMax = *maxSize
	}
	if desired != nil {
		newDesired = *desired
	} else {
		// A new MinSize above (MaxSize below) the desired capacity moves
		// the desired capacity with it, as AWS does.
		newDesired = max(newDesired, newMin)
		newDesired = min(newDesired, newMax)
	}
	if err := validateSizes(newMin, newMax, newDesired); err != nil {
		return nil, err
	}
	if err := s.applyGroupOptions(f, g); err != nil {
		return nil, err
	}
	g.min, g.max, g.desired = newMin, newMax, newDesired
	if lt := launchTemplateParam(f, "LaunchTemplate."); lt != nil {
		g.launchTemplate, g.launchConfigurationName = lt, ""
	}
	if v := f.str("LaunchConfigurationName"); v != "" {
		g.launchConfigurationName, g.launchTemplate = v, nil
	}
	return nil, s.reconcile(ctx, g)
}

func (s *Server) deleteAutoScalingGroup(ctx context.Context, f form) (any, error) {
	name, err := f.required("AutoScalingGroupName")
	if err != nil {
		return nil, err
	}
	g, err := s.group(name)
	if err != nil {
		return nil, err
	}
	force, err := f.bool("ForceDelete")
	if err != nil {
		return nil, err
	}
	live := s.groupInstances(g)
	if len(live) > 0 && !aws.ToBool(force) {
		return nil, senderError("ResourceInUse", "You cannot delete an AutoScalingGroup while there are instances or pending Spot instance request(s) still in the group.")
	}
	for _, in := range live {
		if err := s.terminateNow(ctx, in); err != nil {
			return nil, err
		}
	}
	delete(s.groups, name)
	return nil, nil
}

func (s *Server) setDesiredCapacity(ctx context.Context, f form) (any, error) {
	name, err := f.required("AutoScalingGroupName")
	if err != nil {
		return nil, err
	}
	desired, err := requiredInt(f, "DesiredCapacity")
	if err != nil {
		return nil, err
	}
	g, err := s.group(name)
	if err != nil {
		return nil, err
	}
	if desired > g.max {
		return nil, validationError("New SetDesiredCapacity value %d is above max value %d for the AutoScalingGroup.", desired, g.max)
	}
	if desired < g.min {
		return nil, validationError("New SetDesiredCapacity value %d is below min value %d for the AutoScalingGroup.", desired, g.min)
	}
	g.desired = desired
	return nil, s.reconcile(ctx, g)
}

func (s *Server) terminateInstanceInAutoScalingGroup(ctx context.Context, f form) (any, error) {
	id, err := f.required("InstanceId")
	if err != nil {
		return nil, err
	}
	if _, err := f.required("ShouldDecrementDesiredCapacity"); err != nil {
		return nil, err
	}
	decrement, err := f.bool("ShouldDecrementDesiredCapacity")
	if err != nil {
		return nil, err
	}
	in, ok := s.instances[id]
	if !ok || in.gone() {
		return nil, validationError("Instance Id not found - No managed instance found for instance ID: %s", id)
	}
	g, err := s.group(in.groupName)
	if err != nil {
		return nil, err
	}
	activity := xmlActivity{
		ActivityID: newUUID(), AutoScalingGroupName: g.name, StartTime: fmtTime(s.clock.Now()),
		StatusCode: "InProgress", Progress: 0, Details: "{}",
		Description: "Terminating EC2 instance: " + id,
	}
	if in.transition == event.TransitionTerminating {
		activity.Cause = "the instance is already terminating"
		return struct {
			Activity xmlActivity `xml:"Activity"`
		}{activity}, nil
	}
	if *decrement && !in.warm {
		if g.desired <= g.min {
			return nil, validationError("Currently, desiredSize equals minSize (%d). Terminating instance without replacement will violate group's min size constraint. Either set shouldDecrementDesiredCapacity flag to false or lower group's min size.", g.min)
		}
		g.desired--
		activity.Cause = fmt.Sprintf("At %s instance %s was taken out of service in response to a user request, shrinking the capacity from %d to %d.", activity.StartTime, id, g.desired+1, g.desired)
	} else {
		activity.Cause = fmt.Sprintf("At %s instance %s was taken out of service in response to a user request.", activity.StartTime, id)
	}
	s.abortLaunch(in)
	if err := s.beginTerminate(ctx, g, in, event.PlaceEC2); err != nil {
		return nil, err
	}
	if err := s.reconcile(ctx, g); err != nil {
		return nil, err
	}
	return struct {
		Activity xmlActivity `xml:"Activity"`
	}{activity}, nil
}

// abortLaunch ends the launch actions of an instance that is terminated
// while it still waits for them.
func (s *Server) abortLaunch(in *instance) {
	now := s.clock.Now()
	for _, a := range in.waiting {
		a.result, a.by, a.completed = resultAbandon, CompletedByInstanceGone, now
	}
	in.waiting = nil
}

func (s *Server) describeAutoScalingGroups(_ context.Context, f form) (any, error) {
	if f.hasPrefix("Filters.") {
		return nil, validationError("awssim does not simulate Filters")
	}
	names := f.list("AutoScalingGroupNames")
	var gs []*group
	if len(names) == 0 {
		for _, g := range s.groups {
			gs = append(gs, g)
		}
		sort.Slice(gs, func(i, j int) bool { return gs[i].name < gs[j].name })
	} else {
		for _, n := range names {
			if g, ok := s.groups[n]; ok {
				gs = append(gs, g)
			}
		}
	}
	from, to, next, err := page(f, len(gs), 50, 100)
	if err != nil {
		return nil, err
	}
	out := struct {
		Groups    []xmlGroup `xml:"AutoScalingGroups>member"`
		NextToken string     `xml:"NextToken,omitempty"`
	}{NextToken: next}
	for _, g := range gs[from:to] {
		x := xmlGroup{
			AutoScalingGroupName: g.name, AutoScalingGroupARN: g.arn,
			LaunchConfigurationName: g.launchConfigurationName, LaunchTemplate: xmlLT(g.launchTemplate),
			MinSize: g.min, MaxSize: g.max, DesiredCapacity: g.desired, DefaultCooldown: g.defaultCooldown,
			AvailabilityZones: g.availabilityZones, HealthCheckType: g.healthCheckType,
			HealthCheckGracePeriod: g.healthCheckGracePeriod, CreatedTime: fmtTime(g.created),
			VPCZoneIdentifier: g.vpcZoneIdentifier, TerminationPolicies: g.terminationPolicies,
			NewInstancesProtectedFromScaleIn: g.newInstancesProtected,
			ServiceLinkedRoleARN:             fmt.Sprintf("arn:aws:iam::%s:role/aws-service-role/autoscaling.amazonaws.com/AWSServiceRoleForAutoScaling", s.opts.AccountID),
		}
		var warmSize int32
		for _, in := range s.groupInstances(g) {
			if in.warm {
				warmSize++
				continue
			}
			x.Instances = append(x.Instances, in.xml(false))
		}
		if g.warm != nil {
			x.WarmPoolConfiguration = g.warm.xml()
			x.WarmPoolSize = aws.Int32(warmSize)
		}
		for _, t := range g.tags {
			x.Tags = append(x.Tags, xmlTag{ResourceID: g.name, ResourceType: "auto-scaling-group", Key: aws.ToString(t.Key), Value: aws.ToString(t.Value), PropagateAtLaunch: aws.ToBool(t.PropagateAtLaunch)})
		}
		out.Groups = append(out.Groups, x)
	}
	return out, nil
}

func (s *Server) describeAutoScalingInstances(_ context.Context, f form) (any, error) {
	ids := f.list("InstanceIds")
	var ins []*instance
	if len(ids) == 0 {
		for _, in := range s.sortedInstances() {
			if !in.gone() {
				ins = append(ins, in)
			}
		}
	} else {
		for _, id := range ids {
			if in, ok := s.instances[id]; ok && !in.gone() {
				ins = append(ins, in)
			}
		}
	}
	from, to, next, err := page(f, len(ins), 50, 50)
	if err != nil {
		return nil, err
	}
	out := struct {
		Instances []xmlInstance `xml:"AutoScalingInstances>member"`
		NextToken string        `xml:"NextToken,omitempty"`
	}{NextToken: next}
	for _, in := range ins[from:to] {
		out.Instances = append(out.Instances, in.xml(true))
	}
	return out, nil
}

func (s *Server) setInstanceProtection(ctx context.Context, f form) (any, error) {
	name, err := f.required("AutoScalingGroupName")
	if err != nil {
		return nil, err
	}
	if _, err := f.required("ProtectedFromScaleIn"); err != nil {
		return nil, err
	}
	protect, err := f.bool("ProtectedFromScaleIn")
	if err != nil {
		return nil, err
	}
	g, err := s.group(name)
	if err != nil {
		return nil, err
	}
	ids := f.list("InstanceIds")
	if len(ids) == 0 {
		return nil, validationError("1 validation error detected: Value null at 'instanceIds' failed to satisfy constraint: Member must not be null")
	}
	var ins []*instance
	for _, id := range ids {
		in, ok := s.instances[id]
		if !ok || in.groupName != g.name || in.gone() || in.warm {
			return nil, validationError("The instance %s is not part of Auto Scaling group %s.", id, g.name)
		}
		ins = append(ins, in)
	}
	for _, in := range ins {
		in.protected = *protect
	}
	return nil, s.reconcile(ctx, g)
}

// ---- lifecycle hooks ----

func (s *Server) hookFromForm(f form, prefix string, existing *hook) (*hook, error) {
	h := &hook{defaultResult: resultAbandon, heartbeat: DefaultHeartbeatTimeout}
	if existing != nil {
		c := *existing
		h = &c
	}
	name := f.str(prefix + "LifecycleHookName")
	if name == "" {
		return nil, validationError("1 validation error detected: Value null at 'lifecycleHookName' failed to satisfy constraint: Member must not be null")
	}
	h.name = name
	if v := f.str(prefix + "LifecycleTransition"); v != "" {
		if v != event.TransitionLaunching && v != event.TransitionTerminating {
			return nil, validationError("Invalid Lifecycle Transition: %s. Valid values are %s and %s.", v, event.TransitionLaunching, event.TransitionTerminating)
		}
		h.transition = v
	} else if existing == nil {
		return nil, validationError("LifecycleTransition is required when creating lifecycle hook %s", name)
	}
	if f.has(prefix + "HeartbeatTimeout") {
		v, err := f.int32(prefix + "HeartbeatTimeout")
		if err != nil {
			return nil, err
		}
		d := time.Duration(*v) * time.Second
		if d < s.opts.MinHeartbeatTimeout || d > MaxHeartbeatTimeout {
			return nil, validationError("Heartbeat timeout must be between %d and %d seconds, was %d", int64(s.opts.MinHeartbeatTimeout/time.Second), int64(MaxHeartbeatTimeout/time.Second), *v)
		}
		h.heartbeat = d
	}
	if v := f.str(prefix + "DefaultResult"); v != "" {
		if v != resultContinue && v != resultAbandon {
			return nil, validationError("Invalid default result: %s. Valid values are CONTINUE and ABANDON.", v)
		}
		h.defaultResult = v
	}
	if f.has(prefix + "NotificationMetadata") {
		h.metadata = f.str(prefix + "NotificationMetadata")
	}
	if f.has(prefix + "RoleARN") {
		h.roleARN = f.str(prefix + "RoleARN")
	}
	if f.has(prefix + "NotificationTargetARN") {
		t := f.str(prefix + "NotificationTargetARN")
		switch svc := targetService(t); {
		case t == "" || svc == "sqs":
		case svc == "sns":
			return nil, validationError("awssim does not simulate SNS notification targets (%s)", t)
		default:
			return nil, validationError("Invalid notification target ARN: %s", t)
		}
		h.targetARN = t
	}
	return h, nil
}

func (s *Server) putLifecycleHook(ctx context.Context, f form) (any, error) {
	name, err := f.required("AutoScalingGroupName")
	if err != nil {
		return nil, err
	}
	g, err := s.group(name)
	if err != nil {
		return nil, err
	}
	existing := g.hooks[f.str("LifecycleHookName")]
	h, err := s.hookFromForm(f, "", existing)
	if err != nil {
		return nil, err
	}
	if h.targetARN != "" && (existing == nil || existing.targetARN != h.targetARN) {
		if err := s.sendTestNotification(ctx, g, h.targetARN); err != nil {
			return nil, unableToPublish(h.targetARN, err)
		}
	}
	g.hooks[h.name] = h
	return nil, nil
}

func (s *Server) describeLifecycleHooks(_ context.Context, f form) (any, error) {
	name, err := f.required("AutoScalingGroupName")
	if err != nil {
		return nil, err
	}
	g, err := s.group(name)
	if err != nil {
		return nil, err
	}
	var hs []*hook
	if names := f.list("LifecycleHookNames"); len(names) > 0 {
		for _, n := range names {
			if h, ok := g.hooks[n]; ok {
				hs = append(hs, h)
			}
		}
	} else {
		for _, h := range g.hooks {
			hs = append(hs, h)
		}
		sort.Slice(hs, func(i, j int) bool { return hs[i].name < hs[j].name })
	}
	out := struct {
		Hooks []xmlHook `xml:"LifecycleHooks>member"`
	}{}
	for _, h := range hs {
		out.Hooks = append(out.Hooks, h.xml(g.name))
	}
	return out, nil
}

func (s *Server) deleteLifecycleHook(ctx context.Context, f form) (any, error) {
	name, err := f.required("AutoScalingGroupName")
	if err != nil {
		return nil, err
	}
	hookName, err := f.required("LifecycleHookName")
	if err != nil {
		return nil, err
	}
	g, err := s.group(name)
	if err != nil {
		return nil, err
	}
	if _, ok := g.hooks[hookName]; !ok {
		return nil, validationError("No Lifecycle Hook found with name %s for group %s", hookName, name)
	}
	delete(g.hooks, hookName)
	// Outstanding actions of the hook end: ABANDON for launching
	// instances, CONTINUE for terminating ones (DeleteLifecycleHook docs).
	for _, a := range s.actions {
		if !a.active() || a.groupName != name || a.hook.name != hookName {
			continue
		}
		result := resultContinue
		if a.transition == event.TransitionLaunching {
			result = resultAbandon
		}
		if err := s.complete(ctx, a, result, CompletedByHookDeleted); err != nil {
			return nil, err
		}
	}
	return nil, nil
}

// findAction returns the active action a CompleteLifecycleAction or
// RecordLifecycleActionHeartbeat names, or AWS's ValidationError. When the
// call names an action that has ended, that action's Rejected count grows.
func (s *Server) findAction(f form) (*action, error) {
	groupName, err := f.required("AutoScalingGroupName")
	if err != nil {
		return nil, err
	}
	hookName, err := f.required("LifecycleHookName")
	if err != nil {
		return nil, err
	}
	token, instanceID := f.str("LifecycleActionToken"), f.str("InstanceId")
	if token == "" && instanceID == "" {
		return nil, validationError("Either LifecycleActionToken or InstanceId must be specified")
	}
	var match, latest *action
	for _, a := range s.actions {
		if a.groupName != groupName || a.hook.name != hookName {
			continue
		}
		if token != "" && a.token != token || token == "" && a.inst.id != instanceID {
			continue
		}
		latest = a
		if a.active() {
			match = a
		}
	}
	if match != nil {
		return match, nil
	}
	if latest != nil {
		latest.rejected++
	}
	if token != "" {
		return nil, validationError("No active Lifecycle Action found with token %s", token)
	}
	return nil, validationError("No active Lifecycle Action found with instance ID %s", instanceID)
}

func (s *Server) completeLifecycleAction(ctx context.Context, f form) (any, error) {
	result, err := f.required("LifecycleActionResult")
	if err != nil {
		return nil, err
	}
	if result != resultContinue && result != resultAbandon {
		return nil, validationError("Invalid lifecycle action result: %s. Valid values are CONTINUE and ABANDON.", result)
	}
	a, err := s.findAction(f)
	if err != nil {
		return nil, err
	}
	a.completions++
	return nil, s.complete(ctx, a, result, CompletedByAPI)
}

func (s *Server) recordLifecycleActionHeartbeat(_ context.Context, f form) (any, error) {
	a, err := s.findAction(f)
	if err != nil {
		return nil, err
	}
	a.heartbeats++
	if a.heartbeats == 1 {
		a.firstHeartbeat = s.clock.Now()
	}
	a.deadline = minTime(s.clock.Now().Add(a.hook.heartbeat), a.globalDeadline)
	s.poke()
	return nil, nil
}

// ---- warm pools ----

func (s *Server) putWarmPool(ctx context.Context, f form) (any, error) {
	name, err := f.required("AutoScalingGroupName")
	if err != nil {
		return nil, err
	}
	g, err := s.group(name)
	if err != nil {
		return nil, err
	}
	if g.warm != nil && g.warm.pendingDelete {
		return nil, validationError("The warm pool of %s is being deleted", name)
	}
	w := &warmPool{maxPrepared: -1, poolState: types.WarmPoolStateStopped}
	if v, err := f.int32("MinSize"); err != nil {
		return nil, err
	} else if v != nil {
		if *v < 0 {
			return nil, validationError("MinSize must not be negative")
		}
		w.minSize = *v
	}
	if v, err := f.int32("MaxGroupPreparedCapacity"); err != nil {
		return nil, err
	} else if v != nil {
		if *v < -1 {
			return nil, validationError("MaxGroupPreparedCapacity must be -1 or more")
		}
		w.maxPrepared = *v
	}
	if v := f.str("PoolState"); v != "" {
		switch types.WarmPoolState(v) {
		case types.WarmPoolStateStopped, types.WarmPoolStateRunning, types.WarmPoolStateHibernated:
			w.poolState = types.WarmPoolState(v)
		default:
			return nil, validationError("Invalid PoolState: %s", v)
		}
	}
	if v, err := f.bool("InstanceReusePolicy.ReuseOnScaleIn"); err != nil {
		return nil, err
	} else if v != nil {
		w.reuseOnScaleIn = *v
	}
	g.warm = w
	return nil, s.reconcile(ctx, g)
}

func (s *Server) describeWarmPool(_ context.Context, f form) (any, error) {
	name, err := f.required("AutoScalingGroupName")
	if err != nil {
		return nil, err
	}
	g, err := s.group(name)
	if err != nil {
		return nil, err
	}
	var ins []*instance
	for _, in := range s.groupInstances(g) {
		if in.warm {
			ins = append(ins, in)
		}
	}
	from, to, next, err := page(f, len(ins), 50, 50)
	if err != nil {
		return nil, err
	}
	out := struct {
		Config    *xmlWarmPoolConfig `xml:"WarmPoolConfiguration,omitempty"`
		Instances []xmlInstance      `xml:"Instances>member"`
		NextToken string             `xml:"NextToken,omitempty"`
	}{NextToken: next}
	if g.warm != nil {
		out.Config = g.warm.xml()
	}
	for _, in := range ins[from:to] {
		out.Instances = append(out.Instances, in.xml(false))
	}
	return out, nil
}

func (s *Server) deleteWarmPool(ctx context.Context, f form) (any, error) {
	name, err := f.required("AutoScalingGroupName")
	if err != nil {
		return nil, err
	}
	g, err := s.group(name)
	if err != nil {
		return nil, err
	}
	if g.warm == nil {
		return nil, validationError("No warm pool found for Auto Scaling group %s", name)
	}
	force, err := f.bool("ForceDelete")
	if err != nil {
		return nil, err
	}
	if aws.ToBool(force) {
		for _, in := range s.groupInstances(g) {
			if in.warm {
				if err := s.terminateNow(ctx, in); err != nil {
					return nil, err
				}
			}
		}
		g.warm = nil
		return nil, s.reconcile(ctx, g)
	}
	g.warm.pendingDelete = true
	return nil, s.reconcile(ctx, g)
}
