package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sts"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"lifeboat.dev/lifeboat/internal/check"
	"lifeboat.dev/lifeboat/internal/config"
)

// checkOptions are the flags of `lifeboat check` besides the configuration
// of `lifeboat run`, which it takes unchanged.
type checkOptions struct {
	output  string
	timeout time.Duration
}

// errChecksFailed makes `lifeboat check` exit non-zero.
type errChecksFailed struct{ n int }

func (e errChecksFailed) Error() string { return fmt.Sprintf("%d checks failed", e.n) }

// checkCommand is `lifeboat check [--output table|json] [--timeout D] [run flags]`.
func checkCommand(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	opts, rest, err := parseCheckFlags(args)
	if err != nil {
		return usageError{err}
	}
	cfg, err := config.Load(rest, getenv)
	if err != nil {
		return usageError{fmt.Errorf("configuration:\n%w", err)}
	}
	for _, w := range cfg.Warnings {
		fmt.Fprintln(stderr, "configuration warning:", w)
	}
	ctx, cancel := context.WithTimeout(ctx, opts.timeout)
	defer cancel()
	clients, err := checkClients(ctx, cfg)
	if err != nil {
		return err
	}
	report := check.Run(ctx, cfg, clients)
	if opts.output == "json" {
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

// parseCheckFlags takes check's own flags out of args and leaves the rest
// to config.Load.
func parseCheckFlags(args []string) (checkOptions, []string, error) {
	o := checkOptions{output: "table", timeout: time.Minute}
	var rest []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		name, value, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if !strings.HasPrefix(a, "-") || (name != "output" && name != "o" && name != "timeout") {
			rest = append(rest, a)
			continue
		}
		if !hasValue {
			if i+1 >= len(args) {
				return o, nil, fmt.Errorf("flag %s needs a value", a)
			}
			i++
			value = args[i]
		}
		switch name {
		case "output", "o":
			if value != "table" && value != "json" {
				return o, nil, fmt.Errorf("--output %q: must be table or json", value)
			}
			o.output = value
		case "timeout":
			d, err := time.ParseDuration(value)
			if err != nil || d <= 0 {
				return o, nil, fmt.Errorf("--timeout %q: must be a positive duration", value)
			}
			o.timeout = d
		}
	}
	return o, rest, nil
}

// checkClients builds the clients `lifeboat run` would use, with the same
// credentials chain, region and endpoints.
func checkClients(ctx context.Context, cfg config.Config) (check.Clients, error) {
	c := check.Clients{IMDS: &http.Client{Timeout: 3 * time.Second}}
	rc, err := checkRESTConfig(cfg)
	if err == nil {
		c.KubeHost = rc.Host
		c.Kube, err = kubernetes.NewForConfig(rc)
	}
	c.KubeErr = err
	if cfg.Mode != config.ModeQueue {
		return c, nil
	}
	awsCfg, err := awsconfig.LoadDefaultConfig(ctx, func(o *awsconfig.LoadOptions) error {
		if cfg.Region != "" {
			o.Region = cfg.Region
		}
		o.RetryMaxAttempts = 2 // a doctor answers quickly
		return nil
	})
	if err != nil {
		return c, fmt.Errorf("loading AWS configuration: %w", err)
	}
	c.SQS = awssqs.NewFromConfig(awsCfg, func(o *awssqs.Options) { setEndpoint(&o.BaseEndpoint, cfg.Endpoints["sqs"]) })
	c.Events = eventbridge.NewFromConfig(awsCfg, func(o *eventbridge.Options) { setEndpoint(&o.BaseEndpoint, cfg.Endpoints["eventbridge"]) })
	c.AutoScaling = autoscaling.NewFromConfig(awsCfg, func(o *autoscaling.Options) { setEndpoint(&o.BaseEndpoint, cfg.Endpoints["autoscaling"]) })
	c.STS = sts.NewFromConfig(awsCfg, func(o *sts.Options) { setEndpoint(&o.BaseEndpoint, cfg.Endpoints["sts"]) })
	c.EC2 = ec2.NewFromConfig(awsCfg, func(o *ec2.Options) { setEndpoint(&o.BaseEndpoint, cfg.Endpoints["ec2"]) })
	return c, nil
}

func checkRESTConfig(cfg config.Config) (*rest.Config, error) {
	var rc *rest.Config
	var err error
	if cfg.Kubeconfig != "" {
		rc, err = clientcmd.BuildConfigFromFlags("", cfg.Kubeconfig)
	} else {
		rc, err = rest.InClusterConfig()
	}
	if err != nil {
		return nil, fmt.Errorf("kubernetes client configuration: %w", err)
	}
	rc.UserAgent = "lifeboat-check/" + version
	rc.Timeout = 10 * time.Second
	return rc, nil
}
