package deploy

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"

	"lifeboat.dev/lifeboat/test/awssim"
	"lifeboat.dev/lifeboat/test/testenv"
)

// rbacValues are the chart values of the least-privilege test: every
// optional permission on (force delete, the failover journal), times short
// enough for a test.
// The PDB-guarded pod stays until the deadline
// (deleteBlockedPodsBeforeDeadline false), so that the drain forecast
// warns on it (Events in its namespace) and it is force-deleted then
// (pods delete, which the deletion before the deadline also needs).
var rbacValues = map[string]any{
	"forceDeleteAtDeadline":           true,
	"deleteBlockedPodsBeforeDeadline": false,
	"terminatingCondition":            true,
	"deadlineMargin":                  "1s",
	"evictionBackoff":                 "500ms",
	"leaderElection":                  map[string]any{"enabled": true, "leaseDuration": "5s", "failoverJournal": true},
}

// grant is one verb on one resource in one of the chart's roles: the unit
// the least-privilege test removes.
type grant struct {
	role     string // "ClusterRole", "Role default" (events) or "Role release" (leases)
	group    string
	resource string
	verb     string
	named    bool // restricted to resourceNames
}

func (g grant) String() string {
	s := g.resource + " " + g.verb
	if g.group != "" {
		s = g.group + "/" + s
	}
	if g.named {
		s += " (by name)"
	}
	return s + " in " + g.role
}

// grants lists every grant of the rendered roles, sorted.
func grantsOf(t testing.TB, r *rendered, releaseNS string) []grant {
	t.Helper()
	var out []grant
	for _, o := range r.Objects {
		var rules []rbacv1.PolicyRule
		role := ""
		switch o.GetKind() {
		case "ClusterRole":
			rules, role = into[rbacv1.ClusterRole](t, o).Rules, "ClusterRole"
		case "Role":
			rules, role = into[rbacv1.Role](t, o).Rules, "Role default"
			if o.GetNamespace() == releaseNS {
				role = "Role release"
			}
		default:
			continue
		}
		for _, ru := range rules {
			for _, g := range ru.APIGroups {
				for _, res := range ru.Resources {
					for _, v := range ru.Verbs {
						out = append(out, grant{role: role, group: g, resource: res, verb: v, named: len(ru.ResourceNames) > 0})
					}
				}
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].String() < out[j].String() })
	return out
}

// without returns the RBAC objects with one grant removed; the role that
// held it is rewritten with one rule per remaining grant (the same
// permissions otherwise).
func without(t testing.TB, objs []*unstructured.Unstructured, releaseNS string, drop grant) []*unstructured.Unstructured {
	t.Helper()
	var out []*unstructured.Unstructured
	removed := false
	for _, o := range objs {
		if o.GetKind() != "ClusterRole" && o.GetKind() != "Role" {
			out = append(out, o)
			continue
		}
		single := &rendered{&testenv.Rendered{Objects: []*unstructured.Unstructured{o}}}
		gs := grantsOf(t, single, releaseNS)
		if !slices.Contains(gs, drop) {
			out = append(out, o)
			continue
		}
		var names []string
		if o.GetKind() == "Role" {
			for _, ru := range into[rbacv1.Role](t, o).Rules {
				if len(ru.ResourceNames) > 0 {
					names = ru.ResourceNames
				}
			}
		}
		var rules []rbacv1.PolicyRule
		for _, g := range gs {
			if g == drop {
				removed = true
				continue
			}
			ru := rbacv1.PolicyRule{APIGroups: []string{g.group}, Resources: []string{g.resource}, Verbs: []string{g.verb}}
			if g.named {
				ru.ResourceNames = names
			}
			rules = append(rules, ru)
		}
		c := o.DeepCopy()
		raw, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&struct {
			Rules []rbacv1.PolicyRule `json:"rules"`
		}{rules})
		if err != nil {
			t.Fatal(err)
		}
		c.Object["rules"] = raw["rules"]
		out = append(out, c)
	}
	if !removed {
		t.Fatalf("grant %s not found", drop)
	}
	return out
}

// The chart's RBAC is exactly what lifeboat uses. With the rendered
// ServiceAccount, roles and bindings, the real binary (run with the
// Deployment's rendered settings and a token of that ServiceAccount) goes
// through a full queue-mode scenario: a terminate lifecycle action with
// heartbeats, a Spot interruption whose PDB-guarded pod is force-deleted at
// the deadline, a repeated interruption, a concurrent writer on the nodes.
// With any one grant removed, the same scenario fails: no grant is unused.
func TestRBACLeastPrivilege(t *testing.T) {
	leastPrivilege(t, map[string]any{"queueURL": exampleQueue, "leaderElection": map[string]any{"failoverJournal": true}}, []string{
		"configmaps create in Role release",
		"configmaps get (by name) in Role release",
		"configmaps update (by name) in Role release",
		"coordination.k8s.io/leases create in Role release",
		"coordination.k8s.io/leases get (by name) in Role release",
		"coordination.k8s.io/leases update (by name) in Role release",
		"events create in ClusterRole",
		"events patch in ClusterRole",
		"nodes get in ClusterRole",
		"nodes list in ClusterRole",
		"nodes patch in ClusterRole",
		"nodes watch in ClusterRole",
		"nodes/status patch in ClusterRole",
		"pods delete in ClusterRole",
		"pods list in ClusterRole",
		"pods patch in ClusterRole",
		"pods watch in ClusterRole",
		"pods/eviction create in ClusterRole",
		"policy/poddisruptionbudgets list in ClusterRole",
		"storage.k8s.io/volumeattachments list in ClusterRole",
		"storage.k8s.io/volumeattachments watch in ClusterRole",
	}, rbacScenario)
}

// The same for IMDS mode: the DaemonSet's rendered settings and roles (no
// leases: no election), the binary reading the metadata mock of its node:
// a Spot interruption whose PDB-guarded pod is force-deleted at the
// deadline, then a second notice.
func TestRBACLeastPrivilegeIMDS(t *testing.T) {
	leastPrivilege(t, map[string]any{"mode": "imds"}, []string{
		"events create in ClusterRole",
		"events patch in ClusterRole",
		"nodes get in ClusterRole",
		"nodes list in ClusterRole",
		"nodes patch in ClusterRole",
		"nodes watch in ClusterRole",
		"nodes/status patch in ClusterRole",
		"pods delete in ClusterRole",
		"pods list in ClusterRole",
		"pods patch in ClusterRole",
		"pods watch in ClusterRole",
		"pods/eviction create in ClusterRole",
		"policy/poddisruptionbudgets list in ClusterRole",
	}, rbacScenarioIMDS)
}

// scenarioFunc runs a scenario with the chart's RBAC less drop, and returns
// the first expectation that failed. barrier is called once lifeboat runs
// (or failed to) and returns when every scenario running at once is there.
type scenarioFunc func(ctx context.Context, t *testing.T, drop *grant, barrier func()) error

func leastPrivilege(t *testing.T, values map[string]any, want []string, scenario scenarioFunc) {
	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Second)
	defer cancel()
	v := maps.Clone(values)
	v["forceDeleteAtDeadline"] = true
	v["terminatingCondition"] = true // off by default; its grant is checked too
	all := grantsOf(t, mustRender(t, "lb", "lifeboat", v), "lifeboat")
	var got []string
	for _, g := range all {
		got = append(got, g.String())
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Fatalf("the chart grants (-want +got):\n%s", d)
	}

	variants := []*grant{nil}
	for i := range all {
		variants = append(variants, &all[i])
	}
	// t.Run from several goroutines: the scenarios run at once whatever
	// -parallel is; each has its own release, AWS side and nodes. In queue
	// mode every lifeboat resumes the work recorded on any node of the
	// cluster when it becomes leader, as it must (one lifeboat per cluster):
	// so all of them start, and lead or fail, before any node is touched.
	var wg sync.WaitGroup
	var started sync.WaitGroup
	started.Add(len(variants))
	for _, drop := range variants {
		name := "all grants"
		if drop != nil {
			name = "without " + drop.String()
		}
		wg.Go(func() {
			t.Run(name, func(t *testing.T) {
				start := time.Now()
				var once sync.Once
				ready := func() { once.Do(started.Done) }
				defer ready()
				err := scenario(ctx, t, drop, func() { ready(); started.Wait() })
				switch {
				case drop == nil && err != nil:
					t.Fatalf("with the chart's RBAC: %v", err)
				case drop == nil:
					t.Logf("scenario passed in %v", time.Since(start).Round(time.Millisecond))
				case err == nil:
					t.Errorf("the scenario succeeded without %s: the chart grants it but lifeboat does not need it", drop)
				default:
					t.Logf("fails as it must after %v: %v", time.Since(start).Round(time.Millisecond), err)
				}
			})
		})
	}
	wg.Wait()
}

// rbacScenario is the queue-mode scenario.
func rbacScenario(ctx context.Context, t *testing.T, drop *grant, barrier func()) error {
	w, err := newWorld(t, ctx, rbacValues)
	if err != nil {
		return setupErr(t, err)
	}
	objs := w.rbacObjects()
	if drop != nil {
		objs = without(t, objs, w.ns, *drop)
	}
	applyForTest(t, objs)

	// The world: a group of one instance (node1) with a terminate hook of
	// 2 s heartbeat timeout; a node2 for a Spot instance; a pod on each,
	// node2's guarded by a PDB that never allows its eviction.
	group, ids, err := w.createGroup(1)
	if err != nil {
		return setupErr(t, err)
	}
	node1 := nodeOf(ids[0])
	if err := w.putHook(group, 2); err != nil {
		return setupErr(t, err)
	}
	spotID := testenv.RandomInstanceID()
	n2 := kube.Node(t, testenv.NodeSpec{InstanceID: spotID})
	node2 := n2.Name
	pod1, err := kube.CreatePod(ctx, testenv.PodSpec{Namespace: w.ns, Node: node1, Grace: 30 * time.Second, ShutdownAfter: 3 * time.Second})
	if err != nil {
		return setupErr(t, err)
	}
	pod2, err := kube.CreatePod(ctx, testenv.PodSpec{Namespace: w.ns, Node: node2, Grace: 30 * time.Second, ShutdownAfter: time.Second, Labels: map[string]string{"app": "guarded"}, MountAnnotations: true})
	if err != nil {
		return setupErr(t, err)
	}
	one := intstr.FromInt32(1)
	if _, err := kube.CreatePDB(ctx, testenv.PDBSpec{Namespace: w.ns, Name: "guard", Selector: map[string]string{"app": "guarded"}, MinAvailable: &one}); err != nil {
		return setupErr(t, err)
	}

	kp := conflictingProxy(t)
	kubeconfig, err := w.kubeconfig(kp.URL, kp.CA)
	if err != nil {
		return setupErr(t, err)
	}
	p, err := w.startLifeboat(lifeboatOptions{name: w.release + "-0", kubeconfig: kubeconfig, endpoints: endpoints(moto.Endpoint, sim.Endpoint())})
	if err != nil {
		return err // a start refused by RBAC is a failure of the scenario
	}
	until := func(d time.Duration, what string, cond func() (bool, error)) error {
		return eventually(ctx, d, what, func() (bool, error) {
			if err := p.healthy(); err != nil {
				return false, err
			}
			return cond()
		})
	}
	leaseName := settings(w.container())["LEASE_NAME"]
	if err := until(15*time.Second, "lifeboat to hold the Lease", func() (bool, error) {
		l, err := kube.Client.CoordinationV1().Leases(w.ns).Get(ctx, leaseName, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return err == nil && l.Spec.HolderIdentity != nil && *l.Spec.HolderIdentity == p.name, err
	}); err != nil {
		return err
	}
	barrier()

	// A Spot interruption whose deadline is 8 s away, and a scale-in.
	if err := w.putSpot(spotID, time.Now().Add(-112*time.Second)); err != nil {
		return setupErr(t, err)
	}
	// Before its eviction, node2's guarded pod is told the deadline (pods
	// patch) and node2 carries the condition (nodes/status patch); the
	// budget keeps the pod until the deadline.
	if err := until(7*time.Second, "node2's guarded pod told the deadline, node2's condition", toldTheDeadline(ctx, node2, w.ns, pod2.Name)); err != nil {
		return err
	}
	if err := w.scaleTo(group, 0); err != nil {
		return setupErr(t, err)
	}
	var a awssim.Action
	if err := until(30*time.Second, "the terminate lifecycle action to end", func() (bool, error) {
		var ok bool
		a, ok = action(ids[0], terminating)
		return ok && !a.Active(), nil
	}); err != nil {
		return err
	}
	if a.CompletedBy != awssim.CompletedByAPI || a.Result != "CONTINUE" || a.Completions != 1 || a.Heartbeats < 1 {
		return fmt.Errorf("terminate action ended by %s with %q after %d heartbeats and %d completions; want one CompleteLifecycleAction CONTINUE after heartbeats",
			a.CompletedBy, a.Result, a.Heartbeats, a.Completions)
	}
	drained := func(node, pod string) func() (bool, error) {
		return func() (bool, error) {
			n, err := kube.Client.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			_, err = kube.Client.CoreV1().Pods(w.ns).Get(ctx, pod, metav1.GetOptions{})
			gone := apierrors.IsNotFound(err)
			return n.Spec.Unschedulable && gone && n.Annotations["lifeboat.io/drained"] != "", nil
		}
	}
	if err := until(10*time.Second, "node1 cordoned, its pod evicted and the node marked drained", drained(node1, pod1.Name)); err != nil {
		return err
	}
	if err := until(20*time.Second, "node2's PDB-guarded pod force-deleted at the deadline and the node marked drained", drained(node2, pod2.Name)); err != nil {
		return err
	}
	// The drain forecast saw the budget (poddisruptionbudgets list) and
	// warned on the node and on the pod (events in the pod's namespace).
	if err := until(5*time.Second, "DrainForecastMiss on node2 and its guarded pod", forecastWarned(ctx, node2, w.ns, pod2.Name)); err != nil {
		return err
	}
	// The same interruption announced again: a second work on the node,
	// whose Cordoned Event is the first one counted again (events patch).
	if err := w.putSpot(spotID, time.Now().Add(-100*time.Second)); err != nil {
		return setupErr(t, err)
	}
	if err := until(15*time.Second, "two Cordoned events on node2", func() (bool, error) {
		n, err := nodeEvents(ctx, node2, "Cordoned")
		return n >= 2, err
	}); err != nil {
		return err
	}
	for _, e := range []struct{ node, reason string }{{node1, "Cordoned"}, {node1, "Drained"}, {node1, "LifecycleCompleted"}, {node2, "Drained"}} {
		if err := until(5*time.Second, e.reason+" event on "+e.node, func() (bool, error) {
			n, err := nodeEvents(ctx, e.node, e.reason)
			return n >= 1, err
		}); err != nil {
			return err
		}
	}
	// The terminate action waited for node1's volumes (it has none): a
	// lifeboat that cannot read VolumeAttachments says so on the node.
	if n, err := nodeEvents(ctx, node1, "VolumeAttachmentsUnknown"); err != nil || n > 0 {
		return fmt.Errorf("VolumeAttachmentsUnknown events on node1: %d (%v); want none", n, err)
	}
	if err := until(20*time.Second, "the queue to be empty", w.queueEmpty); err != nil {
		return err
	}
	checkConflicted(t, kp)
	if err := journalKept(kp); err != nil {
		return err
	}
	return p.healthy()
}

// journalKept says whether the leader kept its failover journal through
// kp: read it when it led (absent or not), created a shard for the
// messages it held and wrote it again once they were done, with no
// ConfigMap request refused.
func journalKept(kp *proxy) error {
	var read, created, updated bool
	for _, c := range kp.snapshot() {
		if !strings.Contains(c.path, "/configmaps") {
			continue
		}
		switch {
		case c.status == http.StatusForbidden:
			return fmt.Errorf("the failover journal: %s %s answered 403", c.method, c.path)
		case c.method == http.MethodGet && (c.status == http.StatusOK || c.status == http.StatusNotFound):
			read = true
		case c.method == http.MethodPost && c.status == http.StatusCreated:
			created = true
		case c.method == http.MethodPut && c.status == http.StatusOK:
			updated = true
		}
	}
	if !read || !created || !updated {
		return fmt.Errorf("the failover journal was read %v, created %v, updated %v; want all three", read, created, updated)
	}
	return nil
}

// conflictingProxy is the API server as lifeboat sees it in these
// scenarios: through a proxy that plays a concurrent writer. Right before
// lifeboat's first resourceVersion-checked write of a node (a merge patch
// that carries the version it read), it changes the node (as another
// controller may), so that the write answers 409 Conflict and lifeboat
// must read the node again.
func conflictingProxy(t *testing.T) *proxy {
	kp := startProxy(t, kube.URL, kubeTransport(), true)
	var bumped sync.Map
	kp.setBefore(func(r *http.Request) {
		name, ok := strings.CutPrefix(r.URL.Path, "/api/v1/nodes/")
		if r.Method != http.MethodPatch || !ok || strings.Contains(name, "/") {
			return
		}
		body, err := io.ReadAll(r.Body)
		if err != nil {
			t.Errorf("reading lifeboat's patch of node %s: %v", name, err)
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		if !bytes.Contains(body, []byte(`"resourceVersion"`)) {
			return // an annotation patch, which depends on nothing
		}
		if _, done := bumped.LoadOrStore(name, true); done {
			return
		}
		patch := fmt.Sprintf(`{"metadata":{"labels":{"deploy.lifeboat.io/concurrent-writer":"%d"}}}`, time.Now().UnixNano())
		// Not the request's context: lifeboat may give up on its request
		// (a variant that fails as it must stops it) while we write.
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if _, err := kube.Client.CoreV1().Nodes().Patch(ctx, name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
			t.Errorf("concurrent write to node %s: %v", name, err)
		}
	})
	return kp
}

// checkConflicted fails t unless a node update through kp answered 409: the
// scenario exercised the concurrent writer.
func checkConflicted(t *testing.T, kp *proxy) {
	t.Helper()
	for _, c := range kp.snapshot() {
		if c.method == http.MethodPatch && strings.HasPrefix(c.path, "/api/v1/nodes/") && c.status == http.StatusConflict {
			return
		}
	}
	t.Errorf("no node update answered 409 Conflict: the scenario did not exercise the concurrent writer")
}

// rbacScenarioIMDS is the IMDS-mode scenario. The DaemonSet's pods watch
// only their own node, so the scenarios need no barrier.
func rbacScenarioIMDS(ctx context.Context, t *testing.T, drop *grant, barrier func()) error {
	barrier()
	w, err := newWorld(t, ctx, map[string]any{"mode": "imds", "forceDeleteAtDeadline": true, "deleteBlockedPodsBeforeDeadline": false, "terminatingCondition": true, "deadlineMargin": "1s",
		"evictionBackoff": "500ms", "imdsPollInterval": "250ms"})
	if err != nil {
		return setupErr(t, err)
	}
	objs := w.rbacObjects()
	if drop != nil {
		objs = without(t, objs, w.ns, *drop)
	}
	applyForTest(t, objs)
	instanceID := testenv.RandomInstanceID()
	node := kube.Node(t, testenv.NodeSpec{InstanceID: instanceID}).Name
	plain, err := kube.CreatePod(ctx, testenv.PodSpec{Namespace: w.ns, Node: node, Grace: 30 * time.Second, ShutdownAfter: 2 * time.Second})
	if err != nil {
		return setupErr(t, err)
	}
	// A Spot notice (terminate, a minute ahead) 1 s after the mock starts.
	opts := testenv.IMDSOptions{Scenario: testenv.IMDSSpot, InstanceID: instanceID, After: time.Second, SpotTime: time.Now().Add(time.Minute)}
	mock := testenv.StartIMDS(t, opts)
	kp := conflictingProxy(t)
	kubeconfig, err := w.kubeconfig(kp.URL, kp.CA)
	if err != nil {
		return setupErr(t, err)
	}
	p, err := w.startLifeboat(lifeboatOptions{name: w.release + "-" + testenv.UniqueName("ds"), node: node, kubeconfig: kubeconfig,
		extra: []string{"--imds-endpoint=" + mock.URL}})
	if err != nil {
		return err
	}
	until := func(d time.Duration, what string, cond func() (bool, error)) error {
		return eventually(ctx, d, what, func() (bool, error) {
			if err := p.healthy(); err != nil {
				return false, err
			}
			return cond()
		})
	}
	gone := func(name string) (bool, error) {
		_, err := kube.Client.CoreV1().Pods(w.ns).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return false, err
	}
	if err := until(20*time.Second, "the node cordoned, its pod evicted and the node marked drained", func() (bool, error) {
		n, err := kube.Client.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		ok, err := gone(plain.Name)
		return ok && n.Spec.Unschedulable && n.Annotations["lifeboat.io/drained"] != "", err
	}); err != nil {
		return err
	}
	// Then a pod guarded by a PDB, and a second notice (the action changed
	// to stop, 9 s ahead; the same action would be the same interruption):
	// a second work on the node, whose Cordoned Event is the first one
	// counted again (events patch), and the guarded pod deleted at the
	// deadline.
	guarded, err := kube.CreatePod(ctx, testenv.PodSpec{Namespace: w.ns, Node: node, Grace: 30 * time.Second, ShutdownAfter: time.Second, Labels: map[string]string{"app": "guarded"}, MountAnnotations: true})
	if err != nil {
		return setupErr(t, err)
	}
	one := intstr.FromInt32(1)
	if _, err := kube.CreatePDB(ctx, testenv.PDBSpec{Namespace: w.ns, Name: "guard", Selector: map[string]string{"app": "guarded"}, MinAvailable: &one}); err != nil {
		return setupErr(t, err)
	}
	opts.After, opts.SpotAction, opts.SpotTime = 0, "stop", time.Now().Add(9*time.Second)
	if err := mock.Restart(ctx, opts); err != nil {
		return setupErr(t, err)
	}
	if err := until(8*time.Second, "the guarded pod told the deadline, the node's condition", toldTheDeadline(ctx, node, w.ns, guarded.Name)); err != nil {
		return err
	}
	if err := until(20*time.Second, "the PDB-guarded pod force-deleted at the deadline", func() (bool, error) { return gone(guarded.Name) }); err != nil {
		return err
	}
	if err := until(5*time.Second, "DrainForecastMiss on the node and the guarded pod", forecastWarned(ctx, node, w.ns, guarded.Name)); err != nil {
		return err
	}
	for _, reason := range []string{"Cordoned", "Drained"} {
		if err := until(5*time.Second, "two "+reason+" events on the node", func() (bool, error) {
			n, err := nodeEvents(ctx, node, reason)
			return n >= 2, err
		}); err != nil {
			return err
		}
	}
	checkConflicted(t, kp)
	return p.healthy()
}

// setupErr fails the test: a scenario must fail because of lifeboat, never
// because its world could not be built.
func setupErr(t *testing.T, err error) error {
	t.Helper()
	t.Fatalf("setting up the scenario: %v", err)
	return err
}

// toldTheDeadline reports whether the pod carries lifeboat.io/deadline
// and the node the condition lifeboat.io/Terminating, status True.
func toldTheDeadline(ctx context.Context, node, ns, pod string) func() (bool, error) {
	return func() (bool, error) {
		p, err := kube.Client.CoreV1().Pods(ns).Get(ctx, pod, metav1.GetOptions{})
		if err != nil || p.Annotations["lifeboat.io/deadline"] == "" {
			return false, err
		}
		n, err := kube.Client.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		for _, c := range n.Status.Conditions {
			if c.Type == "lifeboat.io/Terminating" && c.Status == corev1.ConditionTrue {
				return true, nil
			}
		}
		return false, nil
	}
}

// forecastWarned reports whether the drain forecast's DrainForecastMiss
// Warning is on the node and on the pod.
func forecastWarned(ctx context.Context, node, ns, pod string) func() (bool, error) {
	return func() (bool, error) {
		n, err := nodeEvents(ctx, node, "DrainForecastMiss")
		if err != nil || n == 0 {
			return false, err
		}
		list, err := kube.Client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{
			FieldSelector: fields.Set{"involvedObject.name": pod, "reason": "DrainForecastMiss"}.String(),
		})
		return err == nil && len(list.Items) > 0, err
	}
}
