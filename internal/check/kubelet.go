package check

import (
	"context"
	"fmt"
	"slices"
	"strings"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"lifeboat.dev/lifeboat/internal/kubeletshutdown"
)

// kubeletSampleMost bounds the kubelets check reads: one node per group
// (node group or pool, kubelet version, OS image), at most this many
// groups, however many nodes the cluster has.
const kubeletSampleMost = 10

// nodeGroupLabels name a node's group, the first one set: nodes of a group
// share a launch template, so a kubelet configuration.
var nodeGroupLabels = []string{"eks.amazonaws.com/nodegroup", "karpenter.sh/nodepool", "alpha.eksctl.io/nodegroup-name"}

const kubeletRow = "kubelet graceful shutdown"

// notConfirmed says what the configuration cannot show.
const notConfirmed = "configured, not confirmed active: the kubelet watches for the shutdown only on Linux with systemd-logind, through a delay inhibitor lock that logind's InhibitDelayMaxSec must allow for the whole period; it raises that itself and, when it cannot, logs \"Failed to start node shutdown manager\" and goes on: the API shows nothing of it until a shutdown (a Shutdown Event on the Node, Ready false \"node is shutting down\"); on a node, systemd-inhibit --list shows the kubelet's lock"

// sampledNode is a node check reads the kubelet of.
type sampledNode struct{ name, group string }

// kubeletShutdown reads the kubelet configuration of sampled nodes through
// the API server's node proxy (GET /api/v1/nodes/<name>/proxy/configz)
// and says whether graceful node shutdown is configured, and what that
// does not confirm. No nodes: no row.
func (r *run) kubeletShutdown(ctx context.Context) {
	if r.c.Kube == nil {
		return
	}
	sample, total, groups, err := r.sampleNodes(ctx)
	if err != nil {
		r.add(kubeletRow, Warn, "could not list nodes: "+err.Error(), "allow nodes list to the identity lifeboat check runs as")
		return
	}
	if total == 0 {
		return
	}
	how := fmt.Sprintf("sample: %d of %d nodes, one per node group, kubelet version and OS image", len(sample), total)
	if groups > len(sample) {
		how += fmt.Sprintf(" (the first %d of %d such groups)", len(sample), groups)
	}
	if !r.mayProxy(ctx) {
		r.notPermitted(how)
		return
	}
	fetch := r.c.Configz
	if fetch == nil {
		fetch = kubeletshutdown.ProxyFetch(r.c.Kube.CoreV1().RESTClient())
	}
	var items, failed []string
	var configured []string
	for _, n := range sample {
		b, err := fetch(ctx, n.name)
		if apierrors.IsForbidden(err) {
			r.notPermitted(how)
			return
		}
		var c kubeletshutdown.Config
		if err == nil {
			c, err = kubeletshutdown.Parse(b)
		}
		if err != nil {
			failed = append(failed, fmt.Sprintf("%s: %v", n.name, err))
			continue
		}
		v := c.Verdict()
		items = append(items, fmt.Sprintf("%s (%s): %s", n.name, n.group, v))
		if v.State == kubeletshutdown.Configured {
			configured = append(configured, n.name)
		}
	}
	res := Result{Name: kubeletRow, Status: OK, Items: append(items, failed...)}
	res.Found = fmt.Sprintf("configured on %d of %d kubelets read (%s): %s", len(configured), len(items), how, strings.Join(items, "; "))
	if len(items) == 0 {
		res.Found = fmt.Sprintf("no kubelet could be read (%s)", how)
	}
	if len(configured) > 0 {
		res.Found += "; " + notConfirmed
	}
	switch {
	case len(failed) > 0:
		res.Status = Warn
		res.Found += fmt.Sprintf("; could not read %d: %s", len(failed), strings.Join(failed, "; "))
		res.Fix = "the API server must reach each kubelet (its port, 10250 by default) and the kubelet must serve /configz"
	case r.cfg.PlanWithKubeletShutdown && len(configured) == 0:
		res.Status = Warn
		res.Fix = "--plan-with-kubelet-shutdown plans with the kubelet's window only where graceful node shutdown is configured (shutdownGracePeriod > 0): configure it (docs/kubelet-shutdown.md) or leave the option off"
	}
	r.results = append(r.results, res)
}

// notPermitted is the row when nodes/proxy get is not granted: a warning
// only when lifeboat run needs it (--plan-with-kubelet-shutdown).
func (r *run) notPermitted(how string) {
	s := OK
	if r.cfg.PlanWithKubeletShutdown {
		s = Warn
	}
	r.add(kubeletRow, s, "not checked: not permitted: grant nodes/proxy get to check this (it lets its holder call every kubelet's API: docs/kubelet-shutdown.md); "+how,
		`ClusterRole rule {apiGroups: [""], resources: ["nodes/proxy"], verbs: ["get"]} for the identity lifeboat check runs as`)
}

// mayProxy asks whether this identity may get nodes/proxy; when the
// review itself fails, the read tells.
func (r *run) mayProxy(ctx context.Context) bool {
	sar := &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{
		ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: "get", Resource: "nodes", Subresource: "proxy"},
	}}
	res, err := r.c.Kube.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, sar, metav1.CreateOptions{})
	return err != nil || res.Status.Allowed
}

// sampleNodes lists the nodes (in pages) and picks one per group, a Ready
// one when the group has one, the first by name otherwise: at most
// kubeletSampleMost, the groups in order of their keys.
func (r *run) sampleNodes(ctx context.Context) (sample []sampledNode, total, groups int, err error) {
	type pick struct {
		node  sampledNode
		ready bool
	}
	picks := map[string]pick{}
	opts := metav1.ListOptions{Limit: listPage}
	for {
		list, err := r.c.Kube.CoreV1().Nodes().List(ctx, opts)
		if err != nil {
			return nil, 0, 0, err
		}
		for i := range list.Items {
			n := &list.Items[i]
			total++
			key := nodeGroupKey(n)
			cur, seen := picks[key]
			ready := nodeReady(n)
			if !seen || ready && !cur.ready || ready == cur.ready && n.Name < cur.node.name {
				picks[key] = pick{sampledNode{n.Name, key}, ready}
			}
		}
		if list.Continue == "" {
			break
		}
		opts.Continue = list.Continue
	}
	keys := make([]string, 0, len(picks))
	for k := range picks {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys[:min(len(keys), kubeletSampleMost)] {
		sample = append(sample, picks[k].node)
	}
	return sample, total, len(keys), nil
}

// nodeGroupKey names the node's group: its node group or pool label (or
// "no group"), kubelet version and OS image.
func nodeGroupKey(n *corev1.Node) string {
	group := "no group"
	for _, l := range nodeGroupLabels {
		if v := n.Labels[l]; v != "" {
			group = l + "=" + v
			break
		}
	}
	info := n.Status.NodeInfo
	return fmt.Sprintf("%s, kubelet %s, %s", group, info.KubeletVersion, info.OSImage)
}

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
