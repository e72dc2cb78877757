package drain

import (
	"context"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"lifeboat.dev/lifeboat/internal/kube/clientset"
)

// NodePods asks for pages of nodePodsPage pods (a list without a page size
// costs API Priority and Fairness 10 seats whatever it returns), follows
// continue tokens with no version of their own, and lists once more without
// pages when a token has expired. The fake API server answers pages as the
// real one does: Limit pods and a token while more are left.
func TestNodePodsPages(t *testing.T) {
	for _, tc := range []struct {
		name       string
		pods       int
		minVersion string
		expire     bool // the first continuation answers 410
		wantCalls  []string
	}{
		{name: "one page", pods: 2, wantCalls: []string{`rv="" limit=110 continue=""`}},
		{name: "a full node, one page", pods: nodePodsPage, wantCalls: []string{`rv="" limit=110 continue=""`}},
		{name: "three pages", pods: 2*nodePodsPage + 5, minVersion: AnyVersion, wantCalls: []string{
			`rv="0" limit=110 continue=""`, `rv="" limit=110 continue="110"`, `rv="" limit=110 continue="220"`,
		}},
		{name: "an expired token", pods: nodePodsPage + 1, expire: true, wantCalls: []string{
			`rv="" limit=110 continue=""`, `rv="" limit=110 continue="110"`, `rv="" limit=0 continue=""`,
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cs := fake.NewClientset()
			var calls []string
			cs.PrependReactor("list", "pods", func(act k8stesting.Action) (bool, runtime.Object, error) {
				o := act.(k8stesting.ListActionImpl).ListOptions
				calls = append(calls, fmt.Sprintf("rv=%q limit=%d continue=%q", o.ResourceVersion, o.Limit, o.Continue))
				if o.Continue != "" && tc.expire {
					return true, nil, apierrors.NewResourceExpired("The provided continue parameter is too old")
				}
				from := 0
				if o.Continue != "" {
					fmt.Sscan(o.Continue, &from)
				}
				to := tc.pods
				if o.Limit > 0 {
					to = min(tc.pods, from+int(o.Limit))
				}
				list := &corev1.PodList{ListMeta: metav1.ListMeta{ResourceVersion: "42"}}
				for i := from; i < to; i++ {
					list.Items = append(list.Items, corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: fmt.Sprint("p", i)}, Spec: corev1.PodSpec{NodeName: "node-a"}})
				}
				if to < tc.pods {
					list.Continue = fmt.Sprint(to)
				}
				return true, list, nil
			})
			list, err := NodePods(context.Background(), clientset.New(cs), "node-a", tc.minVersion)
			if err != nil {
				t.Fatal(err)
			}
			if got, want := strings.Join(calls, "; "), strings.Join(tc.wantCalls, "; "); got != want {
				t.Errorf("lists sent:\n  %s\nwant\n  %s", got, want)
			}
			seen := map[string]bool{}
			for _, p := range list.Items {
				seen[p.Name] = true
			}
			if len(list.Items) != tc.pods || len(seen) != tc.pods {
				t.Errorf("NodePods returned %d pods (%d different); want the node's %d", len(list.Items), len(seen), tc.pods)
			}
			if list.ResourceVersion != "42" || list.Continue != "" {
				t.Errorf("list version %q continue %q; want the first page's version and no token", list.ResourceVersion, list.Continue)
			}
		})
	}
}

