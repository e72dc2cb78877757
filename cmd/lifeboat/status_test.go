package main

import (
	"bytes"
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"lifeboat.dev/lifeboat/internal/kube/clientset"
)

// syncBuffer is a bytes.Buffer safe to read while printStatus writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// -w prints when the status changes, not every interval.
func TestStatusWatchPrintsChanges(t *testing.T) {
	client := clientset.New(fake.NewClientset(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "a"}}))
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var out syncBuffer
	done := make(chan error, 1)
	go func() { done <- printStatus(ctx, client, false, true, 5*time.Millisecond, &out) }()
	waitFor := func(what string, cond func(string) bool) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for !cond(out.String()) {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s; output:\n%s", what, out.String())
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	waitFor("the first print", func(s string) bool { return strings.Contains(s, "handling no nodes") })
	time.Sleep(50 * time.Millisecond) // ten intervals: an idle cluster is printed once
	if n := strings.Count(out.String(), "---"); n != 1 {
		t.Fatalf("idle cluster printed %d times:\n%s", n, out.String())
	}
	n, _ := client.CoreV1().Nodes().Get(ctx, "a", metav1.GetOptions{})
	n.Annotations = map[string]string{"lifeboat.io/drained": time.Now().UTC().Format(time.RFC3339)}
	n.Spec.Taints = []corev1.Taint{{Key: "lifeboat.io/spot-interruption", Value: "spot-interruption", Effect: corev1.TaintEffectNoSchedule}}
	if _, err := client.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor("the change", func(s string) bool { return strings.Contains(s, "drained") })
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("printStatus: %v", err)
	}
	if n := strings.Count(out.String(), "---"); n != 2 {
		t.Errorf("printed %d times, want 2 (start, change):\n%s", n, out.String())
	}
}
