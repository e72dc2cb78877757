package intake

import (
	"context"
	"errors"
	"testing"

	"lifeboat.dev/lifeboat/internal/config"
)

// --managed-tag: only nodes whose instance carries the tag are acted on;
// an untagged node's message follows --unknown-instance (handed back for
// its owner, or deleted); an unreadable tag does not lose the notice.
func TestManagedTag(t *testing.T) {
	tagged := map[string]bool{instA: true}
	tests := []struct {
		name         string
		instance     string
		policy       config.UnknownPolicy
		err          error
		wantCordon   bool
		wantAcked    int
		wantReleased int
	}{
		{name: "tagged: acted on", instance: instA, policy: config.UnknownLeave, wantCordon: true, wantAcked: 1},
		{name: "untagged, leave: handed back", instance: instB, policy: config.UnknownLeave, wantReleased: 1},
		{name: "untagged, delete: deleted", instance: instB, policy: config.UnknownDelete, wantAcked: 1},
		{name: "tag unreadable: acted on", instance: instB, policy: config.UnknownLeave, err: errors.New("throttled"), wantCordon: true, wantAcked: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var asked []string
			managed := func(_ context.Context, id string) (bool, error) {
				asked = append(asked, id)
				return tagged[id], tt.err
			}
			in, d, src := start(t, Options{UnknownInstance: tt.policy, Managed: managed})
			close(d.release)
			in.Handle(context.Background(), msg("m", spot(tt.instance)))
			waitFor(t, "the message settled", func() bool { acked, released, _ := src.snapshot(); return len(acked)+len(released) == 1 })
			acked, released, _ := src.snapshot()
			if len(acked) != tt.wantAcked || len(released) != tt.wantReleased {
				t.Errorf("acked %v released %v; want %d acked, %d released", acked, released, tt.wantAcked, tt.wantReleased)
			}
			node := map[string]string{instA: "node-a", instB: "node-b"}[tt.instance]
			if got := d.count(d.cordons, node) > 0; got != tt.wantCordon {
				t.Errorf("node cordoned: %v, want %v", got, tt.wantCordon)
			}
			if len(asked) != 1 || asked[0] != tt.instance {
				t.Errorf("tag looked up for %v, want [%s]", asked, tt.instance)
			}
		})
	}
}

// Without --managed-tag no lookup is made and every node is acted on.
func TestNoManagedTagNoLookup(t *testing.T) {
	in, d, src := start(t, Options{UnknownInstance: config.UnknownLeave})
	close(d.release)
	in.Handle(context.Background(), msg("m", spot(instB)))
	waitFor(t, "the message acked", func() bool { acked, _, _ := src.snapshot(); return len(acked) == 1 })
	if d.count(d.cordons, "node-b") != 1 {
		t.Error("node not cordoned without --managed-tag")
	}
}
