// Package poll looks at Elastic Load Balancing v2 target groups for
// package lbdrain: it lists the instance and IP target groups
// (DescribeTargetGroups, paged, the list reused for a minute), reads their
// targets' health (DescribeTargetHealth, one call a group, an answer
// reused by other nodes' waits for one poll), remembers a node's pod IPs
// from its cordon, and waits until lbdrain.Decide releases the node.
//
// It only reads AWS and Kubernetes. It is apart from lbdrain so that the
// controller (linked into the IMDS-only build) does not link the ELBv2
// client.
package poll

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	elbv2 "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancingv2"
	"github.com/aws/smithy-go"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/utils/clock"

	"lifeboat.dev/lifeboat/internal/kube"
	"lifeboat.dev/lifeboat/internal/lbdrain"
)

// API is the part of the ELBv2 client the Waiter uses.
type API interface {
	DescribeTargetGroups(context.Context, *elbv2.DescribeTargetGroupsInput, ...func(*elbv2.Options)) (*elbv2.DescribeTargetGroupsOutput, error)
	DescribeTargetHealth(context.Context, *elbv2.DescribeTargetHealthInput, ...func(*elbv2.Options)) (*elbv2.DescribeTargetHealthOutput, error)
}

var _ API = (*elbv2.Client)(nil)

// Options configure a Waiter.
type Options struct {
	// Poll is the time between two looks at the target groups that hold a
	// node (default 5 s). A target group's health is reused for that long
	// by the waits of other nodes.
	Poll time.Duration
	// GroupsTTL is how long the list of target groups is reused (default
	// 1 m): a burst of terminations lists them once.
	GroupsTTL time.Duration
}

// pageSize is DescribeTargetGroups' largest page.
const pageSize = 400

// parallel bounds the DescribeTargetHealth calls of one look.
const parallel = 8

// Waiter waits for target groups to let nodes go. Safe for concurrent use.
type Waiter struct {
	api   API
	kube  kube.Client
	clock clock.Clock
	log   *slog.Logger
	o     Options

	mu     sync.Mutex
	noted  map[string][]string // node -> pod IPs at its cordon
	health map[string]healthEntry

	groupsMu sync.Mutex // held while the list is fetched: one fetch at a time
	groups   []group
	groupsAt time.Time
}

type group struct {
	arn string
	typ lbdrain.TargetType
}

type healthEntry struct {
	at   time.Time
	regs []lbdrain.Registration
}

// New returns a Waiter.
func New(api API, k kube.Client, clk clock.Clock, log *slog.Logger, o Options) *Waiter {
	if o.Poll <= 0 {
		o.Poll = 5 * time.Second
	}
	if o.GroupsTTL <= 0 {
		o.GroupsTTL = time.Minute
	}
	return &Waiter{api: api, kube: k, clock: clk, log: log, o: o, noted: map[string][]string{}, health: map[string]healthEntry{}}
}

// Note remembers the IPs of the pods on node (called at its cordon, while
// they are there: IP targets are pod IPs, gone from Kubernetes once the
// drain has evicted them). A failed list is logged: Wait then knows only
// the pods left on the node.
func (w *Waiter) Note(ctx context.Context, node string) {
	ips, err := w.podIPs(ctx, node)
	if err != nil {
		w.log.Warn("listing pod IPs for the load balancer wait failed", "node", node, "error", err.Error())
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.noted[node] = merge(w.noted[node], ips)
}

// Forget drops what Note remembered of node.
func (w *Waiter) Forget(node string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.noted, node)
}

// Wait looks at the target groups until none holds node (its instance
// instanceID, its pod IPs from Note and those still on it, its
// InternalIP), or until the bound until; waiting is called once, with the
// first decision to hold. It returns only ctx's error.
func (w *Waiter) Wait(ctx context.Context, node, instanceID string, until time.Time, waiting func(lbdrain.Decision)) (lbdrain.Outcome, error) {
	start := w.clock.Now()
	n, err := w.node(ctx, node, instanceID)
	if err != nil {
		w.log.Warn("reading node addresses for the load balancer wait failed", "node", node, "error", err.Error())
	}
	pending := map[string]group{} // target groups not yet known to hold nothing of n
	listed := false
	last := map[string][]lbdrain.Registration{}
	held := false
	for {
		var lookErr error
		if !listed {
			groups, err := w.targetGroups(ctx)
			if err == nil {
				listed = true
				for _, g := range groups {
					if (g.typ == lbdrain.Instance && n.InstanceID != "") || (g.typ == lbdrain.IP && len(n.IPs) > 0) {
						pending[g.arn] = g
					}
				}
			}
			lookErr = err
		}
		if listed {
			lookErr = errors.Join(lookErr, w.look(ctx, n, pending, last))
		}
		if ctx.Err() != nil {
			return lbdrain.Outcome{}, ctx.Err()
		}
		now := w.clock.Now()
		if lookErr != nil && isAccessDenied(lookErr) {
			return lbdrain.Outcome{Result: lbdrain.Unknown, Waited: now.Sub(start), Err: lookErr}, nil
		}
		var regs []lbdrain.Registration
		for _, arn := range slices.Sorted(maps.Keys(last)) {
			regs = append(regs, last[arn]...)
		}
		d := lbdrain.Decide(n, regs, now, until)
		if d.Verdict == lbdrain.Release && lookErr != nil {
			// A target group that could not be read may hold the node.
			d.Verdict = lbdrain.Hold
			if !now.Before(until) {
				d.Verdict = lbdrain.CutShort
			}
		}
		switch d.Verdict {
		case lbdrain.Release:
			if held {
				return lbdrain.Outcome{Result: lbdrain.Drained, Waited: now.Sub(start)}, nil
			}
			return lbdrain.Outcome{Result: lbdrain.NotHeld}, nil
		case lbdrain.CutShort:
			return lbdrain.Outcome{Result: lbdrain.NotDrained, Waited: now.Sub(start), Held: d.Held, Err: lookErr}, nil
		}
		if !held {
			held = true
			if waiting != nil {
				waiting(d)
			}
		}
		select {
		case <-ctx.Done():
			return lbdrain.Outcome{}, ctx.Err()
		case <-w.clock.After(min(w.o.Poll, until.Sub(now))):
		}
	}
}

// look reads the health of the pending target groups into last (by ARN);
// a group that holds nothing of n (or is gone) leaves pending and last for
// the rest of the wait: a node excluded from load balancers is not added
// back. A group that could not be read stays, with what it said before.
func (w *Waiter) look(ctx context.Context, n lbdrain.Node, pending map[string]group, last map[string][]lbdrain.Registration) error {
	type answer struct {
		g    group
		regs []lbdrain.Registration
		err  error
	}
	answers := make(chan answer, len(pending))
	sem := make(chan struct{}, parallel)
	var wg sync.WaitGroup
	for _, g := range pending {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			regs, err := w.targetHealth(ctx, g)
			answers <- answer{g, regs, err}
		})
	}
	wg.Wait()
	close(answers)
	var errs []error
	for a := range answers {
		switch {
		case a.err != nil && isNotFound(a.err):
			delete(pending, a.g.arn)
			delete(last, a.g.arn)
		case a.err != nil:
			errs = append(errs, a.err)
		case !slices.ContainsFunc(a.regs, n.Holds):
			delete(pending, a.g.arn)
			delete(last, a.g.arn)
		default:
			last[a.g.arn] = a.regs
		}
	}
	return errors.Join(errs...)
}

// targetGroups lists the instance and IP target groups, reusing the list
// for GroupsTTL.
func (w *Waiter) targetGroups(ctx context.Context) ([]group, error) {
	w.groupsMu.Lock()
	defer w.groupsMu.Unlock()
	if !w.groupsAt.IsZero() && w.clock.Since(w.groupsAt) < w.o.GroupsTTL {
		return w.groups, nil
	}
	var out []group
	p := elbv2.NewDescribeTargetGroupsPaginator(w.api, &elbv2.DescribeTargetGroupsInput{PageSize: aws.Int32(pageSize)})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("describing target groups: %w", err)
		}
		for _, tg := range page.TargetGroups {
			if t := lbdrain.TargetType(tg.TargetType); t == lbdrain.Instance || t == lbdrain.IP {
				out = append(out, group{arn: aws.ToString(tg.TargetGroupArn), typ: t})
			}
		}
	}
	w.groups, w.groupsAt = out, w.clock.Now()
	return out, nil
}

// targetHealth lists a target group's targets, reusing an answer younger
// than Poll (another node's wait asked for it).
func (w *Waiter) targetHealth(ctx context.Context, g group) ([]lbdrain.Registration, error) {
	now := w.clock.Now()
	w.mu.Lock()
	e, ok := w.health[g.arn]
	w.mu.Unlock()
	if ok && now.Sub(e.at) < w.o.Poll {
		return e.regs, nil
	}
	out, err := w.api.DescribeTargetHealth(ctx, &elbv2.DescribeTargetHealthInput{TargetGroupArn: aws.String(g.arn)})
	if err != nil {
		return nil, fmt.Errorf("describing the target health of %s: %w", g.arn, err)
	}
	var regs []lbdrain.Registration
	for _, d := range out.TargetHealthDescriptions {
		r := lbdrain.Registration{TargetGroup: g.arn, Type: g.typ}
		if d.Target != nil {
			r.ID, r.Port = aws.ToString(d.Target.Id), aws.ToInt32(d.Target.Port)
		}
		if d.TargetHealth != nil {
			r.State = string(d.TargetHealth.State)
		}
		regs = append(regs, r)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for arn, old := range w.health { // bounded by the target groups looked at lately
		if now.Sub(old.at) >= w.o.GroupsTTL {
			delete(w.health, arn)
		}
	}
	w.health[g.arn] = healthEntry{at: now, regs: regs}
	return regs, nil
}

// node is what node is known as: its instance, the pod IPs noted at its
// cordon and those of the pods still on it, and its InternalIPs (the
// address of hostNetwork pods).
func (w *Waiter) node(ctx context.Context, node, instanceID string) (lbdrain.Node, error) {
	w.mu.Lock()
	ips := slices.Clone(w.noted[node])
	w.mu.Unlock()
	now, err := w.podIPs(ctx, node)
	ips = merge(ips, now)
	n, gerr := w.kube.Nodes().Get(ctx, node, metav1.GetOptions{})
	if gerr == nil {
		for _, a := range n.Status.Addresses {
			if a.Type == corev1.NodeInternalIP {
				ips = merge(ips, []string{a.Address})
			}
		}
	}
	return lbdrain.Node{InstanceID: instanceID, IPs: ips}, errors.Join(err, gerr)
}

// podIPs lists the IPs of the pods on node.
func (w *Waiter) podIPs(ctx context.Context, node string) ([]string, error) {
	list, err := w.kube.Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("spec.nodeName", node).String()})
	if err != nil {
		return nil, fmt.Errorf("listing the pods of %s: %w", node, err)
	}
	var ips []string
	for _, p := range list.Items {
		if p.Status.PodIP != "" {
			ips = append(ips, p.Status.PodIP)
		}
		for _, ip := range p.Status.PodIPs {
			ips = append(ips, ip.IP)
		}
	}
	return merge(nil, ips), nil
}

func merge(a, b []string) []string {
	out := append(slices.Clone(a), b...)
	slices.Sort(out)
	return slices.Compact(out)
}

func isAccessDenied(err error) bool {
	var ae smithy.APIError
	if !errors.As(err, &ae) {
		return false
	}
	switch ae.ErrorCode() {
	case "AccessDenied", "AccessDeniedException", "UnauthorizedOperation", "AuthorizationError", "NotAuthorized":
		return true
	}
	return strings.Contains(ae.ErrorCode(), "AccessDenied")
}

func isNotFound(err error) bool {
	var ae smithy.APIError
	return errors.As(err, &ae) && ae.ErrorCode() == "TargetGroupNotFound"
}
