//go:build !imdsonly

package main

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials/ec2rolecreds"
	awsimds "github.com/aws/aws-sdk-go-v2/feature/ec2/imds"
	"github.com/aws/aws-sdk-go-v2/service/autoscaling"

	"lifeboat.dev/lifeboat/internal/asg"
	"lifeboat.dev/lifeboat/internal/config"
	"lifeboat.dev/lifeboat/internal/controller"
	"lifeboat.dev/lifeboat/internal/imdsflow"
)

// buildRefuses: this build has everything.
func buildRefuses(config.Config) error { return nil }

// imdsLifecycle wires --imds-complete-lifecycle: an Auto Scaling client
// with the SDK's default credentials (the instance role), which finds the
// node's terminate hooks and heartbeats and completes its action.
func (a *app) imdsLifecycle(ctx context.Context, deps *controller.Deps, o *imdsflow.Options) error {
	if !a.cfg.IMDSCompleteLifecycle {
		return nil
	}
	// On a node the region and the role's credentials come from the
	// metadata service lifeboat already reads (--imds-endpoint), unless the
	// environment or --region gives them.
	fallback := aws.FalseTernary
	if a.cfg.IMDSAllowV1 {
		fallback = aws.TrueTernary
	}
	// The SDK's own metadata client: its credential and region providers
	// take no other (lifeboat's Client only reads the event paths).
	md := awsimds.New(awsimds.Options{Endpoint: a.cfg.IMDSEndpoint, ClientEnableState: awsimds.ClientEnabled, EnableFallback: fallback})
	awsCfg, err := awsconfig.LoadDefaultConfig(ctx, awsClientDefaults,
		awsconfig.WithEC2IMDSRegion(func(o *awsconfig.UseEC2IMDSRegion) { o.Client = md }),
		awsconfig.WithEC2RoleCredentialOptions(func(o *ec2rolecreds.Options) { o.Client = md }),
		func(lo *awsconfig.LoadOptions) error {
			if a.cfg.Region != "" {
				lo.Region = a.cfg.Region
			}
			return nil
		})
	if err != nil {
		return fmt.Errorf("loading AWS configuration for --imds-complete-lifecycle: %w", err)
	}
	api := autoscaling.NewFromConfig(awsCfg, func(ao *autoscaling.Options) { setEndpoint(&ao.BaseEndpoint, a.cfg.Endpoints["autoscaling"]) })
	client := asg.New(api, a.clock, a.log, asg.Options{DryRun: a.cfg.DryRun})
	deps.ASG = client
	o.Lifecycle = client.TerminateActions
	o.LifecycleTimeoutResult = a.cfg.LifecycleTimeoutResult
	return nil
}
