package deploy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
	astypes "github.com/aws/aws-sdk-go-v2/service/autoscaling/types"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	ebtypes "github.com/aws/aws-sdk-go-v2/service/eventbridge/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"lifeboat.dev/lifeboat/test/awssim"
	"lifeboat.dev/lifeboat/test/testenv"
)

const terminating = "autoscaling:EC2_INSTANCE_TERMINATING"

// world is one test's installation: a release of the chart in its own
// namespace, and its own AWS side in moto: a queue, an event bus with the
// rules of deploy/aws/lifeboat.cfn.json targeting it, and Auto Scaling
// groups whose hooks notify the queue directly. Several worlds run at once
// without seeing each other's events (each has its own bus and queue).
type world struct {
	t       *testing.T
	ctx     context.Context
	ns      string
	release string
	chart   *rendered
	prefix  string

	queueURL, queueARN, bus string
	as                      *autoscaling.Client
	eb                      *eventbridge.Client
	sqs                     *sqs.Client
}

// newWorld creates the AWS side and renders the chart for it with values
// (queueURL, awsRegion and clusterName are added); in IMDS mode (values
// mode: imds) there is no AWS side.
func newWorld(t *testing.T, ctx context.Context, values map[string]any) (*world, error) {
	w := &world{t: t, ctx: ctx, ns: kube.Namespace(t), release: strings.ToLower(testenv.UniqueName("lb"))}
	w.prefix = w.release
	cfg := testenv.MotoAWSConfig()
	w.sqs = sqs.NewFromConfig(cfg, func(o *sqs.Options) { o.BaseEndpoint = aws.String(moto.Endpoint) })
	w.eb = eventbridge.NewFromConfig(cfg, func(o *eventbridge.Options) { o.BaseEndpoint = aws.String(moto.Endpoint) })
	w.as = autoscaling.NewFromConfig(cfg, func(o *autoscaling.Options) { o.BaseEndpoint = aws.String(sim.Endpoint()) })
	v := maps.Clone(values)
	if v["mode"] != "imds" {
		if err := w.createStack(); err != nil {
			return nil, err
		}
		v["queueURL"], v["awsRegion"], v["clusterName"] = w.queueURL, "us-east-1", clusterName
	}
	r, err := render(w.release, w.ns, v)
	if err != nil {
		return nil, err
	}
	w.chart = r
	return w, nil
}

// createStack creates what deploy/aws/lifeboat.cfn.json creates (the queue
// and every rule targeting it), with the rules on the world's own bus.
func (w *world) createStack() error {
	tmpl, err := testenv.LoadTemplate()
	if err != nil {
		return err
	}
	rules, err := tmpl.Rules()
	if err != nil {
		return err
	}
	out, err := w.sqs.CreateQueue(w.ctx, &sqs.CreateQueueInput{QueueName: aws.String(w.prefix + "-queue"), Attributes: map[string]string{
		"MessageRetentionPeriod": "300", "SqsManagedSseEnabled": "true",
	}})
	if err != nil {
		return fmt.Errorf("creating queue: %w", err)
	}
	w.queueURL = aws.ToString(out.QueueUrl)
	attrs, err := w.sqs.GetQueueAttributes(w.ctx, &sqs.GetQueueAttributesInput{QueueUrl: out.QueueUrl, AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameQueueArn}})
	if err != nil {
		return fmt.Errorf("reading queue ARN: %w", err)
	}
	w.queueARN = attrs.Attributes["QueueArn"]
	w.bus = w.prefix + "-bus"
	if _, err := w.eb.CreateEventBus(w.ctx, &eventbridge.CreateEventBusInput{Name: aws.String(w.bus)}); err != nil {
		return fmt.Errorf("creating event bus: %w", err)
	}
	for _, r := range rules {
		name := w.prefix + "-" + r.Name
		if _, err := w.eb.PutRule(w.ctx, &eventbridge.PutRuleInput{Name: aws.String(name), EventBusName: aws.String(w.bus), EventPattern: aws.String(r.Pattern), State: ebtypes.RuleState(r.State)}); err != nil {
			return fmt.Errorf("creating rule %s: %w", name, err)
		}
		if _, err := w.eb.PutTargets(w.ctx, &eventbridge.PutTargetsInput{Rule: aws.String(name), EventBusName: aws.String(w.bus),
			Targets: []ebtypes.Target{{Id: aws.String("lifeboat"), Arn: aws.String(w.queueARN)}}}); err != nil {
			return fmt.Errorf("targeting rule %s: %w", name, err)
		}
	}
	return nil
}

// rbacObjects are the rendered ServiceAccount, ClusterRoles, Roles and bindings.
func (w *world) rbacObjects() []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, o := range w.chart.Objects {
		switch o.GetKind() {
		case "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding":
			out = append(out, o)
		}
	}
	return out
}

// container is the rendered Deployment's (or DaemonSet's) lifeboat container.
func (w *world) container() corev1.Container {
	if ds := w.chart.find("DaemonSet"); len(ds) > 0 {
		return into[appsv1.DaemonSet](w.t, ds[0]).Spec.Template.Spec.Containers[0]
	}
	d := into[appsv1.Deployment](w.t, w.chart.one(w.t, "Deployment"))
	return d.Spec.Template.Spec.Containers[0]
}

// kubeconfig writes a kubeconfig for the chart's ServiceAccount that talks to
// server (the apiserver, or a recording proxy in front of it).
func (w *world) kubeconfig(server string, ca []byte) (string, error) {
	sa := w.chart.one(w.t, "ServiceAccount").GetName()
	tok, err := kube.TokenFor(w.ctx, w.ns, sa)
	if err != nil {
		return "", err
	}
	return writeKubeconfig(w.t, server, ca, sa, tok)
}

// writeKubeconfig writes a kubeconfig for user, authenticated by token.
func writeKubeconfig(t *testing.T, server string, ca []byte, sa, tok string) (string, error) {
	cfg := clientcmdapi.NewConfig()
	cluster := &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: ca}
	cfg.Clusters["testenv"] = cluster
	cfg.AuthInfos[sa] = &clientcmdapi.AuthInfo{Token: tok}
	cfg.Contexts["testenv"] = &clientcmdapi.Context{Cluster: "testenv", AuthInfo: sa}
	cfg.CurrentContext = "testenv"
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		return "", err
	}
	return path, nil
}

// lifeboatOptions say how a replica is run.
type lifeboatOptions struct {
	name       string // process and pod name
	node       string // the pod's node (spec.nodeName), IMDS mode
	kubeconfig string
	endpoints  string   // --aws-endpoint, queue mode
	extra      []string // appended flags (later flags win)
	bin        string   // the binary; empty: lifeboat
	listen     string   // --listen; empty: a free port of 127.0.0.1
}

// startLifeboat runs the real binary as the chart's container would run:
// its rendered arguments, and its environment with the downward API
// resolved for a pod named o.name in the release namespace.
func (w *world) startLifeboat(o lifeboatOptions) (*proc, error) {
	c := w.container()
	args := append(append([]string(nil), c.Args...), "--kubeconfig="+o.kubeconfig)
	if o.endpoints != "" {
		args = append(args, "--aws-endpoint="+o.endpoints)
	}
	args = append(args, o.extra...)
	env := testenv.AWSEnv()
	for _, e := range c.Env {
		switch {
		case e.ValueFrom == nil:
			env = append(env, e.Name+"="+e.Value)
		case e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "metadata.name":
			env = append(env, e.Name+"="+o.name)
		case e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "metadata.namespace":
			env = append(env, e.Name+"="+w.ns)
		case e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "spec.nodeName" && o.node != "":
			env = append(env, e.Name+"="+o.node)
		default:
			return nil, fmt.Errorf("env %s: no downward API value in this test for %+v", e.Name, e.ValueFrom)
		}
	}
	bin := lifeboatBin
	if o.bin != "" {
		bin = o.bin
	}
	if o.listen != "" {
		return w.startServing(o.name, bin, append(args, "--listen="+o.listen), env, o.listen)
	}
	// --listen gets a free port; if another process binds it before
	// lifeboat does, lifeboat exits and starts again on another (issue 22).
	for attempt := 1; ; attempt++ {
		port, err := testenv.FreePort()
		if err != nil {
			return nil, err
		}
		listen := fmt.Sprintf("127.0.0.1:%d", port)
		p, err := w.startServing(o.name, bin, append(args, "--listen="+listen), env, listen)
		if err != nil && attempt < 5 && p != nil && testenv.PortTakenIn(p.log()) {
			continue
		}
		return p, err
	}
}

// startServing starts bin with args and waits until it serves /healthz
// on listen; on error it returns the process too.
func (w *world) startServing(name, bin string, args, env []string, listen string) (*proc, error) {
	p, err := startProc(w.t, name, bin, args, env)
	if err != nil {
		return nil, err
	}
	p.healthURL = "http://" + listen + "/healthz"
	client := &http.Client{Timeout: time.Second}
	err = eventually(w.ctx, 20*time.Second, name+" serving /healthz", func() (bool, error) {
		if done, err := p.exited(); done {
			return false, fmt.Errorf("%s exited (%v):\n%s", name, err, p.tail(20))
		}
		resp, err := client.Get(p.healthURL)
		if err != nil {
			return false, nil
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	})
	if err != nil {
		return p, err
	}
	return p, nil
}

// endpoints is the usual --aws-endpoint: moto, and the simulator for Auto Scaling.
func endpoints(sqsURL, autoscalingURL string) string {
	return "sqs=" + sqsURL + ",ec2=" + moto.Endpoint + ",eventbridge=" + moto.Endpoint + ",sts=" + moto.Endpoint + ",autoscaling=" + autoscalingURL
}

// createGroup creates an Auto Scaling group of the cluster and returns its
// instances once each has a Ready node.
func (w *world) createGroup(desired int32) (string, []string, error) {
	name := w.prefix + "-" + testenv.UniqueName("g")
	_, err := w.as.CreateAutoScalingGroup(w.ctx, &autoscaling.CreateAutoScalingGroupInput{
		AutoScalingGroupName: aws.String(name), MinSize: aws.Int32(0), MaxSize: aws.Int32(5), DesiredCapacity: aws.Int32(desired),
		AvailabilityZones: []string{"us-east-1a"},
		LaunchTemplate:    &astypes.LaunchTemplateSpecification{LaunchTemplateName: aws.String("lt"), Version: aws.String("$Latest")},
		Tags:              []astypes.Tag{{Key: aws.String("kubernetes.io/cluster/" + clusterName), Value: aws.String("owned"), PropagateAtLaunch: aws.Bool(true)}},
	})
	if err != nil {
		return "", nil, fmt.Errorf("creating group %s: %w", name, err)
	}
	var ids []string
	err = eventually(w.ctx, 30*time.Second, fmt.Sprintf("%d instances of %s in service with nodes", desired, name), func() (bool, error) {
		ids = ids[:0]
		for _, in := range sim.Instances() {
			if in.GroupName == name && in.LifecycleState == astypes.LifecycleStateInService && nodeOf(in.ID) != "" {
				ids = append(ids, in.ID)
			}
		}
		return len(ids) == int(desired), nil
	})
	if err != nil {
		return "", nil, err
	}
	for _, id := range ids {
		node := nodeOf(id)
		w.t.Cleanup(func() { _ = kube.DeleteNode(context.Background(), node) })
	}
	return name, ids, nil
}

// putHook puts a terminate lifecycle hook that notifies the world's queue
// directly (Auto Scaling -> SQS), with a heartbeat timeout in seconds.
func (w *world) putHook(group string, timeout int32) error {
	_, err := w.as.PutLifecycleHook(w.ctx, &autoscaling.PutLifecycleHookInput{
		AutoScalingGroupName: aws.String(group), LifecycleHookName: aws.String("drain"),
		LifecycleTransition: aws.String(terminating), HeartbeatTimeout: aws.Int32(timeout), DefaultResult: aws.String("ABANDON"),
		NotificationTargetARN: aws.String(w.queueARN), RoleARN: aws.String("arn:aws:iam::123456789012:role/lifeboat-hook"),
	})
	if err != nil {
		return fmt.Errorf("putting hook on %s: %w", group, err)
	}
	return nil
}

func (w *world) scaleTo(group string, n int32) error {
	_, err := w.as.SetDesiredCapacity(w.ctx, &autoscaling.SetDesiredCapacityInput{AutoScalingGroupName: aws.String(group), DesiredCapacity: aws.Int32(n)})
	if err != nil {
		return fmt.Errorf("scaling %s to %d: %w", group, n, err)
	}
	return nil
}

// putSpot publishes a Spot interruption warning on the world's bus, sent at
// sent (the deadline is two minutes later).
func (w *world) putSpot(instanceID string, sent time.Time) error {
	b, err := json.Marshal(map[string]string{"instance-id": instanceID, "instance-action": "terminate"})
	if err != nil {
		return err
	}
	out, err := w.eb.PutEvents(w.ctx, &eventbridge.PutEventsInput{Entries: []ebtypes.PutEventsRequestEntry{{
		EventBusName: aws.String(w.bus), Source: aws.String("aws.ec2"), DetailType: aws.String("EC2 Spot Instance Interruption Warning"),
		Detail: aws.String(string(b)), Time: aws.Time(sent),
	}}})
	if err != nil {
		return fmt.Errorf("putting spot interruption: %w", err)
	}
	if out.FailedEntryCount > 0 {
		return fmt.Errorf("putting spot interruption: %d entries failed", out.FailedEntryCount)
	}
	return nil
}

// action returns the lifecycle action of an instance for a transition.
func action(instanceID, transition string) (awssim.Action, bool) {
	var found awssim.Action
	ok := false
	for _, a := range sim.Actions() {
		if a.InstanceID == instanceID && a.Transition == transition {
			found, ok = a, true
		}
	}
	return found, ok
}

// queueEmpty reports whether the world's queue holds no message, visible or in flight.
func (w *world) queueEmpty() (bool, error) {
	out, err := w.sqs.GetQueueAttributes(w.ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(w.queueURL),
		AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameApproximateNumberOfMessages, sqstypes.QueueAttributeNameApproximateNumberOfMessagesNotVisible}})
	if err != nil {
		return false, err
	}
	return out.Attributes["ApproximateNumberOfMessages"] == "0" && out.Attributes["ApproximateNumberOfMessagesNotVisible"] == "0", nil
}

// nodeEvents counts the Events with reason on the node (their count included).
func nodeEvents(ctx context.Context, node, reason string) (int, error) {
	list, err := kube.Client.CoreV1().Events(metav1.NamespaceDefault).List(ctx, metav1.ListOptions{
		FieldSelector: fields.Set{"involvedObject.name": node, "reason": reason}.String(),
	})
	if err != nil {
		return 0, err
	}
	n := 0
	for _, e := range list.Items {
		n += max(int(e.Count), 1)
	}
	return n, nil
}

// proc is a lifeboat process. Unlike testenv.Process it can be paused
// (SIGSTOP/SIGCONT) as well as killed.
type proc struct {
	name      string
	logPath   string
	healthURL string
	cmd       *exec.Cmd
	done      chan struct{}
	err       error
	stopOnce  sync.Once
}

func startProc(t *testing.T, name, bin string, args, env []string) (*proc, error) {
	logPath := filepath.Join(t.TempDir(), name+".log")
	f, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.Env = append(os.Environ(), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		f.Close()
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	p := &proc{name: name, logPath: logPath, cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		f.Close()
		close(p.done)
	}()
	t.Cleanup(func() {
		p.stop()
		if t.Failed() {
			t.Logf("---- %s log (last 60 lines) ----\n%s", name, p.tail(60))
		}
	})
	return p, nil
}

// signal sends sig to the process.
func (p *proc) signal(sig syscall.Signal) error { return p.cmd.Process.Signal(sig) }

// kill ends the process at once (SIGKILL), as a crash or kill -9 would.
func (p *proc) kill() {
	p.stopOnce.Do(func() {
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-p.done
	})
}

// exited reports whether the process has ended, and how.
func (p *proc) exited() (bool, error) {
	select {
	case <-p.done:
		return true, p.err
	default:
		return false, nil
	}
}

// stop ends the process: SIGCONT (it may be paused), SIGTERM, SIGKILL after 5 s.
func (p *proc) stop() {
	p.stopOnce.Do(func() {
		pgid := -p.cmd.Process.Pid
		_ = syscall.Kill(pgid, syscall.SIGCONT)
		_ = syscall.Kill(pgid, syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(5 * time.Second):
			_ = syscall.Kill(pgid, syscall.SIGKILL)
			<-p.done
		}
	})
}

func (p *proc) log() string {
	b, err := os.ReadFile(p.logPath)
	if err != nil {
		return fmt.Sprintf("(no log: %v)", err)
	}
	return string(b)
}

func (p *proc) tail(n int) string {
	lines := strings.Split(strings.TrimRight(p.log(), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// refused returns the first log line in which RBAC refused lifeboat a
// request, or "".
func (p *proc) refused() string {
	for _, l := range strings.Split(p.log(), "\n") {
		if strings.Contains(l, `is forbidden: User \"`) || strings.Contains(l, `is forbidden: User "`) {
			return l
		}
	}
	return ""
}

// healthy returns an error when the process exited or was refused by RBAC.
func (p *proc) healthy() error {
	if done, err := p.exited(); done {
		return fmt.Errorf("%s exited (%v): %s", p.name, err, p.tail(5))
	}
	if l := p.refused(); l != "" {
		return errors.New(p.name + " was refused by the API server: " + l)
	}
	return nil
}
