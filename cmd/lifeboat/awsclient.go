//go:build !imdsonly

package main

import (
	"context"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"

	"lifeboat.dev/lifeboat/internal/config"
)

// AWS client policy (docs/reliability.md).
const (
	// awsMaxAttempts is the number of attempts the SDK's standard retryer
	// makes per call (its default is 3). lifeboat makes few AWS calls and
	// each one matters: a lost heartbeat or completion costs a node's grace
	// period. With 5 attempts a call fails only if five attempts in a row
	// fail (0.24 % of calls at a 30 % fault rate, against 2.7 % with 3);
	// the backoff between attempts (exponential with jitter, at most 20 s)
	// and the retry token bucket, which stops retries during a sustained
	// outage, stay the SDK's.
	awsMaxAttempts = 5
	// awsAttemptTimeout bounds one HTTP attempt. The SDK's default client
	// has none, so an endpoint that accepts a request and never answers
	// would hang lifeboat's call forever. It must exceed SQS's 20 s long
	// poll; a timed-out attempt is retried like any other.
	awsAttemptTimeout = 45 * time.Second
)

// awsClientDefaults sets the retry and timeout policy of every AWS client.
func awsClientDefaults(o *awsconfig.LoadOptions) error {
	o.RetryMaxAttempts = awsMaxAttempts
	o.HTTPClient = awshttp.NewBuildableClient().WithTimeout(awsAttemptTimeout)
	return nil
}

// loadAWS loads the AWS configuration of queue mode's clients: the SDK's
// default chain, awsClientDefaults and --region, then extra. `lifeboat
// check` loads it here too, so that it reaches AWS as `run` does (issue
// 22: it had its own loader, without the attempt timeout).
func loadAWS(ctx context.Context, cfg config.Config, extra ...func(*awsconfig.LoadOptions) error) (aws.Config, error) {
	opts := append([]func(*awsconfig.LoadOptions) error{awsClientDefaults, func(o *awsconfig.LoadOptions) error {
		if cfg.Region != "" {
			o.Region = cfg.Region
		}
		return nil
	}}, extra...)
	awsCfg, err := awsconfig.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return aws.Config{}, fmt.Errorf("loading AWS configuration: %w", err)
	}
	return awsCfg, nil
}
