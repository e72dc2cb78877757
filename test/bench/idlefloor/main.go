// Command idlefloor is the floor of BenchmarkIMDSIdleStandIn: the least a
// Go process does to read the Spot notice once a second from the instance
// metadata service over IMDSv2. One session token, then a GET of
// spot/instance-action each interval with net/http's client (keep-alive,
// a timeout per request: 5 s by default, as any poller needs; 0 for none),
// the answer discarded.
// No Kubernetes watch, no probes server, no parsing: what is left of an
// idle IMDS-mode process's CPU when everything lifeboat adds is taken away.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"
)

func main() {
	endpoint := flag.String("endpoint", "http://169.254.169.254", "the metadata service")
	interval := flag.Duration("interval", time.Second, "time between two reads")
	timeout := flag.Duration("timeout", 5*time.Second, "net/http's Client.Timeout for each read; 0: none")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, &http.Client{Timeout: *timeout}, strings.TrimSuffix(*endpoint, "/"), *interval); err != nil {
		fmt.Fprintln(os.Stderr, "idlefloor:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, client *http.Client, endpoint string, interval time.Duration) error {
	token, err := sessionToken(ctx, client, endpoint)
	if err != nil {
		return err
	}
	fmt.Println("polling") // the benchmark waits for this line
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, endpoint+"/latest/meta-data/spot/instance-action", nil)
		if err != nil {
			return err
		}
		req.Header.Set("X-aws-ec2-metadata-token", token)
		resp, err := client.Do(req)
		if err != nil {
			fmt.Fprintln(os.Stderr, "idlefloor:", err)
			continue
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
	}
}

// sessionToken asks for an IMDSv2 token valid for 6 h (longer than any run).
func sessionToken(ctx context.Context, client *http.Client, endpoint string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, endpoint+"/latest/api/token", nil)
	if err != nil {
		return "", err
	}
	req.Header.Set("X-aws-ec2-metadata-token-ttl-seconds", "21600")
	resp, err := client.Do(req)
	if err != nil {
		return "", fmt.Errorf("session token: %w", err)
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("session token: HTTP %d %v", resp.StatusCode, err)
	}
	return string(body), nil
}
