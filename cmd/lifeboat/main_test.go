package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestRunUsage(t *testing.T) {
	tests := []struct {
		name      string
		args      []string
		wantUsage bool
		wantErr   string
		wantOut   string
	}{
		{"no command", nil, true, "no command given", ""},
		{"unknown command", []string{"drain-everything"}, true, `unknown command "drain-everything"`, ""},
		{"version", []string{"version"}, false, "", "lifeboat "},
		{"bad config reports every problem", []string{"run", "--workers", "0", "--log-format", "xml"}, true, "--queue-url is required", ""},
		{"replay without files", []string{"replay"}, true, "give one or more files", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			err := run(context.Background(), tt.args, func(string) string { return "" }, &stdout, &stderr)
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("run: %v", err)
				}
			} else {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("run error = %v, want %q", err, tt.wantErr)
				}
				var ue usageError
				if errors.As(err, &ue) != tt.wantUsage {
					t.Errorf("usage error = %v, want %v", errors.As(err, &ue), tt.wantUsage)
				}
			}
			if !strings.Contains(stdout.String(), tt.wantOut) {
				t.Errorf("stdout %q does not contain %q", stdout.String(), tt.wantOut)
			}
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
