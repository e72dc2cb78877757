package testenv

import (
	"fmt"
	"os"
	"sync"
	"testing"
	"time"
)

// TestCgroupParentSharedByNodes: two real nodes' cgroups share a parent,
// which a node's teardown removes once it is empty. A node being set up
// meanwhile must still get its cgroup: makeCgroup tries again when the
// parent went away under it (ENOENT while creating, ENODEV while writing
// into the removed directory). Two real nodes booted at one moment failed
// so ("setting cpuset.cpus ...: no such device").
func TestCgroupParentSharedByNodes(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("cgroups need root")
	}
	parent := fmt.Sprintf("/lifeboat-cgrace-%d", os.Getpid())
	t.Cleanup(func() { _ = removeCgroup(parent + "/x") })
	deadline := time.Now().Add(3 * time.Second)
	var wg sync.WaitGroup
	errs := make(chan error, 2)
	for i := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			child := fmt.Sprintf("%s/node-%d", parent, i)
			for n := 0; time.Now().Before(deadline); n++ {
				if err := makeCgroup(child + "/pods"); err != nil {
					errs <- fmt.Errorf("make #%d of %s: %w", n, child, err)
					return
				}
				if err := removeCgroup(child); err != nil {
					errs <- fmt.Errorf("remove #%d of %s: %w", n, child, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}
