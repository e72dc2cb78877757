//go:build !imdsonly

package main

import (
	"context"
	"fmt"
	"io"
	"time"

	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	elbv2 "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancingv2"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sts"
	"k8s.io/client-go/kubernetes"

	"lifeboat.dev/lifeboat/internal/check"
	"lifeboat.dev/lifeboat/internal/config"
	imdssrc "lifeboat.dev/lifeboat/internal/source/imds"
)

const checkHeader = `usage: lifeboat check [--output table|json] [--timeout 1m] [run flags]

Verify, with the flags lifeboat run is given, what lifeboat needs: the queue
and its policy, the EventBridge rules (against real AWS events), the lifecycle
hooks of the cluster's groups, the IAM permissions, the Kubernetes API and
RBAC (docs/operations.md); then review the cluster for what would make a
drain miss its deadline: PodDisruptionBudgets allowing no disruption now,
grace periods longer than the Spot notice or an unheartbeated hook's
timeout (docs/forecast.md); and read sampled nodes' kubelet configuration
through the node proxy for graceful node shutdown (nodes/proxy get;
docs/kubelet-shutdown.md). Exits 1 when a check fails.

`

// outputFormat is the value of --output.
type outputFormat string

func (o *outputFormat) String() string { return string(*o) }
func (o *outputFormat) Set(v string) error {
	if v != "table" && v != "json" {
		return fmt.Errorf("%q: must be table or json", v)
	}
	*o = outputFormat(v)
	return nil
}

// errChecksFailed makes `lifeboat check` exit non-zero.
type errChecksFailed struct{ n int }

func (e errChecksFailed) Error() string { return fmt.Sprintf("%d checks failed", e.n) }

// checkCommand is `lifeboat check`: its own flags, then the configuration
// of `lifeboat run`, unchanged.
func checkCommand(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	f := config.NewFlags("check")
	output := outputFormat("table")
	f.FlagSet().Var(&output, "output", "report format: table or json")
	f.FlagSet().Var(&output, "o", "short for --output")
	timeout := f.FlagSet().Duration("timeout", time.Minute, "time allowed for all checks")
	cfg, ok, err := loadConfig(f, "check", checkHeader, args, getenv, stdout)
	if !ok {
		return err
	}
	if *timeout <= 0 {
		return usageError{fmt.Errorf("--timeout %s: must be positive", *timeout), "lifeboat check --help"}
	}
	for _, w := range cfg.Warnings {
		fmt.Fprintln(stderr, "configuration warning:", w)
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	// The metadata endpoint as run resolves it; run refuses to start
	// where this fails, check reports it.
	cfg, imdsErr := resolveIMDSEndpoint(cfg, getenv)
	clients, err := checkClients(ctx, cfg)
	if err != nil {
		return err
	}
	if cfg.Mode == config.ModeIMDS {
		clients.IMDSErr = imdsErr
		if imdsErr == nil {
			// The client run uses (imdsflow).
			clients.IMDS = imdssrc.NewClient(cfg.IMDSEndpoint, cfg.IMDSAllowV1)
		}
	}
	report := check.Run(ctx, cfg, clients)
	if output == "json" {
		err = report.WriteJSON(stdout)
	} else {
		err = report.WriteTable(stdout)
	}
	if err != nil {
		return fmt.Errorf("writing the report: %w", err)
	}
	if report.Failed() {
		return errChecksFailed{report.Count(check.Fail)}
	}
	return nil
}

// checkClients builds the clients `lifeboat run` would use, with the same
// credentials chain, region and endpoints.
func checkClients(ctx context.Context, cfg config.Config) (check.Clients, error) {
	var c check.Clients
	rc, err := restConfig(cfg, "lifeboat-check/"+version)
	if err == nil {
		rc.Timeout = 10 * time.Second // a doctor answers quickly
		c.KubeHost = rc.Host
		c.Kube, err = kubernetes.NewForConfig(rc)
	}
	c.KubeErr = err
	if cfg.Mode != config.ModeQueue {
		return c, nil
	}
	// run's loader (region, attempt timeout, credentials); only fewer
	// attempts: a doctor answers quickly.
	awsCfg, err := loadAWS(ctx, cfg, func(o *awsconfig.LoadOptions) error { o.RetryMaxAttempts = 2; return nil })
	if err != nil {
		return c, err
	}
	c.SQS = awssqs.NewFromConfig(awsCfg, func(o *awssqs.Options) { setEndpoint(&o.BaseEndpoint, cfg.Endpoints["sqs"]) })
	c.Events = eventbridge.NewFromConfig(awsCfg, func(o *eventbridge.Options) { setEndpoint(&o.BaseEndpoint, cfg.Endpoints["eventbridge"]) })
	c.AutoScaling = autoscaling.NewFromConfig(awsCfg, func(o *autoscaling.Options) { setEndpoint(&o.BaseEndpoint, cfg.Endpoints["autoscaling"]) })
	c.STS = sts.NewFromConfig(awsCfg, func(o *sts.Options) { setEndpoint(&o.BaseEndpoint, cfg.Endpoints["sts"]) })
	c.EC2 = ec2.NewFromConfig(awsCfg, func(o *ec2.Options) { setEndpoint(&o.BaseEndpoint, cfg.Endpoints["ec2"]) })
	c.ELB = elbv2.NewFromConfig(awsCfg, func(o *elbv2.Options) { setEndpoint(&o.BaseEndpoint, cfg.Endpoints["elasticloadbalancing"]) })
	return c, nil
}
