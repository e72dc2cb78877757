package check

import (
	"slices"
	"testing"
)

// The Kubernetes permissions checked follow the options: nodes delete
// only with --delete-ghost-nodes.
func TestAccessesFollowOptions(t *testing.T) {
	deletesNodes := func(extra ...string) bool {
		return slices.ContainsFunc(accesses(queueConfig(t, extra...)), func(a access) bool { return a.verb == "delete" && a.resource == "nodes" })
	}
	if deletesNodes() {
		t.Error("nodes delete checked by default")
	}
	if !deletesNodes("--delete-ghost-nodes") {
		t.Error("nodes delete not checked with --delete-ghost-nodes")
	}
}
