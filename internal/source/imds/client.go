package imds

import (
	"errors"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsimds "github.com/aws/aws-sdk-go-v2/feature/ec2/imds"
	"github.com/aws/smithy-go"
)

// NewClient returns the SDK's instance metadata client: IMDSv2 session
// tokens (fetched, cached until they expire, renewed after a 401), a 5 s
// timeout per operation, a 250 ms dial and 500 ms response-header timeout,
// and the SDK's standard retries (3 attempts, backoff at most 1 s).
//
// endpoint "" means the SDK default (AWS_EC2_METADATA_SERVICE_ENDPOINT, else
// http://169.254.169.254). allowV1 lets the client fall back to IMDSv1
// requests when no token can be obtained (the SDK's EnableFallback); without
// it a token failure is an error. AWS_EC2_METADATA_DISABLED is ignored: in
// IMDS mode the metadata service is the whole point.
func NewClient(endpoint string, allowV1 bool) *awsimds.Client {
	fallback := aws.FalseTernary
	if allowV1 {
		fallback = aws.TrueTernary
	}
	return awsimds.New(awsimds.Options{
		Endpoint:          endpoint,
		ClientEnableState: awsimds.ClientEnabled,
		EnableFallback:    fallback,
	})
}

// tokenFailed reports whether err is the failure to get an IMDSv2 token
// (the SDK's internal getToken operation) rather than the answer to the
// metadata request itself: a 404 from the token endpoint must not read as
// "nothing announced". The SDK wraps the token error in a type without
// Unwrap, so its message is checked too.
func tokenFailed(err error) bool {
	if err != nil && strings.Contains(err.Error(), "failed to get API token") {
		return true
	}
	for err != nil {
		var op *smithy.OperationError
		if !errors.As(err, &op) {
			return false
		}
		if op.OperationName == "getToken" {
			return true
		}
		err = op.Err
	}
	return false
}
