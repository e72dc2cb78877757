package imds

import (
	"context"
	"net/http/httptest"
	"testing"

	"k8s.io/utils/clock"

	"lifeboat.dev/lifeboat/internal/event"
)

// BenchmarkPollQuiet is one idle poll (every signal path read once, nothing
// announced) through the metadata Client against a local HTTP
// server: the per-poll cost behind IMDS mode's idle CPU (a poll a second
// at the chart's default). The server's own work is in the figure too.
//
//	go test ./internal/source/imds -run '^$' -bench PollQuiet -benchmem -cpuprofile /tmp/poll.prof
func BenchmarkPollQuiet(b *testing.B) {
	h := &httpIMDS{tokens: true, requireV2: true, docs: map[string]string{
		PathInstanceID: "i-0123456789abcdef0",
		PathScheduled:  "[]",
		PathHistory:    "[]",
	}}
	srv := httptest.NewServer(h)
	defer srv.Close()
	s := New(NewClient(srv.URL, false), clock.RealClock{}, discard, Options{})
	ctx := context.Background()
	submit := func([]event.Event) { b.Fatal("a quiet poll submitted events") }
	if err := s.Poll(ctx, submit); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if err := s.Poll(ctx, submit); err != nil {
			b.Fatal(err)
		}
	}
}
