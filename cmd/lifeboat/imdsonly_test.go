package main

import (
	"os/exec"
	"strings"
	"testing"
)

// The IMDS-only build (lifeboat-imds, the DaemonSet's binary) links none of
// the AWS SDK (its metadata client is internal/source/imds.Client) and no
// Auto Scaling code: what it does not link, a node does not pay for in
// memory (docs/benchmarks.md).
func TestIMDSOnlyBuildLinksNoAWSService(t *testing.T) {
	for _, p := range imdsOnlyDeps(t) {
		if strings.HasPrefix(p, "github.com/aws/") || p == "lifeboat.dev/lifeboat/internal/asg" ||
			p == "lifeboat.dev/lifeboat/internal/check" || p == "lifeboat.dev/lifeboat/internal/source/sqs" {
			t.Errorf("the imdsonly build links %s", p)
		}
	}
}

// imdsOnlyDeps lists the packages the IMDS-only build links.
func imdsOnlyDeps(t *testing.T) []string {
	t.Helper()
	out, err := exec.Command("go", "list", "-tags", "imdsonly", "-deps", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -tags imdsonly -deps: %v\n%s", err, out)
	}
	deps := strings.Fields(string(out))
	if len(deps) < 50 {
		t.Fatalf("go list gave %d packages, want the whole dependency list", len(deps))
	}
	return deps
}

// Issue 16: the IMDS-only build talks to Kubernetes through internal/kube
// (core/v1 and policy/v1 only), not client-go's clientset: no typed client
// of any group, no kubernetes/scheme registering all 57 k8s.io/api groups,
// no discovery or apply configurations, no leader election, no OpenAPI
// models. Each package
// linked is initialised and faults in pages of the binary on every node.
func TestIMDSOnlyBuildLinksNoClientset(t *testing.T) {
	forbidden := []string{
		"k8s.io/client-go/kubernetes", // the clientset, its scheme and typed clients
		"k8s.io/client-go/discovery",
		"k8s.io/client-go/applyconfigurations",
		"k8s.io/client-go/tools/leaderelection",
		"lifeboat.dev/lifeboat/internal/leader",
		"lifeboat.dev/lifeboat/internal/kube/clientset",
		// client-go's event recorder computes strategic merge patches,
		// which link the OpenAPI models: IMDS mode records through
		// kube.Recorder.
		"k8s.io/client-go/tools/record",
		"k8s.io/apimachinery/pkg/util/strategicpatch",
		"github.com/google/gnostic-models",
		"k8s.io/kube-openapi",
	}
	allowedAPI := map[string]bool{"k8s.io/api/core/v1": true, "k8s.io/api/policy/v1": true}
	var api []string
	for _, p := range imdsOnlyDeps(t) {
		for _, f := range forbidden {
			if p == f || strings.HasPrefix(p, f+"/") {
				t.Errorf("the imdsonly build links %s", p)
			}
		}
		if strings.HasPrefix(p, "k8s.io/api/") {
			api = append(api, p)
			if !allowedAPI[p] {
				t.Errorf("the imdsonly build links the API group %s (want core/v1 and policy/v1 only)", p)
			}
		}
	}
	if len(api) != len(allowedAPI) {
		t.Errorf("the imdsonly build links the API groups %v, want core/v1 and policy/v1", api)
	}
}
