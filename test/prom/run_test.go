package prom

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	promv1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/model"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"lifeboat.dev/lifeboat/internal/route"
	"lifeboat.dev/lifeboat/test/awssim"
	"lifeboat.dev/lifeboat/test/testenv"
)

// The scrape jobs of the run: the main pair (queue mode, leader election,
// the scenario's lifeboat), one queue-mode replica that never leads (a
// foreign holder keeps its Lease), and one IMDS-mode lifeboat (no
// election: its lifeboat_leader stays 0).
const (
	jobMain       = "lifeboat"
	jobLeaderless = "lifeboat-leaderless"
	jobIMDS       = "lifeboat-imds"
)

// alertWants are the alerts the run makes fire, with labels the firing
// alert has. Every alert of the chart's rule file is here or in
// alertsNotExercised.
var alertWants = map[string]map[string]string{
	"LifeboatNoLeader":              {"job": jobLeaderless},
	"LifeboatQueueSourceFailing":    {"job": jobMain},
	"LifeboatDrainDeadlinePassed":   {"job": jobMain},
	"LifeboatDrainForecastMiss":     {"job": jobMain},
	"LifeboatSpotDrainSlow":         {},
	"LifeboatLifecycleCallsFailing": {"job": jobMain, "call": "heartbeat"},
	"LifeboatLaunchActionLost":      {"job": jobMain},
	"LifeboatWebhookFailing":        {"job": jobMain, "result": "failed"},
	"LifeboatPodsCutOff":            {"job": jobMain},
	"LifeboatGhostNode":             {"job": jobMain},
}

// alertsNotExercised are the alerts the run cannot make fire, and why.
// Empty: the run makes every alert fire.
var alertsNotExercised = map[string]string{}

// alertsQuiet must not be active for these labels at the end of the run:
// the main pair has a leader, and an IMDS-mode pod has none by design.
var alertsQuiet = []struct {
	alert  string
	labels map[string]string
}{
	{"LifeboatNoLeader", map[string]string{"job": jobMain}},
	{"LifeboatNoLeader", map[string]string{"job": jobIMDS}},
}

const launching = "autoscaling:EC2_INSTANCE_LAUNCHING"

// testNotification is the message Auto Scaling sends when a hook is
// created with a notification target (internal/message's testdata).
const testNotification = `{"AccountId":"123456789012","RequestId":"c0f77046-9a4e-4fcf-8594-34b174a83c04","AutoScalingGroupARN":"arn:aws:autoscaling:us-east-1:123456789012:autoScalingGroup:2f70c37a-fcb4-4f83-95eb-fa0aae7cc9b6:autoScalingGroupName/prom","AutoScalingGroupName":"prom","Service":"AWS Auto Scaling","Event":"autoscaling:TEST_NOTIFICATION","Time":"2023-09-11T03:03:14.022Z"}`

// A real Prometheus scrapes the real lifeboat binary (a leader-elected
// pair in queue mode, a replica that never leads, an IMDS-mode lifeboat)
// and evaluates the chart's rule file while a scenario runs on the
// testbed: a Spot drain that takes 112 s, a Spot drain past its deadline
// (a pod a PodDisruptionBudget allows no disruption, 20 s left: a forecast
// miss, its pod cut off; then its instance terminates and its Node stays:
// a ghost), a launch lifecycle action lost to failing heartbeats, a malformed
// message, a test notification, an event about an unknown instance, a
// webhook that refuses, fails and accepts, then SQS receives that fail.
// Then every query of the Grafana dashboard returns data and every alert
// of the rule file fires.
func TestDashboardAndAlertsOnARealRun(t *testing.T) {
	ruleFile := filepath.Join(testenv.RepoRoot(), "deploy", "helm", "lifeboat", "files", "alerts.yaml")
	queries := coveredQueries(t)
	coveredAlerts(t, ruleFile)

	var mu sync.Mutex
	joinDelay := time.Duration(0)
	s := testenv.NewScenario(t, testenv.ScenarioOptions{
		Kube: kube, Moto: moto, ResetMoto: true, LifeboatBin: lifeboatBin,
		ClusterName: clusterName, Prefix: "prom", GroupLabel: "prom.lifeboat.io/group", Timeout: 8 * time.Minute,
		Join: func(awssim.Instance) (time.Duration, bool) {
			mu.Lock()
			defer mu.Unlock()
			return joinDelay, true
		},
	})
	ctx := s.Ctx
	ns := kube.Namespace(t)
	group := "prom-" + testenv.UniqueName("g")
	ids := s.CreateGroup(group, 2)
	slowNode, blockedNode := s.NodeName(ids[0]), s.NodeName(ids[1])

	// Faults are off until the scenario turns them on.
	sqsProxy, err := testenv.StartFaultProxy(testenv.FaultProxyOptions{Target: moto.Endpoint, Protocol: testenv.ProtocolJSON,
		Actions: []string{"ReceiveMessage"}, Faults: []testenv.Fault{testenv.FaultServerError}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sqsProxy.Close() })
	asProxy, err := testenv.StartFaultProxy(testenv.FaultProxyOptions{Target: s.Sim.Endpoint(), Protocol: testenv.ProtocolQuery,
		Actions: []string{"RecordLifecycleActionHeartbeat"}, Faults: []testenv.Fault{testenv.FaultServerError}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = asProxy.Close() })
	// The webhook refuses the first notification (HTTP 400: failed at
	// once), then answers 503 and 200 in turn (a retry, then sent).
	var posts atomic.Int64
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		switch n := posts.Add(1); {
		case n == 1:
			w.WriteHeader(http.StatusBadRequest)
		case n%2 == 0:
			w.WriteHeader(http.StatusServiceUnavailable)
		default:
			w.WriteHeader(http.StatusOK)
		}
	}))
	t.Cleanup(hook.Close)

	// A foreign holder keeps the Lease of the leaderless replica for an hour.
	now := metav1.NowMicro()
	if _, err := kube.Client.CoordinationV1().Leases(ns).Create(ctx, &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: "leaderless"},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("intruder"), LeaseDurationSeconds: ptr.To[int32](3600),
			AcquireTime: &now, RenewTime: &now},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	startQueue := func(lease, id string) *testenv.Lifeboat {
		return startLifeboat(t, ctx, []string{
			"--queue-url", s.Stack.QueueURL,
			"--aws-endpoint", "sqs=" + sqsProxy.URL() + ",autoscaling=" + asProxy.URL() + ",ec2=" + moto.Endpoint + ",eventbridge=" + moto.Endpoint + ",sts=" + moto.Endpoint,
			"--region", "us-east-1",
			"--kubeconfig", kube.Kubeconfig,
			"--cluster-name", clusterName,
			"--leader-elect=true", "--lease-name", lease, "--lease-namespace", ns, "--lease-duration", "3s",
			"--pod-name", id, "--pod-namespace", ns,
			"--eviction-backoff", "500ms",
			"--deadline-margin", "2s",
			"--launch-ready-timeout", "60s",
			"--webhook-url", hook.URL,
			"--ghost-node-after", "5s",
			// The blocked node's pod stays until the deadline passes (the
			// deadline alert's scenario): not deleted before it.
			"--delete-blocked-pods-before-deadline=false",
			"--log-level", "debug",
		})
	}
	a, b := startQueue("lifeboat-prom", "prom-a"), startQueue("lifeboat-prom", "prom-b")
	leaderless := startQueue("leaderless", "prom-c")
	imdsInstance := testenv.RandomInstanceID()
	imdsNode := kube.Node(t, testenv.NodeSpec{InstanceID: imdsInstance})
	mock := testenv.StartIMDS(t, testenv.IMDSOptions{InstanceID: imdsInstance})
	imdsLB := startLifeboat(t, ctx, []string{"--mode", "imds", "--node-name", imdsNode.Name, "--imds-endpoint", mock.URL,
		"--kubeconfig", kube.Kubeconfig, "--log-level", "debug"})
	pair := func(name string, labels map[string]string) float64 {
		t.Helper()
		var sum float64
		for _, lb := range []*testenv.Lifeboat{a, b} {
			v, err := lb.Metric(ctx, name, labels)
			if err != nil {
				t.Fatal(err)
			}
			sum += v
		}
		return sum
	}
	s.Eventually(30*time.Second, "one leader of the pair", func() bool { return pair("lifeboat_leader", nil) == 1 })

	// The slow pod stops 111 s after its eviction (its grace period, 112 s,
	// fits the notice less the 2 s margin: no forecast miss): the drain
	// takes longer than LifeboatSpotDrainSlow's 110 s.
	if _, err := kube.CreatePod(ctx, testenv.PodSpec{Namespace: ns, Node: slowNode, Grace: 112 * time.Second, ShutdownAfter: 111 * time.Second}); err != nil {
		t.Fatal(err)
	}
	// A budget allowing no disruption guards a pod of the other node: a
	// certain forecast miss, then the deadline passes with it there.
	guarded, err := kube.CreatePod(ctx, testenv.PodSpec{Namespace: ns, Node: blockedNode, Labels: map[string]string{"app": "guarded"}, ShutdownAfter: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kube.CreatePod(ctx, testenv.PodSpec{Namespace: ns, Node: blockedNode, Grace: 5 * time.Second, ShutdownAfter: time.Second}); err != nil {
		t.Fatal(err)
	}
	if err := kube.GuardPod(ctx, ns, "guarded"); err != nil {
		t.Fatal(err)
	}

	prom := startPrometheus(ctx, t, []scrapeJob{
		{name: jobMain, targets: []string{hostPort(a), hostPort(b)}},
		{name: jobLeaderless, targets: []string{hostPort(leaderless)}},
		{name: jobIMDS, targets: []string{hostPort(imdsLB)}},
	}, []string{ruleFile})
	prom.waitScraped(ctx, t, time.Now(), 4)
	checkRulesHealthy(ctx, t, prom)

	// The scenario. Heartbeats fail from now on (each after the SDK's five
	// attempts, up to 15 s): the launch action, whose node boots in 40 s,
	// times out after 5 s and is lost.
	asProxy.SetRate(1)
	s.PutHook(group, "launch", launching, 5, "CONTINUE")
	mu.Lock()
	joinDelay = 40 * time.Second
	mu.Unlock()
	if _, err := s.AS.SetDesiredCapacity(ctx, &autoscaling.SetDesiredCapacityInput{AutoScalingGroupName: aws.String(group), DesiredCapacity: aws.Int32(3)}); err != nil {
		t.Fatal(err)
	}
	sent := time.Now()
	spot := func(id string, at time.Time) {
		s.PutEvent(route.SourceEC2, route.SpotInterruption, at, map[string]string{"instance-id": id, "instance-action": "terminate"})
	}
	spot(ids[0], sent)
	deadline := sent.Add(20 * time.Second)
	spot(ids[1], deadline.Add(-2*time.Minute)) // sent 100 s ago: 20 s left
	spot(testenv.RandomInstanceID(), sent)     // not a node of this cluster
	for _, body := range []string{`{not json`, testNotification} {
		if _, err := s.SQS.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(s.Stack.QueueURL), MessageBody: aws.String(body)}); err != nil {
			t.Fatal(err)
		}
	}
	s.Eventually(60*time.Second, "every message received", func() bool {
		return pair("lifeboat_messages_rejected_total", map[string]string{"reason": "invalid-json"}) >= 1 &&
			pair("lifeboat_messages_ignored_total", map[string]string{"reason": "test-notification"}) >= 1 &&
			pair("lifeboat_unknown_instance_events_total", nil) >= 1 &&
			pair("lifeboat_events_received_total", map[string]string{"kind": "spot-interruption"}) >= 2 &&
			pair("lifeboat_events_received_total", map[string]string{"kind": "lifecycle-launch"}) >= 1
	})

	s.Eventually(max(time.Until(deadline), 0)+15*time.Second, "DeadlinePassed on the blocked node", func() bool { return s.NodeEvents(blockedNode, "DeadlinePassed") >= 1 })
	if _, err := kube.Client.CoreV1().Pods(ns).Get(ctx, guarded.Name, metav1.GetOptions{}); err != nil {
		t.Errorf("the guarded pod is gone (no force delete configured): %v", err)
	}
	// The blocked node's instance terminates and nothing deletes its Node
	// (no cloud controller here): a ghost 5 s later.
	s.PutEvent(route.SourceEC2, route.StateChange, time.Now(), map[string]string{"instance-id": ids[1], "state": "terminated"})
	s.Eventually(30*time.Second, "the blocked node reported a ghost", func() bool { return pair("lifeboat_ghost_nodes", nil) >= 1 })
	// Then the queue fails: every receive answers HTTP 500.
	sqsProxy.SetRate(1)
	s.Eventually(60*time.Second, "the launch action lost", func() bool {
		return pair("lifeboat_lifecycle_actions_lost_total", map[string]string{"transition": "launch"}) >= 1
	})
	s.Eventually(150*time.Second-time.Since(sent), "the slow node drained", func() bool {
		return pair("lifeboat_actions_total", map[string]string{"action": "drain", "result": "ok"}) >= 1
	})
	t.Logf("slow drain done %v after its notice", time.Since(sent).Round(time.Second))

	// Every alert fires (a for duration counts from the first evaluation
	// that found it true).
	var firing []promv1.Alert
	missing := map[string]map[string]string{}
	until := time.Now().Add(90 * time.Second)
	for {
		res, err := prom.api.Alerts(ctx)
		if err != nil {
			t.Fatal(err)
		}
		firing = firing[:0]
		clear(missing)
		for name, labels := range alertWants {
			missing[name] = labels
		}
		for _, al := range res.Alerts {
			if al.State != promv1.AlertStateFiring {
				continue
			}
			firing = append(firing, al)
			name := string(al.Labels[model.AlertNameLabel])
			if labels, ok := missing[name]; ok && hasLabels(al.Labels, labels) {
				delete(missing, name)
			}
		}
		if len(missing) == 0 || time.Now().After(until) {
			break
		}
		time.Sleep(time.Second)
	}
	for name, labels := range missing {
		t.Errorf("alert %s with labels %v did not fire; firing: %s", name, labels, alertList(firing))
	}
	res, err := prom.api.Alerts(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range alertsQuiet {
		for _, al := range res.Alerts {
			if string(al.Labels[model.AlertNameLabel]) == q.alert && hasLabels(al.Labels, q.labels) {
				t.Errorf("alert %s is %s for %v: %s", q.alert, al.State, q.labels, al.Labels)
			}
		}
	}
	checkRulesHealthy(ctx, t, prom)

	// Every dashboard query returns what the run makes meaningful.
	for _, q := range queries {
		w, ok := panelWants[q.key]
		if !ok {
			continue // panelsNotExercised
		}
		if problem := w.check(prom.query(ctx, t, q.expr)); problem != "" {
			t.Errorf("dashboard panel %s: %s\n  query: %s", q.key, problem, q.expr)
		}
	}

	if path := os.Getenv("LIFEBOAT_PROM_SERIES"); path != "" {
		writeSeries(ctx, t, prom, path, sent.Add(-30*time.Second))
	}
}

// startLifeboat starts lifeboat with args, stops it in t's cleanup and
// prints its last log lines when t failed.
func startLifeboat(t *testing.T, ctx context.Context, args []string) *testenv.Lifeboat {
	t.Helper()
	lb, err := testenv.StartLifeboat(ctx, testenv.LifeboatOptions{Bin: lifeboatBin, Args: args, Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		lb.Stop()
		if t.Failed() {
			lines := lb.Logs()
			if len(lines) > 60 {
				lines = lines[len(lines)-60:]
			}
			t.Logf("---- lifeboat %s, last %d lines ----\n%s", lb.URL(), len(lines), strings.Join(lines, "\n"))
		}
	})
	return lb
}

func hostPort(lb *testenv.Lifeboat) string { return strings.TrimPrefix(lb.URL(), "http://") }

func hasLabels(ls model.LabelSet, want map[string]string) bool {
	for k, v := range want {
		if string(ls[model.LabelName(k)]) != v {
			return false
		}
	}
	return true
}

func alertList(as []promv1.Alert) string {
	var out []string
	for _, a := range as {
		out = append(out, a.Labels.String())
	}
	sort.Strings(out)
	return strings.Join(out, ", ")
}

// checkRulesHealthy fails the test when Prometheus could not evaluate a
// rule (a many-to-many match, a type error).
func checkRulesHealthy(ctx context.Context, t *testing.T, prom *prometheus) {
	t.Helper()
	res, err := prom.api.Rules(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, g := range res.Groups {
		for _, r := range g.Rules {
			ar, ok := r.(promv1.AlertingRule)
			if !ok {
				continue
			}
			n++
			if ar.Health != promv1.RuleHealthGood && ar.Health != promv1.RuleHealthUnknown {
				t.Errorf("alert %s: health %s: %s", ar.Name, ar.Health, ar.LastError)
			}
		}
	}
	if n != len(alertWants)+len(alertsNotExercised) {
		t.Errorf("prometheus loaded %d alerting rules, want %d", n, len(alertWants)+len(alertsNotExercised))
	}
}

// coveredQueries returns the dashboard's queries; it fails the test when a
// query is neither exercised nor listed as not exercised, or when the
// lists name a query the dashboard does not have.
func coveredQueries(t *testing.T) []panelQuery {
	t.Helper()
	queries, err := dashboardQueries(jobMain)
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, q := range queries {
		keys = append(keys, q.key)
		_, exercised := panelWants[q.key]
		_, listed := panelsNotExercised[q.key]
		if exercised == listed {
			t.Errorf("dashboard query %s (%s): exercised %v, listed as not exercised %v; want exactly one", q.key, q.expr, exercised, listed)
		}
	}
	for k := range panelWants {
		if !slices.Contains(keys, k) {
			t.Errorf("the test expects dashboard query %s, which the dashboard does not have", k)
		}
	}
	for k := range panelsNotExercised {
		if !slices.Contains(keys, k) {
			t.Errorf("the test lists dashboard query %s, which the dashboard does not have", k)
		}
	}
	if t.Failed() {
		t.FailNow()
	}
	return queries
}

// coveredAlerts fails the test when an alert of the rule file is neither
// exercised nor listed as not exercised, or the lists name an alert the
// file does not have.
func coveredAlerts(t *testing.T, ruleFile string) {
	t.Helper()
	b, err := os.ReadFile(ruleFile)
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Groups []struct {
			Rules []struct {
				Alert string `json:"alert"`
			} `json:"rules"`
		} `json:"groups"`
	}
	if err := yaml.Unmarshal(b, &f); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, g := range f.Groups {
		for _, r := range g.Rules {
			if r.Alert == "" {
				continue
			}
			names = append(names, r.Alert)
			_, exercised := alertWants[r.Alert]
			_, listed := alertsNotExercised[r.Alert]
			if exercised == listed {
				t.Errorf("alert %s: exercised %v, listed as not exercised %v; want exactly one", r.Alert, exercised, listed)
			}
		}
	}
	for name := range alertWants {
		if !slices.Contains(names, name) {
			t.Errorf("the test expects alert %s, which the rule file does not have", name)
		}
	}
	for name := range alertsNotExercised {
		if !slices.Contains(names, name) {
			t.Errorf("the test lists alert %s, which the rule file does not have", name)
		}
	}
	if t.Failed() {
		t.FailNow()
	}
}

// writeSeries writes the lifeboat series the alerts read, as Prometheus
// recorded them since from, in promtool's input_series notation (one
// sample every 15 s), to path: the source of test/monitoring's promtool
// tests.
func writeSeries(ctx context.Context, t *testing.T, prom *prometheus, path string, from time.Time) {
	t.Helper()
	const step = 15 * time.Second
	expr := `{__name__=~"lifeboat_(leader|source_healthy|actions_total|drain_forecast_misses_total|signal_to_drained_seconds_bucket|lifecycle_calls_total|lifecycle_actions_lost_total|notifications_total)"}`
	v, _, _, err := prom.api.QueryRange(ctx, expr, promv1.Range{Start: from, End: time.Now(), Step: step})
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "# recorded %s, one sample every %v from %s\n", time.Now().UTC().Format(time.RFC3339), step, from.UTC().Format(time.RFC3339))
	for _, ss := range v.(model.Matrix) {
		var vals []string
		for _, p := range ss.Values {
			vals = append(vals, p.Value.String())
		}
		fmt.Fprintf(&b, "- series: '%s'\n  values: '%s'\n", ss.Metric.String(), strings.Join(vals, " "))
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("wrote the recorded series to %s", path)
}
