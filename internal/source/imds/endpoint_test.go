package imds

import (
	"context"
	"errors"
	"strings"
	"syscall"
	"testing"
)

// errCaptured stops a dial once the socket is about to connect.
var errCaptured = errors.New("captured")

// TestClientDialsTheEndpointsPort: the client dials the endpoint's port,
// or its scheme's default one when the URL has none, as net/http (and so
// the SDK's client) does. The default endpoint has no port: issue 22,
// defect 1 ("missing port in address" on every poll). The dial is stopped
// before it connects (net.Dialer's ControlContext sees the address), so
// nothing needs to listen.
func TestClientDialsTheEndpointsPort(t *testing.T) {
	tests := []struct {
		endpoint string
		want     string
	}{
		{"http://169.254.169.254", "169.254.169.254:80"},
		{"http://169.254.169.254/", "169.254.169.254:80"},
		{"http://169.254.169.254:1338", "169.254.169.254:1338"},
		{"http://[fd00:ec2::254]", "[fd00:ec2::254]:80"},
		{"http://[fd00:ec2::254]:8080", "[fd00:ec2::254]:8080"},
		{"http://127.0.0.1:0", "127.0.0.1:0"},
		{"https://127.0.0.1", "127.0.0.1:443"},
	}
	for _, tt := range tests {
		t.Run(tt.endpoint, func(t *testing.T) {
			c := NewClient(tt.endpoint, false)
			var dialed []string
			c.dialer.ControlContext = func(_ context.Context, _, address string, _ syscall.RawConn) error {
				dialed = append(dialed, address)
				return errCaptured
			}
			_, err := c.Get(t.Context(), PathInstanceID)
			if !errors.Is(err, errCaptured) {
				t.Fatalf("Get = %v, want the dial to %s (captured)", err, tt.want)
			}
			for _, a := range dialed {
				if a != tt.want {
					t.Errorf("dialed %s, want %s", a, tt.want)
				}
			}
		})
	}
}

// TestResolveEndpoint: --imds-endpoint, else AWS_EC2_METADATA_SERVICE_ENDPOINT,
// else the address of AWS_EC2_METADATA_SERVICE_ENDPOINT_MODE (the SDK's
// order; TestSDKEndpointResolution holds it against the SDK).
func TestResolveEndpoint(t *testing.T) {
	tests := []struct {
		name      string
		flag      string
		env       map[string]string
		want      string
		wantError string
	}{
		{name: "nothing set: IPv4", want: "http://169.254.169.254"},
		{name: "mode IPv4", env: map[string]string{EnvEndpointMode: "IPv4"}, want: "http://169.254.169.254"},
		{name: "mode ipv6, blanks", env: map[string]string{EnvEndpointMode: " ipv6 "}, want: "http://[fd00:ec2::254]"},
		{name: "endpoint wins over mode", env: map[string]string{EnvEndpointMode: "IPv6", EnvEndpoint: "http://[::1]:1338"}, want: "http://[::1]:1338"},
		{name: "flag wins", flag: "http://127.0.0.1:1338", env: map[string]string{EnvEndpoint: "http://[::1]:1338"}, want: "http://127.0.0.1:1338"},
		{name: "unknown mode", env: map[string]string{EnvEndpointMode: "dual"}, wantError: "must be IPv4 or IPv6"},
		{name: "unknown mode with a flag", flag: "http://127.0.0.1:1338", env: map[string]string{EnvEndpointMode: "dual"}, wantError: "must be IPv4 or IPv6"},
		{name: "not http", env: map[string]string{EnvEndpoint: "169.254.169.254"}, wantError: EnvEndpoint},
		{name: "no host", flag: "http://", wantError: "has no host"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ResolveEndpoint(tt.flag, func(k string) string { return tt.env[k] })
			switch {
			case tt.wantError != "" && (err == nil || !strings.Contains(err.Error(), tt.wantError)):
				t.Fatalf("ResolveEndpoint = %q, %v; want an error containing %q", got, err, tt.wantError)
			case tt.wantError == "" && (err != nil || got != tt.want):
				t.Fatalf("ResolveEndpoint = %q, %v; want %q", got, err, tt.want)
			}
		})
	}
}
