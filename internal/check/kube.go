package check

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"lifeboat.dev/lifeboat/internal/config"
)

// access is one thing lifeboat does in Kubernetes.
type access struct {
	verb, group, resource, subresource, namespace, name string
	why                                                 string
}

func (a access) String() string {
	res := a.resource
	if a.subresource != "" {
		res += "/" + a.subresource
	}
	if a.group != "" {
		res = a.group + " " + res
	}
	s := a.verb + " " + res
	if a.name != "" {
		s += " " + a.name
	}
	if a.namespace != "" {
		s += " in " + a.namespace
	}
	return s
}

// rbacRule is the RBAC rule that grants a.
func (a access) rbacRule() string {
	res := a.resource
	if a.subresource != "" {
		res += "/" + a.subresource
	}
	kind := "ClusterRole"
	if a.namespace != "" {
		kind = "Role in " + a.namespace
	}
	names := ""
	if a.name != "" {
		names = fmt.Sprintf(", resourceNames: [%q]", a.name)
	}
	return fmt.Sprintf(`%s rule {apiGroups: [%q], resources: [%q]%s, verbs: [%q]}`, kind, a.group, res, names, a.verb)
}

// accesses lists what lifeboat does in Kubernetes with cfg.
func accesses(cfg config.Config) []access {
	var out []access
	for _, v := range []string{"get", "list", "watch", "patch"} {
		out = append(out, access{verb: v, resource: "nodes", why: "find, cordon and taint nodes"})
	}
	for _, v := range []string{"list", "watch"} {
		out = append(out, access{verb: v, resource: "pods", why: "find the pods of a node being drained"})
	}
	out = append(out, access{verb: "create", resource: "pods", subresource: "eviction", why: "drain through the Eviction API"})
	switch {
	case cfg.ForceDeleteAtDeadline:
		out = append(out, access{verb: "delete", resource: "pods", why: "--force-delete-at-deadline"})
	case cfg.DeleteBlockedPods:
		out = append(out, access{verb: "delete", resource: "pods", why: "--delete-blocked-pods-before-deadline"})
	}
	if cfg.AnnotatePods {
		out = append(out, access{verb: "patch", resource: "pods", why: "--annotate-pods-with-deadline"})
	}
	if cfg.TerminatingCondition {
		out = append(out, access{verb: "patch", resource: "nodes", subresource: "status", why: "--terminating-condition"})
	}
	if cfg.Mode == config.ModeQueue && cfg.DeleteGhostNodes {
		out = append(out, access{verb: "delete", resource: "nodes", why: "--delete-ghost-nodes"})
	}
	if cfg.PlanWithKubeletShutdown {
		out = append(out, access{verb: "get", resource: "nodes", subresource: "proxy", why: "--plan-with-kubelet-shutdown reads each kubelet's /configz"})
	}
	out = append(out, access{verb: "list", group: "policy", resource: "poddisruptionbudgets", why: "the drain forecast"})
	// Events about Nodes (cluster-scoped) go to the default namespace,
	// those about pods (the drain forecast's warnings) to theirs.
	for _, v := range []string{"create", "patch"} {
		out = append(out, access{verb: v, resource: "events", why: "Kubernetes Events on nodes and pods"})
	}
	if cfg.Mode == config.ModeQueue && cfg.CompleteLifecycle && cfg.VolumeDetachTimeout > 0 {
		for _, v := range []string{"list", "watch"} {
			out = append(out, access{verb: v, group: "storage.k8s.io", resource: "volumeattachments", why: "wait for a node's volumes to detach before CONTINUE (--volume-detach-timeout)"})
		}
	}
	if cfg.Mode == config.ModeQueue && cfg.LeaderElect {
		// Only lifeboat's Lease is read and renewed; creating cannot be
		// limited to a name.
		for _, v := range []string{"get", "create", "update"} {
			a := access{verb: v, group: "coordination.k8s.io", resource: "leases", namespace: cfg.LeaseNamespace, why: "leader election"}
			if v != "create" {
				a.name = cfg.LeaseName
			}
			out = append(out, a)
		}
	}
	return out
}

// kubernetes checks the API is reachable and every verb lifeboat needs is
// allowed to the identity it runs as.
func (r *run) kubernetes(ctx context.Context) {
	if r.c.Kube == nil {
		found := "no Kubernetes client"
		if r.c.KubeErr != nil {
			found = r.c.KubeErr.Error()
		}
		r.add("kubernetes api", Fail, found, "check --kubeconfig, or run in a pod with a ServiceAccount")
		return
	}
	raw, err := r.c.Kube.Discovery().RESTClient().Get().AbsPath("/version").Do(ctx).Raw()
	if err != nil {
		r.add("kubernetes api", Fail, fmt.Sprintf("%s is not reachable: %v", r.c.KubeHost, err), "check --kubeconfig and the network path to the API server")
		return
	}
	var v struct {
		GitVersion string `json:"gitVersion"`
	}
	_ = json.Unmarshal(raw, &v)
	who := "an unknown user"
	if rev, err := r.c.Kube.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{}); err == nil {
		who = rev.Status.UserInfo.Username
	}
	r.add("kubernetes api", OK, fmt.Sprintf("Kubernetes %s at %s, as %s", v.GitVersion, r.c.KubeHost, who), "")

	var allowedN int
	var deniedA []access
	var errs []string
	for _, a := range accesses(r.cfg) {
		sar := &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{
			ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: a.verb, Group: a.group, Resource: a.resource,
				Subresource: a.subresource, Namespace: a.namespace, Name: a.name},
		}}
		res, err := r.c.Kube.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, sar, metav1.CreateOptions{})
		switch {
		case err != nil:
			errs = append(errs, fmt.Sprintf("%s: %v", a, err))
		case res.Status.Allowed:
			allowedN++
		default:
			deniedA = append(deniedA, a)
		}
	}
	switch {
	case len(deniedA) > 0:
		var names, rules []string
		for _, a := range deniedA {
			names = append(names, fmt.Sprintf("%s (%s)", a, a.why))
			rules = append(rules, a.rbacRule())
		}
		r.add("kubernetes permissions", Fail, fmt.Sprintf("%s may do %d of the %d things lifeboat does; DENIED: %s", who, allowedN, allowedN+len(deniedA)+len(errs), strings.Join(names, ", ")),
			"grant them to lifeboat's ServiceAccount (the Helm chart's roles have them): "+strings.Join(rules, "; "))
	case len(errs) > 0:
		r.add("kubernetes permissions", Warn, "could not review: "+strings.Join(errs, "; "), "allow selfsubjectaccessreviews create (system:basic-user has it)")
	default:
		r.add("kubernetes permissions", OK, fmt.Sprintf("%s may do all %d things lifeboat does (nodes get/list/watch/patch, pods list/watch, pods/eviction create, poddisruptionbudgets list, events create/patch%s)",
			who, allowedN, extraAccess(r.cfg)), "")
	}
}

func extraAccess(cfg config.Config) string {
	s := ""
	if cfg.ForceDeleteAtDeadline || cfg.DeleteBlockedPods {
		s += ", pods delete"
	}
	if cfg.AnnotatePods {
		s += ", pods patch"
	}
	if cfg.TerminatingCondition {
		s += ", nodes/status patch"
	}
	if cfg.Mode == config.ModeQueue && cfg.DeleteGhostNodes {
		s += ", nodes delete"
	}
	if cfg.PlanWithKubeletShutdown {
		s += ", nodes/proxy get"
	}
	if cfg.Mode == config.ModeQueue && cfg.CompleteLifecycle && cfg.VolumeDetachTimeout > 0 {
		s += ", volumeattachments list/watch"
	}
	if cfg.Mode == config.ModeQueue && cfg.LeaderElect {
		s += ", create leases and get/update lease " + cfg.LeaseName + " in " + cfg.LeaseNamespace
	}
	return s
}
