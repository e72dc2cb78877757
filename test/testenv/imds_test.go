package testenv

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// imdsClient is a plain IMDSv2 client: PUT a token, GET with it.
type imdsClient struct {
	url   string
	token string
	http  *http.Client
}

func newIMDSClient(t *testing.T, url string) *imdsClient {
	t.Helper()
	c := &imdsClient{url: url, http: &http.Client{Timeout: 2 * time.Second}}
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPut, url+"/latest/api/token", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-aws-ec2-metadata-token-ttl-seconds", "300")
	resp, err := c.http.Do(req)
	if err != nil {
		t.Fatalf("PUT token: %v", err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || len(b) == 0 {
		t.Fatalf("PUT token: status %d, body %q", resp.StatusCode, b)
	}
	c.token = string(b)
	return c
}

// get returns the status and body of a metadata path; withToken false
// makes an IMDSv1 request.
func (c *imdsClient) get(t *testing.T, path string, withToken bool) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, c.url+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if withToken {
		req.Header.Set("X-aws-ec2-metadata-token", c.token)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, strings.TrimSpace(string(b))
}

// mustGet returns the body of a path that must answer 200.
func (c *imdsClient) mustGet(t *testing.T, path string) string {
	t.Helper()
	code, body := c.get(t, path, true)
	if code != http.StatusOK {
		t.Fatalf("GET %s: status %d, body %q", path, code, body)
	}
	return body
}

func (c *imdsClient) mustJSON(t *testing.T, path string, v any) {
	t.Helper()
	body := c.mustGet(t, path)
	if err := json.Unmarshal([]byte(body), v); err != nil {
		t.Fatalf("GET %s: decoding %q: %v", path, body, err)
	}
}

func (c *imdsClient) wantStatus(t *testing.T, path string, want int) {
	t.Helper()
	if code, body := c.get(t, path, true); code != want {
		t.Errorf("GET %s: status %d (body %.80q), want %d", path, code, body, want)
	}
}

const (
	pathSpot      = "/latest/meta-data/spot/instance-action"
	pathSpotTime  = "/latest/meta-data/spot/termination-time"
	pathRebalance = "/latest/meta-data/events/recommendations/rebalance"
	pathEvents    = "/latest/meta-data/events/maintenance/scheduled"
	pathTarget    = "/latest/meta-data/autoscaling/target-lifecycle-state"
	pathID        = "/latest/meta-data/instance-id"
	pathIdentity  = "/latest/dynamic/instance-identity/document"
)

func TestIMDSQuietWithStaticOverrides(t *testing.T) {
	t.Parallel()
	m := StartIMDS(t, IMDSOptions{
		InstanceID: "i-0123456789abcdef0", LocalHostname: "ip-10-1-2-3.ec2.internal",
		AZ: "eu-west-1b", Region: "eu-west-1", InstanceType: "m5.large",
	})
	c := newIMDSClient(t, m.URL)
	if got := c.mustGet(t, pathID); got != "i-0123456789abcdef0" {
		t.Errorf("instance-id = %q", got)
	}
	if got := c.mustGet(t, "/latest/meta-data/local-hostname"); got != "ip-10-1-2-3.ec2.internal" {
		t.Errorf("local-hostname = %q", got)
	}
	if got := c.mustGet(t, "/latest/meta-data/placement/availability-zone"); got != "eu-west-1b" {
		t.Errorf("availability-zone = %q", got)
	}
	var doc struct {
		InstanceID, AvailabilityZone, Region, InstanceType, AccountID string
	}
	c.mustJSON(t, pathIdentity, &doc)
	if doc.InstanceID != "i-0123456789abcdef0" || doc.AvailabilityZone != "eu-west-1b" || doc.Region != "eu-west-1" || doc.InstanceType != "m5.large" || doc.AccountID == "" {
		t.Errorf("identity document = %+v", doc)
	}
	c.wantStatus(t, pathSpot, http.StatusNotFound)
	c.wantStatus(t, pathRebalance, http.StatusNotFound)
	c.wantStatus(t, pathEvents, http.StatusNotFound)
	if got := c.mustGet(t, pathTarget); got != "InService" {
		t.Errorf("target-lifecycle-state = %q, want InService", got)
	}
	// IMDSv1 works unless IMDSv2Only.
	if code, _ := c.get(t, pathID, false); code != http.StatusOK {
		t.Errorf("IMDSv1 GET: status %d, want 200", code)
	}
}

func TestIMDSv2Only(t *testing.T) {
	t.Parallel()
	m := StartIMDS(t, IMDSOptions{Scenario: IMDSSpot, IMDSv2Only: true})
	c := newIMDSClient(t, m.URL)
	for _, p := range []string{pathID, pathSpot} {
		if code, _ := c.get(t, p, false); code != http.StatusUnauthorized {
			t.Errorf("IMDSv1 GET %s: status %d, want 401", p, code)
		}
		if code, _ := c.get(t, p, true); code != http.StatusOK {
			t.Errorf("IMDSv2 GET %s: status %d, want 200", p, code)
		}
	}
}

func TestIMDSSpot(t *testing.T) {
	t.Parallel()
	at := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	m := StartIMDS(t, IMDSOptions{Scenario: IMDSSpot})
	for _, action := range []string{"terminate", "stop", "hibernate"} {
		if err := m.Restart(t.Context(), IMDSOptions{Scenario: IMDSSpot, SpotAction: action, SpotTime: at}); err != nil {
			t.Fatal(err)
		}
		c := newIMDSClient(t, m.URL)
		var got struct{ Action, Time string }
		c.mustJSON(t, pathSpot, &got)
		if diff := cmp.Diff(struct{ Action, Time string }{action, "2030-01-02T03:04:05Z"}, got); diff != "" {
			t.Errorf("%s: instance-action (-want +got):\n%s", action, diff)
		}
		if tt := c.mustGet(t, pathSpotTime); tt != "2030-01-02T03:04:05Z" {
			t.Errorf("%s: termination-time = %q", action, tt)
		}
		c.wantStatus(t, pathRebalance, http.StatusNotFound)
		c.wantStatus(t, pathTarget, http.StatusNotFound)
	}

	// Default time: about two minutes after the request.
	if err := m.Restart(t.Context(), IMDSOptions{Scenario: IMDSSpot, Rebalance: true}); err != nil {
		t.Fatal(err)
	}
	c := newIMDSClient(t, m.URL)
	var got struct{ Action, Time string }
	c.mustJSON(t, pathSpot, &got)
	when, err := time.Parse(time.RFC3339, got.Time)
	if err != nil || got.Action != "terminate" {
		t.Fatalf("instance-action = %+v (%v)", got, err)
	}
	if d := time.Until(when); d < 100*time.Second || d > 121*time.Second {
		t.Errorf("default spot time is %v from now, want about 2 min", d)
	}
	var reb struct{ NoticeTime string }
	c.mustJSON(t, pathRebalance, &reb)
	if reb.NoticeTime == "" {
		t.Errorf("rebalance noticeTime empty")
	}
}

func TestIMDSSpotAfterDelay(t *testing.T) {
	t.Parallel()
	m := StartIMDS(t, IMDSOptions{Scenario: IMDSSpot, After: 2 * time.Second, Rebalance: true, RebalanceAfter: 0})
	start := time.Now()
	c := newIMDSClient(t, m.URL)
	c.wantStatus(t, pathSpot, http.StatusNotFound)
	c.mustGet(t, pathRebalance) // immediate
	for {
		code, _ := c.get(t, pathSpot, true)
		if code == http.StatusOK {
			break
		}
		if time.Since(start) > 5*time.Second {
			t.Fatalf("spot notice did not appear within 5 s (After 2 s)")
		}
		time.Sleep(100 * time.Millisecond)
	}
	if d := time.Since(start); d < time.Second {
		t.Errorf("spot notice appeared after %v, want about 2 s", d)
	}
}

func TestIMDSRebalanceOnly(t *testing.T) {
	t.Parallel()
	notice := time.Date(2030, 5, 6, 7, 8, 9, 0, time.UTC)
	m := StartIMDS(t, IMDSOptions{Scenario: IMDSRebalance, RebalanceNoticeTime: notice})
	c := newIMDSClient(t, m.URL)
	var reb struct{ NoticeTime string }
	c.mustJSON(t, pathRebalance, &reb)
	if reb.NoticeTime != "2030-05-06T07:08:09Z" {
		t.Errorf("noticeTime = %q", reb.NoticeTime)
	}
	c.wantStatus(t, pathSpot, http.StatusNotFound)
}

func TestIMDSScheduledEvents(t *testing.T) {
	t.Parallel()
	before := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	after := before.Add(24 * time.Hour)
	deadline := before.Add(48 * time.Hour)
	m := StartIMDS(t, IMDSOptions{Scenario: IMDSQuiet})
	type event struct {
		Code, Description, State, EventID, NotBefore, NotAfter, NotBeforeDeadline string
	}
	for _, tc := range []struct {
		name string
		opts IMDSOptions
		want event
	}{
		{
			name: "system-reboot active",
			opts: IMDSOptions{Scenario: IMDSEvents, EventCode: "system-reboot", EventState: "active",
				EventNotBefore: before, EventNotAfter: after, EventNotBeforeDeadline: deadline},
			want: event{Code: "system-reboot", Description: "The instance is scheduled for system-reboot", State: "active",
				EventID: "instance-event-1234567890abcdef0", NotBefore: "1 Jan 2030 00:00:00 GMT",
				NotAfter: "2 Jan 2030 00:00:00 GMT", NotBeforeDeadline: "3 Jan 2030 00:00:00 GMT"},
		},
		{
			name: "canceled with own id",
			opts: IMDSOptions{Scenario: IMDSEvents, EventState: "canceled", EventID: "instance-event-0aaaaaaaaaaaaaaaa",
				EventNotBefore: before, EventNotAfter: after, EventNotBeforeDeadline: deadline},
			want: event{Code: "system-reboot", Description: "The instance is scheduled for system-reboot", State: "canceled",
				EventID: "instance-event-0aaaaaaaaaaaaaaaa", NotBefore: "1 Jan 2030 00:00:00 GMT",
				NotAfter: "2 Jan 2030 00:00:00 GMT", NotBeforeDeadline: "3 Jan 2030 00:00:00 GMT"},
		},
		{
			name: "instance-stop completed",
			opts: IMDSOptions{Scenario: IMDSEvents, EventCode: "instance-stop", EventState: "completed",
				EventNotBefore: before, EventNotAfter: after, EventNotBeforeDeadline: deadline},
			want: event{Code: "instance-stop", Description: "The instance is scheduled for instance-stop", State: "completed",
				EventID: "instance-event-1234567890abcdef0", NotBefore: "1 Jan 2030 00:00:00 GMT",
				NotAfter: "2 Jan 2030 00:00:00 GMT", NotBeforeDeadline: "3 Jan 2030 00:00:00 GMT"},
		},
	} {
		if err := m.Restart(t.Context(), tc.opts); err != nil {
			t.Fatal(err)
		}
		c := newIMDSClient(t, m.URL)
		var got []event
		c.mustJSON(t, pathEvents, &got)
		if diff := cmp.Diff([]event{tc.want}, got); diff != "" {
			t.Errorf("%s: scheduled events (-want +got):\n%s", tc.name, diff)
		}
		c.wantStatus(t, pathSpot, http.StatusNotFound)
	}
}

func TestIMDSASGLifecycle(t *testing.T) {
	t.Parallel()
	m := StartIMDS(t, IMDSOptions{Scenario: IMDSASGLifecycle, After: 2 * time.Second})
	start := time.Now()
	c := newIMDSClient(t, m.URL)
	if got := c.mustGet(t, pathTarget); got != "InService" {
		t.Errorf("target-lifecycle-state right after start = %q, want InService", got)
	}
	for c.mustGet(t, pathTarget) != "Terminated" {
		if time.Since(start) > 5*time.Second {
			t.Fatal("target-lifecycle-state did not become Terminated within 5 s (After 2 s)")
		}
		time.Sleep(100 * time.Millisecond)
	}
	c.wantStatus(t, pathSpot, http.StatusNotFound)

	// An absolute trigger time in the past: Terminated at once.
	if err := m.Restart(t.Context(), IMDSOptions{Scenario: IMDSASGLifecycle, At: time.Now().Add(-time.Minute)}); err != nil {
		t.Fatal(err)
	}
	if got := newIMDSClient(t, m.URL).mustGet(t, pathTarget); got != "Terminated" {
		t.Errorf("target-lifecycle-state with a past trigger = %q, want Terminated", got)
	}
	// ... and in the future: InService.
	if err := m.Restart(t.Context(), IMDSOptions{Scenario: IMDSASGLifecycle, At: time.Now().Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	if got := newIMDSClient(t, m.URL).mustGet(t, pathTarget); got != "InService" {
		t.Errorf("target-lifecycle-state with a future trigger = %q, want InService", got)
	}
}

func TestIMDSRestartKeepsPort(t *testing.T) {
	t.Parallel()
	m := StartIMDS(t, IMDSOptions{})
	url := m.URL
	start := time.Now()
	if err := m.Restart(context.Background(), IMDSOptions{Scenario: IMDSSpot}); err != nil {
		t.Fatal(err)
	}
	t.Logf("restart took %v", time.Since(start))
	if m.URL != url {
		t.Errorf("URL changed from %s to %s", url, m.URL)
	}
	newIMDSClient(t, m.URL).mustGet(t, pathSpot)
}
