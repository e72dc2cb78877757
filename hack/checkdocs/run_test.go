package checkdocs

import (
	"bytes"
	"cmp"
	"context"
	"debug/buildinfo"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"lifeboat.dev/lifeboat/test/awssim"
	"lifeboat.dev/lifeboat/test/testenv"
)

// TestDocCommandsRun runs every documented command whose verdict names an
// environment, on one testbed, with bash, as written but for the
// placeholders: it must exit as its verdict says (0 unless set) and print
// what it says; a server (lifeboat run) must answer /readyz with 200.
func TestDocCommandsRun(t *testing.T) {
	cmds, err := ExtractAll(testenv.RepoRoot())
	if err != nil {
		t.Fatal(err)
	}
	tb := startTestbed(t)
	where := map[string][]string{}
	var order []string
	for _, c := range cmds {
		if where[c.Text] == nil {
			order = append(order, c.Text)
		}
		where[c.Text] = append(where[c.Text], c.Where())
	}
	var run int
	for _, text := range order {
		v, ok := verdicts[text]
		if !ok {
			t.Errorf("%s: %q is not classified (TestEveryDocCommandClassified)", where[text][0], text)
			continue
		}
		if v.in == notRun {
			continue
		}
		run++
		t.Run(text, func(t *testing.T) {
			t.Logf("%s", strings.Join(where[text], ", "))
			tb.check(t, text, v)
		})
	}
	t.Logf("%d commands of the docs have an environment to run in (-run may have left some out)", run)
}

// testbed is where the documented commands run.
type testbed struct {
	root    string // the repository root: every command's working directory
	bin     string // lifeboat and helm, first on PATH
	helmDir string // helm's cache, configuration and data
	bash    string

	kube     *testenv.Env
	moto     *testenv.Moto
	sim      *awssim.Server
	imds     *testenv.IMDS
	queueURL string
	node     string
}

const (
	clusterName  = "docs"
	roleARN      = "arn:aws:iam::123456789012:role/lifeboat"
	podName      = "lifeboat-docs"
	podNamespace = "default"
)

// startTestbed builds lifeboat, finds helm and bash, and starts the
// testbed's components; a missing one fails t.
func startTestbed(t *testing.T) *testbed {
	t.Helper()
	tb := &testbed{root: testenv.RepoRoot(), bin: t.TempDir(), helmDir: t.TempDir()}
	var err error
	if tb.bash, err = exec.LookPath("bash"); err != nil {
		t.Fatalf("bash runs the documented commands: %v", err)
	}
	if _, err := testenv.BuildLifeboat(tb.bin); err != nil {
		t.Fatal(err)
	}
	helm, err := pinnedHelm(tb.root)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(helm, filepath.Join(tb.bin, "helm")); err != nil {
		t.Fatal(err)
	}

	tb.kube = testenv.Start(t, testenv.Options{NoScheduler: true, NoControllerManager: true})
	tb.moto = testenv.StartMoto(t, t.TempDir())
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	stack, err := testenv.CreateQueueStack(ctx, tb.moto.Endpoint, "docs")
	if err != nil {
		t.Fatal(err)
	}
	tb.queueURL = stack.QueueURL
	if tb.sim, err = awssim.New(awssim.Options{MotoEndpoint: tb.moto.Endpoint}); err != nil {
		t.Fatal(err)
	}
	if err := tb.sim.Start(context.Background(), "127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tb.sim.Close() })
	instanceID := testenv.RandomInstanceID()
	tb.imds = testenv.StartIMDS(t, testenv.IMDSOptions{InstanceID: instanceID})
	tb.node = tb.kube.Node(t, testenv.NodeSpec{InstanceID: instanceID}).Name
	return tb
}

// pinnedHelm returns bin/helm after checking that it is the version of
// helm.sh/helm/v3 that go.mod pins. `make helm` builds it (`make test` and
// `make check-docs` first).
func pinnedHelm(root string) (string, error) {
	helm := filepath.Join(root, "bin", "helm")
	if _, err := os.Stat(helm); err != nil {
		return "", fmt.Errorf("helm runs the docs' helm lines and is missing at %s: run `make helm` in the repository root (cold ~5 min)", helm)
	}
	list := exec.Command("go", "list", "-m", "-f", "{{.Version}}", "helm.sh/helm/v3")
	list.Dir = root
	out, err := list.Output()
	if err != nil {
		return "", fmt.Errorf("go list -m helm.sh/helm/v3: %w", err)
	}
	pinned := strings.TrimSpace(string(out))
	info, err := buildinfo.ReadFile(helm)
	if err != nil {
		return "", fmt.Errorf("reading the build of %s: %w", helm, err)
	}
	if info.Main.Path != "helm.sh/helm/v3" || info.Main.Version != pinned {
		return "", fmt.Errorf("%s is %s %s, go.mod pins helm.sh/helm/v3 %s: run `make helm`", helm, info.Main.Path, info.Main.Version, pinned)
	}
	return helm, nil
}

// check runs one documented command (and its verdict's before) in the
// verdict's environment.
func (tb *testbed) check(t *testing.T, text string, v verdict) {
	ctx, cancel := context.WithTimeout(context.Background(), cmp.Or(v.takes, defaultTakes))
	defer cancel()
	listen := ""
	if v.in == aws || v.in == queuePod || v.in == imdsPod {
		port, err := testenv.FreePort()
		if err != nil {
			t.Fatal(err)
		}
		listen = fmt.Sprintf("127.0.0.1:%d", port)
	}
	for _, b := range v.before {
		if out, code := tb.run(t, ctx, v.in, listen, b); code != 0 {
			t.Fatalf("before it, %q exited %d:\n%s", b, code, out)
		}
	}
	line := substitute(text)
	if line != text {
		t.Logf("placeholders filled: %s", line)
	}
	if v.serves {
		tb.serve(t, ctx, v.in, listen, line)
		return
	}
	out, code := tb.run(t, ctx, v.in, listen, line)
	if code != v.exit {
		t.Fatalf("exited %d, want %d; output:\n%s", code, v.exit, out)
	}
	if !strings.Contains(out, v.says) {
		t.Fatalf("the output does not hold %q:\n%s", v.says, out)
	}
}

// command returns bash running line in environment e: the shell variables
// of every environment are set first (not exported).
func (tb *testbed) command(ctx context.Context, e env, listen, line string) *exec.Cmd {
	vars := map[string]string{
		"QUEUE_URL": tb.queueURL, "CLUSTER_NAME": clusterName, "ROLE_ARN": roleARN,
		"NODE_NAME": tb.node, "POD_NAME": podName, "POD_NAMESPACE": podNamespace,
	}
	var script strings.Builder
	for k, val := range vars {
		fmt.Fprintf(&script, "%s='%s'\n", k, val)
	}
	script.WriteString(line + "\n")
	cmd := exec.CommandContext(ctx, tb.bash, "-c", script.String())
	cmd.Dir = tb.root
	cmd.Env = tb.environ(e, listen, vars)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 10 * time.Second
	return cmd
}

// environ is the process environment of e. Variables of the test's own
// environment that would change what lifeboat, helm or the AWS SDK do
// (LIFEBOAT_*, AWS_*, HELM_*, KUBECONFIG and the shell variables, which
// lifeboat reads as aws-node-termination-handler's) are left out.
func (tb *testbed) environ(e env, listen string, vars map[string]string) []string {
	var out []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		_, shellVar := vars[k]
		if shellVar || k == "KUBECONFIG" || k == "PATH" || strings.HasPrefix(k, "LIFEBOAT_") || strings.HasPrefix(k, "AWS_") || strings.HasPrefix(k, "HELM_") {
			continue
		}
		out = append(out, kv)
	}
	out = append(out, "PATH="+tb.bin+string(os.PathListSeparator)+os.Getenv("PATH"),
		"HELM_CACHE_HOME="+filepath.Join(tb.helmDir, "cache"),
		"HELM_CONFIG_HOME="+filepath.Join(tb.helmDir, "config"),
		"HELM_DATA_HOME="+filepath.Join(tb.helmDir, "data"))
	if e == bare {
		return out
	}
	out = append(out, "KUBECONFIG="+tb.kube.Kubeconfig)
	if listen != "" {
		out = append(out, "LIFEBOAT_LISTEN="+listen)
	}
	switch e {
	case aws, queuePod:
		m := tb.moto.Endpoint
		out = append(out, testenv.AWSEnv()...)
		out = append(out, "LIFEBOAT_AWS_ENDPOINT=sqs="+m+",ec2="+m+",eventbridge="+m+",sts="+m+",autoscaling="+tb.sim.Endpoint())
		if e == queuePod {
			out = append(out, "LIFEBOAT_QUEUE_URL="+tb.queueURL, "LIFEBOAT_CLUSTER_NAME="+clusterName)
		}
	case imdsPod:
		out = append(out, "LIFEBOAT_IMDS_ENDPOINT="+tb.imds.URL)
	}
	return out
}

// run runs line to its end and returns its output and exit status.
func (tb *testbed) run(t *testing.T, ctx context.Context, e env, listen, line string) (string, int) {
	t.Helper()
	cmd := tb.command(ctx, e, listen, line)
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return string(out), 0
	case errors.As(err, &ee) && ctx.Err() == nil:
		return string(out), ee.ExitCode()
	default:
		t.Fatalf("running %q: %v\n%s", line, err, out)
		return "", -1
	}
}

// serve starts line, a server, waits until its /readyz at listen answers
// 200, and stops it.
func (tb *testbed) serve(t *testing.T, ctx context.Context, e env, listen, line string) {
	t.Helper()
	cmd := tb.command(ctx, e, listen, line)
	logPath := filepath.Join(t.TempDir(), "output")
	f, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cmd.Stdout, cmd.Stderr = f, f
	output := func() string {
		b, _ := os.ReadFile(logPath)
		return string(b)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	stop := func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-done
		}
	}
	client := &http.Client{Timeout: 2 * time.Second}
	deadline := time.Now().Add(time.Minute)
	last := "no answer"
	for {
		select {
		case err := <-done:
			t.Fatalf("exited (%v) before /readyz answered 200; output:\n%s", err, output())
		case <-time.After(200 * time.Millisecond):
		}
		if resp, err := client.Get("http://" + listen + "/readyz"); err == nil {
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				t.Logf("/readyz: %d %s", resp.StatusCode, bytes.TrimSpace(body))
				stop()
				return
			}
			last = fmt.Sprintf("%d %s", resp.StatusCode, bytes.TrimSpace(body))
		}
		if time.Now().After(deadline) {
			stop()
			t.Fatalf("/readyz did not answer 200 within a minute (last: %s); output:\n%s", last, output())
		}
	}
}
