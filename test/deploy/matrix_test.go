package deploy

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"lifeboat.dev/lifeboat/test/testenv"
)

// documentedOption is one row of docs/configuration.md's options table.
type documentedOption struct {
	flag, def string
	modes     []string
}

// documentedOptions reads the options table of docs/configuration.md
// (generated from internal/config by `make docs`).
func documentedOptions(t *testing.T) []documentedOption {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "docs", "configuration.md"))
	if err != nil {
		t.Fatal(err)
	}
	var out []documentedOption
	for _, l := range strings.Split(string(b), "\n") {
		if !strings.HasPrefix(l, "| `--") {
			continue
		}
		cells := strings.Split(strings.Trim(l, "|"), "|")
		for i := range cells {
			cells[i] = strings.Trim(strings.TrimSpace(cells[i]), "`")
		}
		o := documentedOption{flag: strings.TrimPrefix(cells[0], "--"), def: cells[2]}
		for _, m := range strings.Split(cells[3], ",") {
			o.modes = append(o.modes, strings.TrimSpace(m))
		}
		out = append(out, o)
	}
	if len(out) < 50 {
		t.Fatalf("read only %d options from docs/configuration.md", len(out))
	}
	return out
}

// matrixEnv is what a case's sample value may refer to.
type matrixEnv struct {
	kubeconfig, node, pod, ns, queueURL, imdsURL, webhook, dir string
	listen                                                     string
}

// matrixSamples is a value other than the default for each documented
// option (a boolean flips its default, so it needs none). A documented
// option without one fails the matrix: add it here.
var matrixSamples = map[string]func(e matrixEnv) string{
	"kubeconfig":    func(e matrixEnv) string { return e.kubeconfig },
	"node-name":     func(e matrixEnv) string { return e.node },
	"pod-name":      func(e matrixEnv) string { return e.pod },
	"pod-namespace": func(e matrixEnv) string { return e.ns },
	"cluster-name":  func(matrixEnv) string { return clusterName },
	"queue-url":     func(e matrixEnv) string { return e.queueURL },
	"region":        func(matrixEnv) string { return "us-east-1" },
	"aws-endpoint":  func(matrixEnv) string { return endpoints(moto.Endpoint, sim.Endpoint()) },
	"workers":       func(matrixEnv) string { return "3" },
	"queue-receivers": func(matrixEnv) string {
		return "2"
	},
	"visibility-timeout":              func(matrixEnv) string { return "1m" },
	"unknown-instance":                func(matrixEnv) string { return "delete" },
	"managed-asg":                     func(matrixEnv) string { return "group-a,group-b" },
	"node-selector":                   func(matrixEnv) string { return "deploy.lifeboat.io/matrix!=off" },
	"karpenter-nodes":                 func(matrixEnv) string { return "handle" },
	"managed-tag":                     func(matrixEnv) string { return "team" },
	"imds-endpoint":                   func(e matrixEnv) string { return e.imdsURL },
	"imds-poll-interval":              func(matrixEnv) string { return "250ms" },
	"drain-on":                        func(matrixEnv) string { return "spot-interruption,rebalance-recommendation" },
	"scheduled-change-lead":           func(matrixEnv) string { return "5m" },
	"maintenance-windows":             func(matrixEnv) string { return "Sat,Sun 02:00-06:00 UTC; Mon-Fri 22:00-02:00 Europe/Berlin" },
	"deadline-margin":                 func(matrixEnv) string { return "2s" },
	"eviction-backoff":                func(matrixEnv) string { return "1s" },
	"rebalance-cordon-expiry":         func(matrixEnv) string { return "1h" },
	"pod-grace-period":                func(matrixEnv) string { return "10s" },
	"node-grace-period":               func(matrixEnv) string { return "1m" },
	"taint-effect":                    func(matrixEnv) string { return "NoExecute" },
	"heartbeat-interval":              func(matrixEnv) string { return "10s" },
	"heartbeat-until":                 func(matrixEnv) string { return "5m" },
	"complete-lifecycle-action-delay": func(matrixEnv) string { return "5s" },
	"lifecycle-timeout-result":        func(matrixEnv) string { return "ABANDON" },
	"launch-ready-timeout":            func(matrixEnv) string { return "5m" },
	"launch-timeout-result":           func(matrixEnv) string { return "CONTINUE" },
	"scale-in-protection-interval":    func(matrixEnv) string { return "5s" },
	"volume-detach-timeout":           func(matrixEnv) string { return "30s" },
	"ghost-node-after":                func(matrixEnv) string { return "5m" },
	"kube-qps":                        func(matrixEnv) string { return "50" },
	"kube-burst":                      func(matrixEnv) string { return "100" },
	"listen":                          func(e matrixEnv) string { return e.listen },
	"lease-name":                      func(matrixEnv) string { return "matrix" },
	"lease-namespace":                 func(e matrixEnv) string { return e.ns },
	"lease-duration":                  func(matrixEnv) string { return "10s" },
	"log-format":                      func(matrixEnv) string { return "text" },
	"log-level":                       func(matrixEnv) string { return "debug" },
	"events-annotations":              func(matrixEnv) string { return "team=infra" },
	"webhook-url":                     func(e matrixEnv) string { return e.webhook },
	"webhook-url-file":                func(e matrixEnv) string { return writeFile(e.dir, "url", e.webhook) },
	"webhook-template":                func(matrixEnv) string { return "json" },
	"webhook-headers":                 func(matrixEnv) string { return "X-Team: infra" },
	"webhook-headers-file":            func(e matrixEnv) string { return writeFile(e.dir, "headers", "X-Team: infra\n") },
	"webhook-proxy":                   func(matrixEnv) string { return "http://127.0.0.1:3128" },
	"webhook-dedupe-window":           func(matrixEnv) string { return "1h" },
}

// chartValueOf names the chart value that sets an option, where the chart
// must know it (the own-node policy is rendered from it, or it changes the
// DaemonSet's command); the other options go in extraArgs.
var chartValueOf = map[string]string{
	"taint-effect":                "taintEffect",
	"exclude-from-load-balancers": "excludeFromLoadBalancers",
	"out-of-service-taint":        "enableOutOfServiceTaint",
	"delete-ghost-nodes":          "deleteGhostNodes",
	"replacement-first":           "replacementFirst",
	"imds-complete-lifecycle":     "imdsCompleteLifecycle",
	"lease-name":                  "leaderElection.leaseName",
	"failover-journal":            "leaderElection.failoverJournal",
	"terminating-condition":       "terminatingCondition",
}

func writeFile(dir, name, content string) string {
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		panic(err) // a temporary directory of the test's own
	}
	return p
}

// sampleValue is the case's value of o: the boolean default flipped, or
// the sample.
func sampleValue(o documentedOption, e matrixEnv) (string, bool) {
	switch o.def {
	case "true":
		return "false", true
	case "false":
		return "true", true
	}
	if o.flag == "mode" {
		return "", true // the case's mode itself
	}
	f, ok := matrixSamples[o.flag]
	if !ok {
		return "", false
	}
	return f(e), true
}

var (
	imdsBinOnce sync.Once
	imdsBin     string
	imdsBinErr  error
)

// lifeboatIMDSBin builds lifeboat-imds, the DaemonSet's default command,
// with the Dockerfile's go build line (once).
func lifeboatIMDSBin(t *testing.T) string {
	t.Helper()
	imdsBinOnce.Do(func() {
		dir, err := os.MkdirTemp("", "lifeboat-imds-")
		if err != nil {
			imdsBinErr = err
			return
		}
		imdsBin, imdsBinErr = buildOutputWithDockerfile(dir, binVersion, "/out/lifeboat-imds")
	})
	if imdsBinErr != nil {
		t.Fatalf("building lifeboat-imds with the Dockerfile's go build line: %v", imdsBinErr)
	}
	return imdsBin
}

// binaryOf is the binary the rendered container runs: lifeboat-imds when
// its command says so, else the image's entrypoint, lifeboat.
func binaryOf(t *testing.T, c corev1.Container) string {
	if len(c.Command) > 0 && filepath.Base(c.Command[0]) == "lifeboat-imds" {
		return lifeboatIMDSBin(t)
	}
	return lifeboatBin
}

// TestOptionsMatrix: every option of docs/configuration.md, in every mode
// it is documented for, set (through its chart value where the chart has
// to know it, else extraArgs) on the chart's defaults, rendered with the
// admission policies on, and the real binary the chart runs started with
// the rendered arguments and environment on the live API server. In IMDS
// mode, with the token the kubelet would mount in the DaemonSet's pod, the
// metadata serves a Spot notice: lifeboat's first writes on its node
// (cordon, taint, drained mark) must pass the own-node policy, none may be
// refused. In queue mode (no policy) it must start, serve /healthz and
// stay up without an RBAC refusal. Every option documented for one mode
// only, set in the other, must stop lifeboat at start with an error naming
// the option and the mode.
func TestOptionsMatrix(t *testing.T) {
	// The cases run in parallel, after this function returns: what they
	// share ends in t's cleanup, once they are done.
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	t.Cleanup(cancel)
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {}))
	t.Cleanup(hook.Close)
	cfg := testenv.MotoAWSConfig()
	sq := sqs.NewFromConfig(cfg, func(o *sqs.Options) { o.BaseEndpoint = aws.String(moto.Endpoint) })
	q, err := sq.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(testenv.UniqueName("matrix"))})
	if err != nil {
		t.Fatal(err)
	}
	queueURL := aws.ToString(q.QueueUrl)
	// One metadata mock for every IMDS case: a Spot notice from the start;
	// every case's node is an instance of that ID.
	instanceID := testenv.RandomInstanceID()
	mock := testenv.StartIMDS(t, testenv.IMDSOptions{Scenario: testenv.IMDSSpot, InstanceID: instanceID, SpotTime: time.Now().Add(10 * time.Minute)})

	opts := documentedOptions(t)
	for _, o := range opts {
		if _, ok := sampleValue(o, matrixEnv{dir: t.TempDir()}); !ok {
			t.Errorf("--%s is documented but has no sample value in matrixSamples", o.flag)
		}
	}
	for flag := range matrixSamples {
		if !slices.ContainsFunc(opts, func(o documentedOption) bool { return o.flag == flag }) {
			t.Errorf("matrixSamples has --%s, which docs/configuration.md does not document", flag)
		}
	}
	if t.Failed() {
		t.FailNow()
	}
	t.Run("refused", func(t *testing.T) {
		for _, o := range opts {
			for _, mode := range []string{"queue", "imds"} {
				if slices.Contains(o.modes, mode) {
					continue
				}
				t.Run(o.flag+"/"+mode, func(t *testing.T) {
					t.Parallel()
					refusedAtStart(t, o, mode, queueURL)
				})
			}
		}
	})
	for _, o := range opts {
		for _, mode := range o.modes {
			t.Run(o.flag+"/"+mode, func(t *testing.T) {
				t.Parallel()
				e := matrixEnv{queueURL: queueURL, imdsURL: mock.URL, webhook: hook.URL, dir: t.TempDir()}
				if mode == "imds" {
					matrixIMDS(ctx, t, o, e, instanceID)
				} else {
					matrixQueue(ctx, t, o, e)
				}
			})
		}
	}
}

// imdsCompanions are the chart values an option needs beside it in IMDS
// mode, where lifeboat refuses it alone at start (a documented
// requirement, not a default changed for the test).
var imdsCompanions = map[string]map[string]any{
	"stop-daemonset-pods": {"imdsCompleteLifecycle": true}, // needs --imds-complete-lifecycle
}

// caseValues are the chart values of a case: the option's chart value
// when it has one, else extraArgs.
func caseValues(o documentedOption, value string, values map[string]any) {
	if v, ok := chartValueOf[o.flag]; ok {
		var x any = value
		switch value {
		case "true":
			x = true
		case "false":
			x = false
		}
		if top, sub, nested := strings.Cut(v, "."); nested {
			values[top] = map[string]any{sub: x}
		} else {
			values[v] = x
		}
		return
	}
	if o.flag != "mode" {
		values["extraArgs"] = []any{"--" + o.flag + "=" + value}
	}
}

// matrixIMDS runs one IMDS-mode case.
func matrixIMDS(ctx context.Context, t *testing.T, o documentedOption, e matrixEnv, instanceID string) {
	values := map[string]any{}
	port, err := testenv.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	e.listen = fmt.Sprintf("127.0.0.1:%d", port)
	// Values that need the node and pod are known only once they exist;
	// the ones a case can set before are set here.
	value, _ := sampleValue(o, e)
	late := slices.Contains([]string{"kubeconfig", "node-name", "pod-name", "pod-namespace"}, o.flag)
	if !late {
		caseValues(o, value, values)
	}
	maps.Copy(values, imdsCompanions[o.flag])
	s := newScoped(ctx, t, values, instanceID)
	w := &world{t: t, ctx: ctx, ns: s.ns, release: s.release, chart: s.chart}
	token, err := kube.BoundToken(ctx, s.pod)
	if err != nil {
		t.Fatal(err)
	}
	kc, err := writeKubeconfig(t, kube.URL, kube.CA, s.chart.one(t, "ServiceAccount").GetName(), token)
	if err != nil {
		t.Fatal(err)
	}
	extra := []string{"--imds-endpoint=" + e.imdsURL}
	if late {
		e.kubeconfig, e.node, e.pod, e.ns = kc, s.node, s.pod.Name, s.ns
		value, _ = sampleValue(o, e)
		extra = append(extra, "--"+o.flag+"="+value)
	}
	c := into[appsv1.DaemonSet](t, s.chart.one(t, "DaemonSet")).Spec.Template.Spec.Containers[0]
	p, err := w.startLifeboat(lifeboatOptions{name: s.pod.Name, node: s.node, kubeconfig: kc, extra: extra, bin: binaryOf(t, c), listen: e.listen})
	if err != nil {
		t.Fatal(err)
	}
	dryRun := o.flag == "dry-run"
	err = eventually(ctx, 30*time.Second, "lifeboat's writes on its node", func() (bool, error) {
		if err := p.healthy(); err != nil {
			return false, err
		}
		if l := policyRefusal(p.log()); l != "" {
			return false, fmt.Errorf("a write refused by admission: %s", l)
		}
		if dryRun {
			return strings.Contains(p.log(), "dry run"), nil
		}
		n, err := kube.Client.CoreV1().Nodes().Get(ctx, s.node, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return n.Spec.Unschedulable && n.Annotations["lifeboat.io/drained"] != "", nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if dryRun {
		n, err := kube.Client.CoreV1().Nodes().Get(ctx, s.node, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if n.Spec.Unschedulable {
			t.Errorf("--dry-run cordoned the node")
		}
	}
}

// policyRefusal returns the first log line in which an admission policy
// refused lifeboat a write, or "".
func policyRefusal(log string) string {
	for _, l := range strings.Split(log, "\n") {
		if strings.Contains(l, "denied request") {
			return l
		}
	}
	return ""
}

// matrixQueue runs one queue-mode case.
func matrixQueue(ctx context.Context, t *testing.T, o documentedOption, e matrixEnv) {
	ns := kube.Namespace(t)
	release := strings.ToLower(testenv.UniqueName("mx"))
	port, err := testenv.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	e.listen, e.ns, e.pod = fmt.Sprintf("127.0.0.1:%d", port), ns, release+"-pod"
	values := map[string]any{"queueURL": e.queueURL, "awsRegion": "us-east-1", "clusterName": clusterName}
	value, _ := sampleValue(o, e)
	late := o.flag == "kubeconfig"
	if !late {
		caseValues(o, value, values)
	}
	r, err := render(release, ns, values)
	if err != nil {
		t.Fatal(err)
	}
	w := &world{t: t, ctx: ctx, ns: ns, release: release, chart: r}
	applyForTest(t, w.rbacObjects())
	kc, err := w.kubeconfig(kube.URL, kube.CA)
	if err != nil {
		t.Fatal(err)
	}
	var extra []string
	if late {
		e.kubeconfig = kc
		value, _ = sampleValue(o, e)
		extra = append(extra, "--"+o.flag+"="+value)
	}
	p, err := w.startLifeboat(lifeboatOptions{name: e.pod, kubeconfig: kc, endpoints: endpoints(moto.Endpoint, sim.Endpoint()), extra: extra, bin: binaryOf(t, w.container()), listen: e.listen})
	if err != nil {
		t.Fatal(err)
	}
	// Up for two seconds: past the informers' first lists and the first
	// receives (or the Lease).
	deadline := time.Now().Add(2 * time.Second)
	for time.Now().Before(deadline) {
		if err := p.healthy(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// refusedAtStart runs lifeboat with an option in a mode it is not
// documented for: it must exit non-zero naming the option and the mode.
func refusedAtStart(t *testing.T, o documentedOption, mode, queueURL string) {
	e := matrixEnv{queueURL: queueURL, imdsURL: "http://127.0.0.1:1", webhook: "http://127.0.0.1:1", dir: t.TempDir(), listen: "127.0.0.1:0",
		kubeconfig: "/nonexistent", node: "n", pod: "p", ns: "lifeboat"}
	value, _ := sampleValue(o, e)
	args := []string{"run", "--mode=" + mode, "--" + o.flag + "=" + value}
	if mode == "imds" {
		args = append(args, "--node-name=n")
	} else {
		args = append(args, "--queue-url="+queueURL, "--pod-namespace=lifeboat")
	}
	cmd := exec.Command(lifeboatBin, args...)
	cmd.Env = append(os.Environ(), testenv.AWSEnv()...)
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("lifeboat %s exited 0; want refused at start\n%s", strings.Join(args, " "), out)
	}
	if !strings.Contains(string(out), "--"+o.flag) || !strings.Contains(string(out), mode) {
		t.Errorf("lifeboat %s: %v\n%s\nwant an error naming --%s and mode %s", strings.Join(args, " "), err, out, o.flag, mode)
	} else {
		t.Logf("refused: %s", lineWith(string(out), "--"+o.flag))
	}
}

// lineWith returns the first line of s that contains sub.
func lineWith(s, sub string) string {
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			return l
		}
	}
	return ""
}
