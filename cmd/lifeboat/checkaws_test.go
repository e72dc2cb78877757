//go:build !imdsonly

package main

import (
	"context"
	"testing"

	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
	elbv2 "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancingv2"
	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"

	"lifeboat.dev/lifeboat/internal/config"
)

// Issue 22: `lifeboat check` reaches AWS through clients built as run's
// are: the same loader (region, the attempt timeout that keeps an endpoint
// that never answers from hanging a call) and the same endpoints; only the
// attempts differ (a doctor answers quickly). Before, check loaded its own
// configuration without the attempt timeout.
func TestCheckReachesAWSAsRunDoes(t *testing.T) {
	t.Setenv("AWS_ACCESS_KEY_ID", "test")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "test")
	t.Setenv("AWS_REGION", "")
	t.Setenv("AWS_CONFIG_FILE", t.TempDir()+"/none")
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", t.TempDir()+"/none")
	cfg := config.Config{Mode: config.ModeQueue, Region: "eu-west-1", Kubeconfig: t.TempDir() + "/none",
		Endpoints: map[string]string{"sqs": "http://127.0.0.1:1", "autoscaling": "http://127.0.0.1:2", "elasticloadbalancing": "http://127.0.0.1:3"}}
	run, err := loadAWS(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	c, err := checkClients(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if c.SQS == nil {
		t.Fatal("check built no SQS client in queue mode")
	}
	sqsClient, ok := c.SQS.(*awssqs.Client)
	if !ok {
		t.Fatalf("check's SQS client is %T", c.SQS)
	}
	o := sqsClient.Options()
	if o.Region != run.Region {
		t.Errorf("check's region %q, run's %q", o.Region, run.Region)
	}
	if o.BaseEndpoint == nil || *o.BaseEndpoint != cfg.Endpoints["sqs"] {
		t.Errorf("check's SQS endpoint %v, want %s", o.BaseEndpoint, cfg.Endpoints["sqs"])
	}
	if a := c.AutoScaling.(*autoscaling.Client).Options().BaseEndpoint; a == nil || *a != cfg.Endpoints["autoscaling"] {
		t.Errorf("check's Auto Scaling endpoint %v, want %s", a, cfg.Endpoints["autoscaling"])
	}
	if e := c.ELB.(*elbv2.Client).Options().BaseEndpoint; e == nil || *e != cfg.Endpoints["elasticloadbalancing"] {
		t.Errorf("check's ELBv2 endpoint %v, want %s", e, cfg.Endpoints["elasticloadbalancing"])
	}
	hc, ok := o.HTTPClient.(*awshttp.BuildableClient)
	if !ok {
		t.Fatalf("check's HTTP client is %T, want run's *http.BuildableClient", o.HTTPClient)
	}
	runHC := run.HTTPClient.(*awshttp.BuildableClient)
	if hc.GetTimeout() != runHC.GetTimeout() || hc.GetTimeout() != awsAttemptTimeout {
		t.Errorf("check's attempt timeout %v, run's %v; want both %v", hc.GetTimeout(), runHC.GetTimeout(), awsAttemptTimeout)
	}
	if o.RetryMaxAttempts != 2 || run.RetryMaxAttempts != awsMaxAttempts {
		t.Errorf("attempts: check %d, run %d; want 2 and %d", o.RetryMaxAttempts, run.RetryMaxAttempts, awsMaxAttempts)
	}
}
