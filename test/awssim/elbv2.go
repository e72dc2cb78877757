package awssim

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// The Elastic Load Balancing v2 extension (query protocol, version
// 2015-12-01), served on the same endpoint as Auto Scaling (told apart by
// the Version parameter). It models what moto 5.2's ELBv2 does not: the
// deregistration delay. In moto a deregistered target is gone at once, and
// deregistration_delay.timeout_seconds is only validated; here a
// deregistered target is listed as draining (Target.DeregistrationInProgress)
// for the target group's delay (default 300 s, as on AWS), then no longer
// listed. Registered targets are healthy (no health checks run, as in moto).
//
// Modelled: CreateTargetGroup, DeleteTargetGroup, DescribeTargetGroups
// (PageSize, Marker, TargetGroupArns), ModifyTargetGroupAttributes
// (deregistration_delay.timeout_seconds only), RegisterTargets,
// DeregisterTargets, DescribeTargetHealth. Load balancers, listeners and
// health checks are not: every target group counts as in use.
//
// The model has its own lock (never held with the Auto Scaling one) and
// reads the Server's clock.

const (
	elbAPIVersion = "2015-12-01"
	elbXMLNS      = "http://elasticloadbalancing.amazonaws.com/doc/2015-12-01/"
	// elbDefaultDelay is AWS's default deregistration delay.
	elbDefaultDelay = 300 * time.Second
)

type elbModel struct {
	mu     sync.Mutex
	groups []*targetGroup // creation order
	seq    int
}

type targetGroup struct {
	arn, name, protocol, vpc, typ string
	port                          int
	delay                         time.Duration
	targets                       []*elbTarget
}

type elbTarget struct {
	id           string
	port         int
	deregistered time.Time // zero: registered
}

func (t *elbTarget) key() string { return t.id + ":" + strconv.Itoa(t.port) }

type xmlTargetGroup struct {
	TargetGroupArn  string `xml:"TargetGroupArn"`
	TargetGroupName string `xml:"TargetGroupName"`
	Protocol        string `xml:"Protocol,omitempty"`
	Port            int    `xml:"Port,omitempty"`
	VpcID           string `xml:"VpcId,omitempty"`
	TargetType      string `xml:"TargetType"`
}

type xmlTargetHealthDescription struct {
	Target struct {
		ID   string `xml:"Id"`
		Port int    `xml:"Port"`
	} `xml:"Target"`
	TargetHealth struct {
		State       string `xml:"State"`
		Reason      string `xml:"Reason,omitempty"`
		Description string `xml:"Description,omitempty"`
	} `xml:"TargetHealth"`
}

// serveELB answers one ELBv2 request.
func (s *Server) serveELB(w http.ResponseWriter, requestID, action string, f form) {
	m := &s.elb
	m.mu.Lock()
	result, err := s.elbHandle(action, f)
	m.mu.Unlock()
	if err != nil {
		writeError(w, requestID, err)
		return
	}
	var buf bytes.Buffer
	buf.WriteString(xml.Header)
	fmt.Fprintf(&buf, `<%sResponse xmlns="%s">`, action, elbXMLNS)
	if result == nil {
		result = struct{}{}
	}
	if err := xml.NewEncoder(&buf).EncodeElement(result, xml.StartElement{Name: xml.Name{Local: action + "Result"}}); err != nil {
		writeError(w, requestID, &apiError{status: http.StatusInternalServerError, typ: "Receiver", code: "InternalFailure", message: err.Error()})
		return
	}
	fmt.Fprintf(&buf, `<ResponseMetadata><RequestId>%s</RequestId></ResponseMetadata></%sResponse>`, requestID, action)
	w.Header().Set("Content-Type", "text/xml")
	w.Header().Set("X-Amzn-Requestid", requestID)
	_, _ = w.Write(buf.Bytes())
}

// elbHandle runs one action with the ELBv2 lock held.
func (s *Server) elbHandle(action string, f form) (any, *apiError) {
	switch action {
	case "CreateTargetGroup":
		return s.createTargetGroup(f)
	case "DeleteTargetGroup":
		g, err := s.elbGroup(f)
		if err != nil {
			return nil, err
		}
		s.elb.groups = slices.DeleteFunc(s.elb.groups, func(x *targetGroup) bool { return x == g })
		return nil, nil
	case "DescribeTargetGroups":
		return s.describeTargetGroups(f)
	case "ModifyTargetGroupAttributes":
		return s.modifyTargetGroupAttributes(f)
	case "RegisterTargets", "DeregisterTargets":
		return s.changeTargets(f, action == "RegisterTargets")
	case "DescribeTargetHealth":
		return s.describeTargetHealth(f)
	}
	return nil, senderError("InvalidAction", "The action %s is not valid for this web service.", action)
}

func (g *targetGroup) xml() xmlTargetGroup {
	return xmlTargetGroup{TargetGroupArn: g.arn, TargetGroupName: g.name, Protocol: g.protocol, Port: g.port, VpcID: g.vpc, TargetType: g.typ}
}

func (s *Server) createTargetGroup(f form) (any, *apiError) {
	name := f.str("Name")
	if name == "" || len(name) > 32 {
		return nil, validationError("Target group name '%s' must be 1-32 characters", name)
	}
	typ := f.str("TargetType")
	if typ == "" {
		typ = "instance"
	}
	if !slices.Contains([]string{"instance", "ip", "lambda", "alb"}, typ) {
		return nil, validationError("Value '%s' at 'targetType' failed to satisfy constraint: Member must satisfy enum value set: [instance, ip, lambda, alb]", typ)
	}
	port := 0
	if typ != "lambda" {
		p, err := strconv.Atoi(f.str("Port"))
		if err != nil || p < 1 || p > 65535 {
			return nil, validationError("A port must be specified for target type '%s'", typ)
		}
		port = p
		if f.str("VpcId") == "" || f.str("Protocol") == "" {
			return nil, validationError("A VPC ID and a protocol must be specified for target type '%s'", typ)
		}
	}
	for _, g := range s.elb.groups {
		if g.name == name {
			return nil, senderError("DuplicateTargetGroupName", "A target group with the same name '%s' exists", name)
		}
	}
	s.elb.seq++
	g := &targetGroup{
		arn:  fmt.Sprintf("arn:aws:elasticloadbalancing:%s:%s:targetgroup/%s/%016x", s.opts.Region, s.opts.AccountID, name, s.elb.seq),
		name: name, protocol: f.str("Protocol"), vpc: f.str("VpcId"), typ: typ, port: port, delay: elbDefaultDelay,
	}
	s.elb.groups = append(s.elb.groups, g)
	return struct {
		TargetGroups []xmlTargetGroup `xml:"TargetGroups>member"`
	}{[]xmlTargetGroup{g.xml()}}, nil
}

func (s *Server) elbGroup(f form) (*targetGroup, *apiError) {
	arn := f.str("TargetGroupArn")
	if arn == "" {
		return nil, validationError("1 validation error detected: Value null at 'targetGroupArn' failed to satisfy constraint: Member must not be null")
	}
	for _, g := range s.elb.groups {
		if g.arn == arn {
			return g, nil
		}
	}
	return nil, senderError("TargetGroupNotFound", "One or more target groups not found")
}

func (s *Server) describeTargetGroups(f form) (any, *apiError) {
	groups := s.elb.groups
	if arns := f.list("TargetGroupArns"); len(arns) > 0 {
		groups = nil
		for _, arn := range arns {
			i := slices.IndexFunc(s.elb.groups, func(g *targetGroup) bool { return g.arn == arn })
			if i < 0 {
				return nil, senderError("TargetGroupNotFound", "One or more target groups not found")
			}
			groups = append(groups, s.elb.groups[i])
		}
	}
	size := 400
	if v := f.str("PageSize"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 400 {
			return nil, validationError("Value '%s' at 'pageSize' failed to satisfy constraint: Member must have value between 1 and 400", v)
		}
		size = n
	}
	from := 0
	if m := f.str("Marker"); m != "" {
		n, err := strconv.Atoi(strings.TrimPrefix(m, "awssim-"))
		if err != nil || !strings.HasPrefix(m, "awssim-") || n < 0 {
			return nil, validationError("Invalid marker '%s'", m)
		}
		from = min(n, len(groups))
	}
	to := min(from+size, len(groups))
	out := struct {
		TargetGroups []xmlTargetGroup `xml:"TargetGroups>member"`
		NextMarker   string           `xml:"NextMarker,omitempty"`
	}{TargetGroups: []xmlTargetGroup{}}
	for _, g := range groups[from:to] {
		out.TargetGroups = append(out.TargetGroups, g.xml())
	}
	if to < len(groups) {
		out.NextMarker = "awssim-" + strconv.Itoa(to)
	}
	return out, nil
}

func (s *Server) modifyTargetGroupAttributes(f form) (any, *apiError) {
	g, err := s.elbGroup(f)
	if err != nil {
		return nil, err
	}
	for _, p := range f.members("Attributes") {
		key, value := f.str(p+"Key"), f.str(p+"Value")
		if key != "deregistration_delay.timeout_seconds" {
			return nil, validationError("awssim models only the attribute deregistration_delay.timeout_seconds, not '%s'", key)
		}
		n, err := strconv.Atoi(value)
		if err != nil || n < 0 || n > 3600 {
			return nil, validationError("'%s' must be an integer from 0 to 3600", key)
		}
		g.delay = time.Duration(n) * time.Second
	}
	type attr struct {
		Key   string `xml:"Key"`
		Value string `xml:"Value"`
	}
	return struct {
		Attributes []attr `xml:"Attributes>member"`
	}{[]attr{{"deregistration_delay.timeout_seconds", strconv.Itoa(int(g.delay / time.Second))}}}, nil
}

// targetsOf reads Targets.member.N.Id/Port (the group's port by default).
func targetsOf(f form, g *targetGroup) ([]*elbTarget, *apiError) {
	var out []*elbTarget
	for _, p := range f.members("Targets") {
		t := &elbTarget{id: f.str(p + "Id"), port: g.port}
		if t.id == "" {
			return nil, validationError("A target ID must be specified")
		}
		if v := f.str(p + "Port"); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 || n > 65535 {
				return nil, validationError("Invalid port '%s'", v)
			}
			t.port = n
		}
		out = append(out, t)
	}
	return out, nil
}

// prune drops the targets whose deregistration delay has passed.
func (s *Server) prune(g *targetGroup, now time.Time) {
	g.targets = slices.DeleteFunc(g.targets, func(t *elbTarget) bool {
		return !t.deregistered.IsZero() && !now.Before(t.deregistered.Add(g.delay))
	})
}

func (s *Server) changeTargets(f form, register bool) (any, *apiError) {
	g, err := s.elbGroup(f)
	if err != nil {
		return nil, err
	}
	ts, err := targetsOf(f, g)
	if err != nil {
		return nil, err
	}
	if len(ts) == 0 {
		return nil, validationError("1 validation error detected: Value null at 'targets' failed to satisfy constraint: Member must not be null")
	}
	now := s.clock.Now()
	s.prune(g, now)
	for _, t := range ts {
		i := slices.IndexFunc(g.targets, func(x *elbTarget) bool { return x.key() == t.key() })
		switch {
		case register && i < 0:
			g.targets = append(g.targets, t)
		case register:
			g.targets[i].deregistered = time.Time{}
		case i >= 0 && g.targets[i].deregistered.IsZero():
			g.targets[i].deregistered = now
		}
	}
	return nil, nil
}

func (s *Server) describeTargetHealth(f form) (any, *apiError) {
	g, err := s.elbGroup(f)
	if err != nil {
		return nil, err
	}
	asked, err := targetsOf(f, g)
	if err != nil {
		return nil, err
	}
	s.prune(g, s.clock.Now())
	describe := func(t *elbTarget, registered *elbTarget) xmlTargetHealthDescription {
		var d xmlTargetHealthDescription
		d.Target.ID, d.Target.Port = t.id, t.port
		switch {
		case registered == nil:
			d.TargetHealth.State, d.TargetHealth.Reason, d.TargetHealth.Description = "unused", "Target.NotRegistered", "Target is not registered to the target group"
		case !registered.deregistered.IsZero():
			d.TargetHealth.State, d.TargetHealth.Reason, d.TargetHealth.Description = "draining", "Target.DeregistrationInProgress", "Target deregistration is in progress"
		default:
			d.TargetHealth.State = "healthy"
		}
		return d
	}
	out := struct {
		TargetHealthDescriptions []xmlTargetHealthDescription `xml:"TargetHealthDescriptions>member"`
	}{TargetHealthDescriptions: []xmlTargetHealthDescription{}}
	if len(asked) == 0 {
		for _, t := range g.targets {
			out.TargetHealthDescriptions = append(out.TargetHealthDescriptions, describe(t, t))
		}
		return out, nil
	}
	for _, a := range asked {
		var reg *elbTarget
		if i := slices.IndexFunc(g.targets, func(x *elbTarget) bool { return x.key() == a.key() }); i >= 0 {
			reg = g.targets[i]
		}
		out.TargetHealthDescriptions = append(out.TargetHealthDescriptions, describe(a, reg))
	}
	return out, nil
}
