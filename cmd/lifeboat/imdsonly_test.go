package main

import (
	"os/exec"
	"strings"
	"testing"
)

// The IMDS-only build (lifeboat-imds, the DaemonSet's binary) links no AWS
// service client and no Auto Scaling code: what it does not link, a node
// does not pay for in memory (docs/benchmarks.md).
func TestIMDSOnlyBuildLinksNoAWSService(t *testing.T) {
	out, err := exec.Command("go", "list", "-tags", "imdsonly", "-deps", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -tags imdsonly -deps: %v\n%s", err, out)
	}
	deps := strings.Fields(string(out))
	if len(deps) < 50 {
		t.Fatalf("go list gave %d packages, want the whole dependency list", len(deps))
	}
	for _, p := range deps {
		if strings.HasPrefix(p, "github.com/aws/aws-sdk-go-v2/service/") || p == "lifeboat.dev/lifeboat/internal/asg" ||
			p == "lifeboat.dev/lifeboat/internal/check" || p == "lifeboat.dev/lifeboat/internal/source/sqs" {
			t.Errorf("the imdsonly build links %s", p)
		}
	}
}
