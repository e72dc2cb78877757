package imds

import (
	"crypto/tls"
	"fmt"
	"net"
	"net/url"
	"strings"
)

// Where the metadata service is, as aws-sdk-go-v2 resolves it
// (feature/ec2/imds and config's environment): --imds-endpoint, else
// AWS_EC2_METADATA_SERVICE_ENDPOINT, else the address of
// AWS_EC2_METADATA_SERVICE_ENDPOINT_MODE (IPv4, the default, or IPv6).
// The shared config file's ec2_metadata_service_endpoint(_mode) are not
// read: a DaemonSet pod has none.
const (
	EnvEndpoint         = "AWS_EC2_METADATA_SERVICE_ENDPOINT"
	EnvEndpointMode     = "AWS_EC2_METADATA_SERVICE_ENDPOINT_MODE"
	DefaultIPv4Endpoint = "http://169.254.169.254"
	DefaultIPv6Endpoint = "http://[fd00:ec2::254]"
)

// ResolveEndpoint returns the metadata service's URL: flag (the value of
// --imds-endpoint) if set, else the environment's endpoint, else the
// default address of the environment's endpoint mode. An endpoint mode
// other than IPv4 or IPv6 (any case, blanks trimmed) is an error even when
// an endpoint is set, as it is for the SDK's configuration; so is an
// endpoint that is not an http or https URL with a host.
func ResolveEndpoint(flag string, getenv func(string) string) (string, error) {
	var endpoint string
	switch mode := strings.TrimSpace(getenv(EnvEndpointMode)); {
	case mode == "" || strings.EqualFold(mode, "IPv4"):
		endpoint = DefaultIPv4Endpoint
	case strings.EqualFold(mode, "IPv6"):
		endpoint = DefaultIPv6Endpoint
	default:
		return "", fmt.Errorf("%s=%q: must be IPv4 or IPv6", EnvEndpointMode, mode)
	}
	source := "the default for " + EnvEndpointMode
	if v := getenv(EnvEndpoint); v != "" {
		endpoint, source = v, EnvEndpoint
	}
	if flag != "" {
		endpoint, source = flag, "--imds-endpoint"
	}
	if _, err := parseEndpoint(endpoint); err != nil {
		return "", fmt.Errorf("%s: %w", source, err)
	}
	return endpoint, nil
}

// target is where requests to an endpoint go.
type target struct {
	scheme, host string // of the request URLs
	addr         string // host:port dialed
	tls          *tls.Config
}

// parseEndpoint splits an endpoint URL. Only its scheme and host count:
// like the SDK's client, which replaces the endpoint's path with the
// metadata path, lifeboat reads /latest/... whatever path it has. Without
// a port it dials the scheme's (80, 443), as net/http does.
func parseEndpoint(endpoint string) (target, error) {
	u, err := url.Parse(endpoint)
	if err != nil {
		return target{}, fmt.Errorf("%q is not a URL: %w", endpoint, err)
	}
	var t target
	switch u.Scheme {
	case "http":
	case "https":
		t.tls = &tls.Config{ServerName: u.Hostname(), MinVersion: tls.VersionTLS12}
	default:
		return target{}, fmt.Errorf("%q: want an http:// or https:// URL", endpoint)
	}
	if u.Hostname() == "" {
		return target{}, fmt.Errorf("%q has no host", endpoint)
	}
	port := u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[u.Scheme]
	}
	t.scheme, t.host, t.addr = u.Scheme, u.Host, net.JoinHostPort(u.Hostname(), port)
	return t, nil
}
