//go:build !imdsonly

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"lifeboat.dev/lifeboat/internal/check"
	"lifeboat.dev/lifeboat/internal/config"
	imdssrc "lifeboat.dev/lifeboat/internal/source/imds"
)

const checkTestInstance = "i-0123456789abcdef0"

// TestCheckReadsMetadataAsRunDoes: `lifeboat check` reads the metadata
// service where `lifeboat run` does and through the same client, so it
// says OK exactly when run's first read (the instance ID) succeeds, and
// otherwise reports run's error (issue 22: check said the default
// endpoint was fine through net/http while run's client failed "missing
// port in address" on every poll; it ignored the environment's endpoint).
func TestCheckReadsMetadataAsRunDoes(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.Method == http.MethodPut && r.URL.Path == "/latest/api/token":
			w.Header().Set("X-aws-ec2-metadata-token-ttl-seconds", r.Header.Get("X-aws-ec2-metadata-token-ttl-seconds"))
			_, _ = w.Write([]byte("tok"))
		case r.URL.Path == "/latest/meta-data/instance-id" && r.Header.Get("X-aws-ec2-metadata-token") == "tok":
			_, _ = w.Write([]byte(checkTestInstance))
		default:
			http.Error(w, "no", http.StatusUnauthorized)
		}
	}))
	defer srv.Close()
	tests := []struct {
		name   string
		flag   string
		env    map[string]string
		wantOK bool
	}{
		{"the environment's endpoint", "", map[string]string{imdssrc.EnvEndpoint: srv.URL}, true},
		{"--imds-endpoint", srv.URL, nil, true},
		// Nothing listens on 127.0.0.1:80 on a test machine: both fail,
		// and check says how run fails.
		{"an endpoint without a port", "http://127.0.0.1", nil, false},
		{"IPv6 mode", "", map[string]string{imdssrc.EnvEndpointMode: "IPv6"}, false},
		{"an unknown mode", "", map[string]string{imdssrc.EnvEndpointMode: "dual-stack"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for k, v := range tt.env {
				t.Setenv(k, v) // what the SDK's clients read
			}
			getenv := func(k string) string { return tt.env[k] }
			args := []string{"--mode", "imds", "--node-name", "n"}
			if tt.flag != "" {
				args = append(args, "--imds-endpoint", tt.flag)
			}
			runErr := runReads(t.Context(), t, args, getenv)

			var out bytes.Buffer
			err := checkCommand(t.Context(), append([]string{"--output", "json", "--timeout", "30s"}, args...), getenv, &out, io.Discard)
			if _, failed := err.(errChecksFailed); err != nil && !failed {
				t.Fatalf("check: %v", err)
			}
			var report check.Report
			if err := json.Unmarshal(out.Bytes(), &report); err != nil {
				t.Fatalf("check's JSON: %v\n%s", err, out.String())
			}
			var res *check.Result
			for i := range report.Results {
				if report.Results[i].Name == "imds" {
					res = &report.Results[i]
				}
			}
			if res == nil {
				t.Fatalf("no imds result in %s", out.String())
			}
			if (runErr == nil) != tt.wantOK {
				t.Fatalf("run's read: %v; want success %v", runErr, tt.wantOK)
			}
			switch {
			case runErr == nil && (res.Status != check.OK || !strings.Contains(res.Found, checkTestInstance)):
				t.Errorf("run reads the instance ID, check says %s %q", res.Status, res.Found)
			case runErr != nil && (res.Status != check.Fail || !strings.Contains(res.Found, runErr.Error())):
				t.Errorf("run fails with %q, check says %s %q", runErr, res.Status, res.Found)
			}
		})
	}
}

// runReads is what `lifeboat run` does first in IMDS mode: resolve the
// endpoint (refused at start if it cannot be), make the client and read
// the instance ID.
func runReads(ctx context.Context, t *testing.T, args []string, getenv func(string) string) error {
	t.Helper()
	cfg, err := config.NewFlags("run").Load(args, getenv)
	if err != nil {
		t.Fatal(err)
	}
	if cfg, err = resolveIMDSEndpoint(cfg, getenv); err != nil {
		return err
	}
	_, err = imdssrc.NewClient(cfg.IMDSEndpoint, cfg.IMDSAllowV1).Get(ctx, imdssrc.PathInstanceID)
	return err
}
