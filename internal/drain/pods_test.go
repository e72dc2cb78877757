package drain

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	clocktesting "k8s.io/utils/clock/testing"

	"lifeboat.dev/lifeboat/internal/kube/clientset"
)

func TestFinished(t *testing.T) {
	for _, tc := range []struct {
		phase corev1.PodPhase
		want  bool
	}{
		{phase: corev1.PodSucceeded, want: true},
		{phase: corev1.PodFailed, want: true},
		{phase: corev1.PodRunning, want: false},
		{phase: corev1.PodPending, want: false},
		{phase: corev1.PodUnknown, want: false},
		{phase: "", want: false},
	} {
		t.Run(string(tc.phase), func(t *testing.T) {
			p := &corev1.Pod{Status: corev1.PodStatus{Phase: tc.phase}}
			if got := Finished(p); got != tc.want {
				t.Errorf("Finished(phase %q) = %v, want %v", tc.phase, got, tc.want)
			}
		})
	}
}

func TestNodePods(t *testing.T) {
	a := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns1", Name: "a"}, Spec: corev1.PodSpec{NodeName: "node-a"}}
	b := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns2", Name: "b"}, Spec: corev1.PodSpec{NodeName: "node-a"}}
	for _, tc := range []struct {
		name       string
		minVersion string
		listErr    error // the API server's answer to the list; nil: the pods
		wantPods   int
		wantRV     string
		wantMatch  metav1.ResourceVersionMatch
		wantError  string // "": none
	}{
		{name: "every namespace's pods", wantPods: 2},
		{name: "any version", minVersion: AnyVersion, wantPods: 2, wantRV: "0"},
		{name: "not older than a version", minVersion: "123", wantPods: 2, wantRV: "123", wantMatch: metav1.ResourceVersionMatchNotOlderThan},
		{name: "a failed list names the node", listErr: errors.New("connection refused"), wantError: "listing pods of node node-a: connection refused"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cs := fake.NewClientset(&a, &b)
			var selector, namespace string
			var opts metav1.ListOptions
			cs.PrependReactor("list", "pods", func(act k8stesting.Action) (bool, runtime.Object, error) {
				l := act.(k8stesting.ListActionImpl)
				selector, namespace, opts = l.GetListRestrictions().Fields.String(), l.GetNamespace(), l.ListOptions
				return tc.listErr != nil, nil, tc.listErr
			})
			list, err := NodePods(context.Background(), clientset.New(cs), "node-a", tc.minVersion)
			if selector != "spec.nodeName=node-a" || namespace != metav1.NamespaceAll {
				t.Errorf("listed with field selector %q in namespace %q, want spec.nodeName=node-a in every namespace", selector, namespace)
			}
			if opts.ResourceVersion != tc.wantRV || opts.ResourceVersionMatch != tc.wantMatch {
				t.Errorf("listed with resourceVersion %q match %q, want %q match %q", opts.ResourceVersion, opts.ResourceVersionMatch, tc.wantRV, tc.wantMatch)
			}
			if tc.wantError != "" {
				if err == nil || err.Error() != tc.wantError || !errors.Is(err, tc.listErr) {
					t.Fatalf("NodePods error = %v, want %q wrapping the list's", err, tc.wantError)
				}
				return
			}
			if err != nil {
				t.Fatalf("NodePods: %v", err)
			}
			var names []string
			for _, p := range list.Items {
				names = append(names, p.Namespace+"/"+p.Name)
			}
			if len(list.Items) != tc.wantPods {
				t.Errorf("NodePods = %s, want %d pods", strings.Join(names, ", "), tc.wantPods)
			}
		})
	}
}

// The forecasts of a burst share one list of the cluster's budgets while
// it is younger than budgetsMaxAge; an older one is listed again, and a
// failed list is not kept.
func TestBudgetsListedOncePerMaxAge(t *testing.T) {
	pdb := &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "db"}}
	cs := fake.NewClientset(pdb)
	lists := 0
	var fail error
	cs.PrependReactor("list", "poddisruptionbudgets", func(k8stesting.Action) (bool, runtime.Object, error) {
		lists++
		return fail != nil, nil, fail
	})
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	src := &ForecastSource{Client: clientset.New(cs), Clock: clk}
	ctx := context.Background()
	for _, step := range []struct {
		advance   time.Duration
		fail      error
		wantLists int
		wantErr   bool
	}{
		{wantLists: 1},
		{advance: budgetsMaxAge - time.Millisecond, wantLists: 1},
		{advance: time.Millisecond, wantLists: 2},
		{advance: budgetsMaxAge, fail: errors.New("connection refused"), wantLists: 3, wantErr: true},
		{wantLists: 4},
	} {
		clk.Step(step.advance)
		fail = step.fail
		got, err := src.Budgets(ctx)
		if (err != nil) != step.wantErr {
			t.Fatalf("after %d lists: error %v, want error %v", lists, err, step.wantErr)
		}
		if !step.wantErr && (len(got) != 1 || got[0].Name != "db") {
			t.Errorf("budgets %v, want shop/db", got)
		}
		if lists != step.wantLists {
			t.Errorf("%d lists, want %d", lists, step.wantLists)
		}
	}
}

// A forecast's lists take whatever state the API server's cache holds
// (resourceVersion "0"): answered at once, never from etcd.
func TestForecastListsAnyVersion(t *testing.T) {
	cs := fake.NewClientset()
	got := map[string]metav1.ListOptions{}
	cs.PrependReactor("list", "*", func(act k8stesting.Action) (bool, runtime.Object, error) {
		got[act.GetResource().Resource] = act.(k8stesting.ListActionImpl).ListOptions
		return false, nil, nil
	})
	src := &ForecastSource{Client: clientset.New(cs)}
	if _, _, err := src.ForecastInputs(context.Background(), "node-a"); err != nil {
		t.Fatal(err)
	}
	for _, res := range []string{"pods", "poddisruptionbudgets"} {
		o, ok := got[res]
		if !ok || o.ResourceVersion != "0" || o.ResourceVersionMatch != "" {
			t.Errorf("%s listed %v with resourceVersion %q match %q, want any version (\"0\", no match)", res, ok, o.ResourceVersion, o.ResourceVersionMatch)
		}
	}
}

// cordonVersion is the newest known copy's version (lifeboat's last write
// or the node cache's) when that copy shows the node cordoned; "" when it
// does not, or without a node cache.
func TestCordonVersion(t *testing.T) {
	node := func(rv string, cordoned bool) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", ResourceVersion: rv}, Spec: corev1.NodeSpec{Unschedulable: cordoned}}
	}
	for _, tc := range []struct {
		name    string
		noCache bool
		cached  *corev1.Node // nil: not in the cache
		written *corev1.Node // nil: no write remembered
		want    string
	}{
		{name: "no node cache", noCache: true, written: node("10", true)},
		{name: "nothing known"},
		{name: "the cordon's answer, not cached yet", written: node("10", true), want: "10"},
		{name: "the cache behind the cordon", cached: node("9", false), written: node("10", true), want: "10"},
		{name: "the cache past the cordon", cached: node("12", true), written: node("10", true), want: "12"},
		{name: "cordoned by someone else", cached: node("12", true), want: "12"},
		{name: "uncordoned since", cached: node("12", false), written: node("10", true)},
		{name: "not cordoned", written: node("10", false)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := &Drainer{}
			if !tc.noCache {
				d.cache = func(string) (*corev1.Node, bool) { return tc.cached, tc.cached != nil }
			}
			d.written.put(tc.written)
			if got := d.cordonVersion("n"); got != tc.want {
				t.Errorf("cordonVersion = %q, want %q", got, tc.want)
			}
		})
	}
}
