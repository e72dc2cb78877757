package main

import (
	"lifeboat.dev/lifeboat/internal/config"
	imdssrc "lifeboat.dev/lifeboat/internal/source/imds"
)

// resolveIMDSEndpoint sets cfg.IMDSEndpoint, in IMDS mode, to where run
// and check read instance metadata: --imds-endpoint, else the SDK's
// environment (AWS_EC2_METADATA_SERVICE_ENDPOINT, then
// AWS_EC2_METADATA_SERVICE_ENDPOINT_MODE), else http://169.254.169.254.
// Everything that reads the metadata service (lifeboat's client, and the
// SDK's for --imds-complete-lifecycle's credentials and region) then
// reads the same address.
func resolveIMDSEndpoint(cfg config.Config, getenv func(string) string) (config.Config, error) {
	if cfg.Mode != config.ModeIMDS {
		return cfg, nil
	}
	endpoint, err := imdssrc.ResolveEndpoint(cfg.IMDSEndpoint, getenv)
	if err != nil {
		return cfg, err
	}
	cfg.IMDSEndpoint = endpoint
	return cfg, nil
}
