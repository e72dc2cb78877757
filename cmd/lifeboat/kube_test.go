//go:build !imdsonly

package main

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"lifeboat.dev/lifeboat/internal/config"
	"lifeboat.dev/lifeboat/internal/metrics"
	"lifeboat.dev/lifeboat/internal/source/sqs"
)

// Every Kubernetes client lifeboat makes counts its requests in
// lifeboat_kube_requests_total, the leader election's Lease client
// included, but the Events client (docs/metrics.md: Events excluded).
func TestKubeClientsCountRequests(t *testing.T) {
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusNotFound)
		fmt.Fprint(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"NotFound","code":404}`)
	}))
	t.Cleanup(api.Close)
	m := metrics.New()
	c, err := newKubeClients(&rest.Config{Host: api.URL}, config.Config{KubeQPS: 100, KubeBurst: 100}, m,
		func(rt http.RoundTripper) http.RoundTripper { return rt })
	if err != nil {
		t.Fatal(err)
	}
	clientset := func(rc *rest.Config) kubernetes.Interface {
		cs, err := kubernetes.NewForConfig(rc)
		if err != nil {
			t.Fatal(err)
		}
		return cs
	}
	tests := []struct {
		client   string
		request  func(context.Context) error
		resource string // counted as GET of it; "": not counted
	}{
		{"main", func(ctx context.Context) error {
			_, err := c.main.Nodes().Get(ctx, "n", metav1.GetOptions{})
			return err
		}, "nodes"},
		{"node writes", func(ctx context.Context) error {
			_, err := c.nodes.Nodes().Get(ctx, "n", metav1.GetOptions{})
			return err
		}, "nodes"},
		{"drain pod reads", func(ctx context.Context) error {
			_, err := c.podReads.Pods("ns").Get(ctx, "p", metav1.GetOptions{})
			return err
		}, "pods"},
		{"forecast", func(ctx context.Context) error {
			_, err := c.forecast.Pods("ns").Get(ctx, "p", metav1.GetOptions{})
			return err
		}, "pods"},
		{"main clientset (VolumeAttachments, scale-in protection)", func(ctx context.Context) error {
			_, err := clientset(c.mainConfig).StorageV1().VolumeAttachments().Get(ctx, "va", metav1.GetOptions{})
			return err
		}, "volumeattachments"},
		{"leader election", func(ctx context.Context) error {
			_, err := clientset(c.electionConfig).CoordinationV1().Leases("ns").Get(ctx, "lifeboat", metav1.GetOptions{})
			return err
		}, "leases"},
		{"events", func(context.Context) error {
			_, err := c.events.EventSink().Create(&corev1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "e"}})
			return err
		}, ""},
	}
	count := func(verb, resource string) float64 {
		var d dto.Metric
		if err := m.KubeRequests.WithLabelValues(verb, resource).Write(&d); err != nil {
			t.Fatal(err)
		}
		return d.GetCounter().GetValue()
	}
	// total counts the requests of every verb and resource the clients
	// above ask for.
	total := func() float64 {
		var sum float64
		for _, res := range []string{"nodes", "pods", "volumeattachments", "leases", "events"} {
			sum += count(http.MethodGet, res) + count(http.MethodPost, res)
		}
		return sum
	}
	for _, tt := range tests {
		before, beforeAll := 0.0, total()
		if tt.resource != "" {
			before = count(http.MethodGet, tt.resource)
		}
		if err := tt.request(t.Context()); err == nil {
			t.Fatalf("%s: the fake API server answered 404, the request did not fail", tt.client)
		}
		switch {
		case tt.resource == "" && total() != beforeAll:
			t.Errorf("%s client: its request was counted; want it left out", tt.client)
		case tt.resource != "" && count(http.MethodGet, tt.resource)-before != 1:
			t.Errorf("%s client: GET %s counted %v times, want once", tt.client, tt.resource, count(http.MethodGet, tt.resource)-before)
		}
	}
}

// --visibility-timeout's default in the configuration table is the SQS
// source's DefaultVisibility (written twice: package config links no AWS
// code, for the IMDS-only build).
func TestVisibilityDefaultIsTheSourcesDefault(t *testing.T) {
	cfg, err := config.Load([]string{"--queue-url", "https://sqs.us-east-1.amazonaws.com/123456789012/q"}, func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	if cfg.VisibilityTimeout != sqs.DefaultVisibility {
		t.Errorf("--visibility-timeout defaults to %v, the SQS source to %v", cfg.VisibilityTimeout, sqs.DefaultVisibility)
	}
}
