package outofservice

import "testing"

func TestDecide(t *testing.T) {
	tests := []struct {
		name          string
		state         string
		tainted, ours bool
		want          Action
	}{
		{name: "running: nothing to add", state: StateRunning, want: Keep},
		{name: "pending: nothing to add", state: StatePending, want: Keep},
		{name: "stopping: not yet shut down", state: StateStopping, want: Keep},
		{name: "shutting-down: not yet shut down", state: StateShuttingDown, want: Keep},
		{name: "stopped: add", state: StateStopped, want: Add},
		{name: "terminated: add", state: StateTerminated, want: Add},
		{name: "stopped, ours already", state: StateStopped, tainted: true, ours: true, want: Keep},
		{name: "terminated, someone else's taint", state: StateTerminated, tainted: true, want: Keep},
		{name: "unknown state: nothing", state: "", want: Keep},
		{name: "unknown state, ours: kept", state: "", tainted: true, ours: true, want: Keep},
		{name: "a state EC2 may add later: nothing", state: "hibernating", want: Keep},
		{name: "running again: ours removed", state: StateRunning, tainted: true, ours: true, want: Remove},
		{name: "pending again: ours removed", state: StatePending, tainted: true, ours: true, want: Remove},
		{name: "running, someone else's taint kept", state: StateRunning, tainted: true, want: Keep},
		{name: "stopping, ours kept", state: StateStopping, tainted: true, ours: true, want: Keep},
		{name: "running, our annotation without the taint: cleaned", state: StateRunning, ours: true, want: Remove},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Decide(tt.state, tt.tainted, tt.ours); got != tt.want {
				t.Errorf("Decide(%q, tainted %v, ours %v) = %s, want %s", tt.state, tt.tainted, tt.ours, got, tt.want)
			}
		})
	}
}
