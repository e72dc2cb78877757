package leader

import (
	"context"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/clock"
)

// Two replicas on one host (two processes on one machine, or two machines
// with the same host name) each took the host name as their identity: each
// saw itself as the Lease's holder and both led. Each replica's identity
// must be its own.
func TestTwoReplicasOnOneHostDoNotBothLead(t *testing.T) {
	kube := fake.NewClientset()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	start := func(l *lead) chan error {
		o := options(t, kube, l)
		o.Identity = Identity("", "node-1")
		// Whole seconds: the Lease records its duration in seconds.
		o.LeaseDuration = 2 * time.Second
		result := make(chan error, 1)
		go func() { result <- Run(ctx, o, NewFence(clock.RealClock{}, true), l.run) }()
		return result
	}
	first, second := newLead(nil), newLead(nil)
	firstDone := start(first)
	<-first.started
	secondDone := start(second)
	// One and a half lease durations: the second replica, polling every
	// sixth of one, waits for a Lease the first one keeps renewing.
	select {
	case <-second.started:
		t.Error("two replicas on host node-1 both lead")
	case <-time.After(3 * time.Second):
	}
	cancel()
	<-firstDone
	<-secondDone
}

func TestIdentity(t *testing.T) {
	for _, tc := range []struct {
		name, podName, hostname string
		// exact is the whole identity; else prefix, with a suffix of
		// its own per call.
		exact, prefix string
	}{
		{name: "in a pod", podName: "lifeboat-7d9f-abcde", hostname: "lifeboat-7d9f-abcde", exact: "lifeboat-7d9f-abcde"},
		{name: "pod name given, host name differs", podName: "lifeboat-0", hostname: "ip-10-0-0-1", exact: "lifeboat-0"},
		{name: "outside a pod", hostname: "node-1", prefix: "node-1_"},
		{name: "no name at all", prefix: "lifeboat_"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, b := Identity(tc.podName, tc.hostname), Identity(tc.podName, tc.hostname)
			if tc.exact != "" {
				if a != tc.exact || b != tc.exact {
					t.Errorf("Identity(%q, %q) = %q, %q; want the pod's name %q", tc.podName, tc.hostname, a, b, tc.exact)
				}
				return
			}
			if !strings.HasPrefix(a, tc.prefix) || len(a) <= len(tc.prefix) {
				t.Errorf("Identity(%q, %q) = %q, want %q and a suffix of its own", tc.podName, tc.hostname, a, tc.prefix)
			}
			if a == b {
				t.Errorf("Identity(%q, %q) twice = %q both times, want one per process", tc.podName, tc.hostname, a)
			}
		})
	}
}
