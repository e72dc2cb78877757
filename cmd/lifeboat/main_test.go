package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// Every CLI path answers (issue 15): help exits 0 and lists the flags with
// their environment variables and defaults; a wrong command line exits 2
// with one line that says what is wrong and where help is.
func TestCLI(t *testing.T) {
	oneLine := func(hint string) func(t *testing.T, stdout, stderr string) {
		return func(t *testing.T, stdout, stderr string) {
			if strings.Count(stderr, "\n") != 1 || !strings.HasPrefix(stderr, "lifeboat: ") || !strings.Contains(stderr, "(see '"+hint+"')") {
				t.Errorf("stderr %q: want one line starting with 'lifeboat: ' and naming %q", stderr, hint)
			}
			if stdout != "" {
				t.Errorf("stdout %q, want nothing", stdout)
			}
		}
	}
	lists := func(want ...string) func(t *testing.T, stdout, stderr string) {
		return func(t *testing.T, stdout, stderr string) {
			for _, w := range want {
				if !strings.Contains(stdout, w) {
					t.Errorf("stdout lacks %q:\n%s", w, stdout)
				}
			}
			if stderr != "" {
				t.Errorf("stderr %q, want nothing", stderr)
			}
		}
	}
	runFlags := []string{
		"--queue-url string\n", "environment: LIFEBOAT_QUEUE_URL; default: none; modes: queue",
		"--visibility-timeout duration\n", "environment: LIFEBOAT_VISIBILITY_TIMEOUT; default: 30s; modes: queue",
		"--node-name string\n", "environment: LIFEBOAT_NODE_NAME; default: none; modes: imds",
		"--dry-run\n", "environment: LIFEBOAT_DRY_RUN; default: false; modes: queue, imds",
	}
	tests := []struct {
		name  string
		args  []string
		code  int
		check func(t *testing.T, stdout, stderr string)
	}{
		{"--help", []string{"--help"}, 0, lists("usage: lifeboat <command>", "run ", "check ", "replay ", "version ", "lifeboat <command> --help")},
		{"-h", []string{"-h"}, 0, lists("usage: lifeboat <command>")},
		{"help", []string{"help"}, 0, lists("usage: lifeboat <command>")},
		{"run --help", []string{"run", "--help"}, 0, lists(append([]string{"usage: lifeboat run [flags]"}, runFlags...)...)},
		{"run -h", []string{"run", "-h"}, 0, lists("usage: lifeboat run [flags]")},
		{"help run", []string{"help", "run"}, 0, lists("usage: lifeboat run [flags]")},
		{"check --help", []string{"check", "--help"}, 0, lists(append([]string{"usage: lifeboat check",
			"--output string\n", "environment: none; default: table", "--timeout duration\n", "environment: none; default: 1m0s"}, runFlags...)...)},
		{"check --help after run flags", []string{"check", "--queue-url", "http://q", "--help"}, 0, lists("usage: lifeboat check")},
		{"replay --help", []string{"replay", "--help"}, 0, lists("usage: lifeboat replay FILE|DIR...")},
		{"version", []string{"version"}, 0, lists("lifeboat ")},
		{"unknown command", []string{"drain-everything"}, 2, oneLine("lifeboat --help")},
		{"flag before the command", []string{"--queue-url", "x"}, 2, oneLine("lifeboat --help")},
		{"run: unknown flag", []string{"run", "--no-such-flag"}, 2, func(t *testing.T, stdout, stderr string) {
			oneLine("lifeboat run --help")(t, stdout, stderr)
			if want := "lifeboat: unknown flag --no-such-flag (see 'lifeboat run --help')\n"; stderr != want {
				t.Errorf("stderr %q, want %q", stderr, want)
			}
		}},
		{"run: flag without its value", []string{"run", "--workers"}, 2, oneLine("lifeboat run --help")},
		{"run: stray argument", []string{"run", "queue"}, 2, oneLine("lifeboat run --help")},
		{"check: unknown flag", []string{"check", "--no-such-flag"}, 2, oneLine("lifeboat check --help")},
		{"check: bad output", []string{"check", "--output", "yaml"}, 2, oneLine("lifeboat check --help")},
		{"replay: unknown flag", []string{"replay", "--no-such-flag"}, 2, oneLine("lifeboat replay --help")},
		{"replay without files", []string{"replay"}, 2, oneLine("lifeboat replay --help")},
		{"status in --help", []string{"--help"}, 0, lists("status ")},
		{"status --help", []string{"status", "--help"}, 0, lists("usage: lifeboat status", "kubectl lifeboat status", "Exit status:",
			"--kubeconfig string", "-o, --output string", "-l, --selector string", "--no-headers", "-w, --watch")},
		{"status -h", []string{"status", "-h"}, 0, lists("usage: lifeboat status")},
		{"status: bad output", []string{"status", "-o", "jsonpath"}, 2, oneLine("lifeboat status --help")},
		{"status: unknown flag", []string{"status", "--no-such-flag"}, 2, oneLine("lifeboat status --help")},
		{"status: names and a selector", []string{"status", "a", "-l", "x=y"}, 2, oneLine("lifeboat status --help")},
		{"status: bad interval", []string{"status", "-w", "--interval", "0s"}, 2, oneLine("lifeboat status --help")},
		{"no command", nil, 2, func(t *testing.T, stdout, stderr string) {
			if !strings.Contains(stderr, "usage: lifeboat <command>") || !strings.HasSuffix(stderr, "lifeboat: no command given (see 'lifeboat --help')\n") {
				t.Errorf("stderr %q", stderr)
			}
		}},
		{"bad configuration reports every problem", []string{"run", "--workers", "0", "--log-format", "xml"}, 2, func(t *testing.T, stdout, stderr string) {
			for _, w := range []string{"--queue-url is required", "--workers 0", "--log-format \"xml\"", "(see 'lifeboat run --help')"} {
				if !strings.Contains(stderr, w) {
					t.Errorf("stderr lacks %q:\n%s", w, stderr)
				}
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := execute(t.Context(), tt.args, func(string) string { return "" }, &stdout, &stderr)
			if code != tt.code {
				t.Errorf("exit code %d, want %d; stderr:\n%s", code, tt.code, stderr.String())
			}
			tt.check(t, stdout.String(), stderr.String())
		})
	}
}

func TestReplay(t *testing.T) {
	dir := t.TempDir()
	files := map[string]string{
		"spot.json": `{"version":"0","id":"1e5527d7-bb36-4607-3370-4164db56a40e","detail-type":"EC2 Spot Instance Interruption Warning",
			"source":"aws.ec2","account":"123456789012","time":"2017-09-18T08:20:00Z","region":"us-east-2",
			"resources":["arn:aws:ec2:us-east-2:123456789012:instance/i-1234567890abcdef0"],
			"detail":{"instance-id":"i-1234567890abcdef0","instance-action":"terminate"}}`,
		"test-notification.json": `{"AccountId":"123456789012","RequestId":"r","AutoScalingGroupARN":"arn","AutoScalingGroupName":"g",
			"Service":"AWS Auto Scaling","Event":"autoscaling:TEST_NOTIFICATION","Time":"2019-09-27T02:39:14.183Z"}`,
		"garbage.json": `{not json`,
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var out bytes.Buffer
	if err := run(context.Background(), []string{"replay", dir}, func(string) string { return "" }, &out, &out); err != nil {
		t.Fatal(err)
	}
	type line struct {
		File     string `json:"file"`
		Accepted bool   `json:"accepted"`
		Reason   string `json:"reason"`
		Events   []struct {
			Kind       string `json:"kind"`
			InstanceID string `json:"instanceID"`
			Deadline   string `json:"deadline"`
		} `json:"events"`
		Plan *struct {
			Cordon, Drain bool
			Taints        []string
		} `json:"plan"`
	}
	var got []line
	sc := bufio.NewScanner(&out)
	for sc.Scan() {
		var l line
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatalf("output line %q is not JSON: %v", sc.Text(), err)
		}
		l.File = filepath.Base(l.File)
		got = append(got, l)
	}
	if len(got) != 3 {
		t.Fatalf("got %d lines, want 3:\n%s", len(got), out.String())
	}
	if got[0].File != "garbage.json" || got[0].Accepted || got[0].Reason != "invalid-json" {
		t.Errorf("garbage: %+v", got[0])
	}
	if got[1].File != "spot.json" || !got[1].Accepted || len(got[1].Events) != 1 || got[1].Plan == nil {
		t.Fatalf("spot: %+v", got[1])
	}
	if d := cmp.Diff("2017-09-18T08:22:00Z", got[1].Events[0].Deadline); d != "" {
		t.Errorf("spot deadline (-want +got): %s", d)
	}
	if !got[1].Plan.Cordon || !got[1].Plan.Drain || len(got[1].Plan.Taints) != 1 {
		t.Errorf("spot plan: %+v", got[1].Plan)
	}
	if got[2].Accepted || got[2].Reason != "test-notification" {
		t.Errorf("test notification: %+v", got[2])
	}
}
