package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"sigs.k8s.io/yaml"

	"lifeboat.dev/lifeboat/internal/kube"
	"lifeboat.dev/lifeboat/internal/kube/clientset"
	"lifeboat.dev/lifeboat/internal/status"
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
	o := statusOptions{print: status.PrintOptions{Output: status.OutputTable}, watch: true, interval: 5 * time.Millisecond}
	go func() { done <- printStatus(ctx, client, o, &out) }()
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

// lifeboat status follows kubectl get nodes: node names or -l pick the
// nodes, -o the format (an unknown one is a usage error, exit 2); a named
// node that does not exist is an error on stderr and exit 1, while the
// others are printed.
func TestStatusCommand(t *testing.T) {
	drainedAt := time.Date(2026, 11, 25, 6, 0, 0, 0, time.UTC).Format(time.RFC3339)
	drained := func(name, pool string) *corev1.Node {
		return &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"pool": pool}, Annotations: map[string]string{"lifeboat.io/drained": drainedAt}},
			Spec:       corev1.NodeSpec{Taints: []corev1.Taint{{Key: "lifeboat.io/spot-interruption", Value: "spot-interruption", Effect: corev1.TaintEffectNoSchedule}}},
		}
	}
	tests := []struct {
		name string
		args []string
		code int
		// stdout is the output, one line each ("" entries: none); stderr a part of the error.
		stdout []string
		stderr string
	}{
		{"every node, the default table", nil, 0, []string{"NODE STATE REASON LEFT PODS HEARTBEATS LIFECYCLE", "a drained spot-interruption - 0 0 -", "b drained spot-interruption - 0 0 -"}, ""},
		{"-o name", []string{"-o", "name"}, 0, []string{"node/a", "node/b"}, ""},
		{"-oname, kubectl's attached shorthand", []string{"-oname"}, 0, []string{"node/a", "node/b"}, ""},
		{"--output=name -l", []string{"--output=name", "-l", "pool=spot"}, 0, []string{"node/a"}, ""},
		{"--selector, set-based", []string{"--selector", "pool in (on-demand)", "-o", "name"}, 0, []string{"node/b"}, ""},
		{"names, after and before flags (sorted as ever)", []string{"b", "-o", "name", "a"}, 0, []string{"node/a", "node/b"}, ""},
		{"--no-headers", []string{"--no-headers"}, 0, []string{"a drained spot-interruption - 0 0 -", "b drained spot-interruption - 0 0 -"}, ""},
		{"-o wide", []string{"-o", "wide", "a"}, 0, []string{
			"NODE STATE REASON LEFT PODS HEARTBEATS LIFECYCLE INSTANCE ZONE INSTANCE-TYPE EVENTS DEADLINE HOOK DRAINED",
			"a drained spot-interruption - 0 0 - - - - - unknown - " + drainedAt}, ""},
		{"a named node is missing: the others print, exit 1", []string{"-o", "name", "a", "nope"}, 1, []string{"node/a"}, `nodes "nope" not found`},
		{"every named node missing", []string{"nope", "gone"}, 1, []string{"lifeboat is handling none of the selected nodes"}, `nodes "nope" not found` + "\n" + `nodes "gone" not found`},
		{"selector matches nothing", []string{"-l", "pool=none"}, 0, []string{"lifeboat is handling none of the selected nodes"}, ""},
		{"unknown -o", []string{"-o", "jsonpath={.items}"}, 2, nil, "want one of table, wide, json, yaml, name"},
		{"bad selector", []string{"-l", "pool in (spot"}, 2, nil, "-l pool in (spot"},
		{"names and -l", []string{"a", "-l", "pool=spot"}, 2, nil, "node names and -l cannot be used together"},
		{"-w -o name", []string{"-w", "-o", "name"}, 2, nil, "-w does not work with -o name"},
		{"unknown flag", []string{"--all-namespaces"}, 2, nil, "unknown flag: --all-namespaces"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cs := fake.NewClientset(drained("a", "spot"), drained("b", "on-demand"))
			newClient := func(string, string) (kube.Client, error) { return clientset.New(cs), nil }
			var stdout bytes.Buffer
			err := statusCommand(t.Context(), tt.args, newClient, &stdout)
			if code := exitCode(err); code != tt.code {
				t.Errorf("exit code %d, want %d (error: %v)", code, tt.code, err)
			}
			var lines []string
			for l := range strings.Lines(stdout.String()) {
				lines = append(lines, strings.Join(strings.Fields(l), " "))
			}
			if strings.Join(lines, "\n") != strings.Join(tt.stdout, "\n") {
				t.Errorf("stdout:\n%s\nwant:\n%s", strings.Join(lines, "\n"), strings.Join(tt.stdout, "\n"))
			}
			if tt.stderr == "" && err != nil || tt.stderr != "" && (err == nil || !strings.Contains(err.Error(), tt.stderr)) {
				t.Errorf("error %v, want one holding %q", err, tt.stderr)
			}
		})
	}
}

// With -w -o json a document is printed per change (one a line of jq's
// stream), with -o yaml one YAML stream of documents separated by ---.
func TestStatusWatchStreamsDocuments(t *testing.T) {
	for _, output := range []status.Output{status.OutputJSON, status.OutputYAML} {
		t.Run(string(output), func(t *testing.T) {
			client := clientset.New(fake.NewClientset(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "a"}}))
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			var out syncBuffer
			done := make(chan error, 1)
			o := statusOptions{print: status.PrintOptions{Output: output}, watch: true, interval: 5 * time.Millisecond}
			go func() { done <- printStatus(ctx, client, o, &out) }()
			deadline := time.Now().Add(5 * time.Second)
			for strings.Count(out.String(), "NodeStatusList") < 1 && time.Now().Before(deadline) {
				time.Sleep(5 * time.Millisecond)
			}
			time.Sleep(50 * time.Millisecond) // ten intervals: unchanged, not printed again
			n, _ := client.CoreV1().Nodes().Get(ctx, "a", metav1.GetOptions{})
			n.Annotations = map[string]string{"lifeboat.io/drained": time.Now().UTC().Format(time.RFC3339)}
			n.Spec.Taints = []corev1.Taint{{Key: "lifeboat.io/spot-interruption", Value: "spot-interruption", Effect: corev1.TaintEffectNoSchedule}}
			if _, err := client.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
			for !strings.Contains(out.String(), "drained") && time.Now().Before(deadline) {
				time.Sleep(5 * time.Millisecond)
			}
			cancel()
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			s := out.String()
			if got := strings.Count(s, "NodeStatusList"); got != 2 {
				t.Fatalf("%d documents, want 2 (start, change):\n%s", got, s)
			}
			var docs []status.List
			if output == status.OutputJSON {
				dec := json.NewDecoder(strings.NewReader(s))
				for dec.More() {
					var l status.List
					if err := dec.Decode(&l); err != nil {
						t.Fatalf("not a JSON stream: %v\n%s", err, s)
					}
					docs = append(docs, l)
				}
			} else {
				for doc := range strings.SplitSeq(s, "---\n") {
					var l status.List
					if err := yaml.Unmarshal([]byte(doc), &l); err != nil {
						t.Fatalf("not a YAML stream: %v\n%s", err, s)
					}
					docs = append(docs, l)
				}
			}
			if len(docs) != 2 || len(docs[0].Items) != 0 || len(docs[1].Items) != 1 || docs[1].Items[0].State != status.Drained {
				t.Errorf("documents %+v, want none then a drained", docs)
			}
		})
	}
}
