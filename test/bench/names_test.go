package bench

import (
	"fmt"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"
)

// TestPodNamesUnique: a 5,000-node run with 2 pods per node creates 20,000
// pods (the floor's fleet and lifeboat's, named as the harness names them);
// every name is a valid object name and none repeats, also for fleets of
// more than 9,999 nodes (five digits), and for scale-in's nodes (private
// DNS names).
func TestPodNamesUnique(t *testing.T) {
	for _, tc := range []struct {
		name           string
		nodes, podsPer int
		node           func(fleet, j int) string
		want           int
	}{
		{"5,000 x 2, floor and lifeboat", 5000, 2, func(fleet, j int) string {
			return fleetNodeName([]string{"floor-0", "harness-0"}[fleet], j)
		}, 20000},
		{"20,000 x 1, floor and lifeboat", 20000, 1, func(fleet, j int) string {
			return fleetNodeName([]string{"floor-0", "harness-0"}[fleet], j)
		}, 40000},
		{"12,000 x 11, one fleet", 12000, 11, func(fleet, j int) string {
			return fleetNodeName(fmt.Sprintf("harness-%d", fleet), j)
		}, 2 * 12000 * 11},
		{"scale-in, 5,000 x 2", 5000, 2, func(fleet, j int) string {
			return fmt.Sprintf("ip-10-%d-%d-%d.ec2.internal", fleet, j/256, j%256)
		}, 20000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			seen := map[string]string{}
			for fleet := range 2 {
				for j := range tc.nodes {
					node := tc.node(fleet, j)
					for k := range tc.podsPer {
						name := podName(node, k)
						if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
							t.Fatalf("pod name %q: %v", name, errs)
						}
						key := fmt.Sprintf("node %s pod %d", node, k)
						if other, dup := seen[name]; dup {
							t.Fatalf("pod name %q for %s and %s", name, other, key)
						}
						seen[name] = key
					}
				}
			}
			if len(seen) != tc.want {
				t.Errorf("%d distinct pod names, want %d", len(seen), tc.want)
			}
		})
	}
}

// TestFleetLeaseDuration: a fleet renews at most 100 node Leases a second
// (kwok renews each at a quarter of its length), and no Lease is shorter
// than the kubelet's 40 s.
func TestFleetLeaseDuration(t *testing.T) {
	for _, n := range []int{1, 50, 1000, 1001, 5000, 20000} {
		d := fleetLeaseDuration(n)
		renewals := float64(n) / (d / 4).Seconds()
		if d < 40*time.Second || renewals > 100 {
			t.Errorf("%d nodes: Leases of %v, %.1f renewals a second; want at least 40s and at most 100", n, d, renewals)
		}
	}
	if d := fleetLeaseDuration(1000); d != 40*time.Second {
		t.Errorf("1,000 nodes: Leases of %v, want the kubelet's 40s (as every earlier run had)", d)
	}
}
