package deploy

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// stormPeak is the highest RSS queue mode's leader reached in a 5,000-node
// Spot storm (docs/benchmarks.md: 397.5-582.6 MiB in session 16's runs,
// 449.7-575.6 MiB in session 17's), without a GOMEMLIMIT.
var stormPeak = resource.MustParse("583Mi")

// The chart's memory limit holds queue mode's leader through a
// region-wide Spot reclaim with room to spare (half the peak again): the
// 256Mi it had would have had the leader OOM-killed in the middle of a
// 5,000-node storm, its messages hidden for the visibility timeout.
func TestDeploymentMemoryHoldsAStorm(t *testing.T) {
	r := mustRender(t, "lifeboat", "kube-system", map[string]any{"queueURL": exampleQueue})
	d := into[appsv1.Deployment](t, r.one(t, "Deployment"))
	limit := d.Spec.Template.Spec.Containers[0].Resources.Limits.Memory()
	if limit.IsZero() {
		t.Fatal("the Deployment has no memory limit")
	}
	if want := stormPeak.Value() * 3 / 2; limit.Value() < want {
		t.Errorf("the Deployment's memory limit is %s; want at least %d MiB (1.5 x the %s a 5,000-node storm peaked at)", limit, want>>20, &stormPeak)
	}
}
