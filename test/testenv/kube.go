package testenv

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"

	authenticationv1 "k8s.io/api/authentication/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
)

// Options select the parts of a Kubernetes test environment. The zero value
// starts everything: etcd, kube-apiserver, kube-controller-manager,
// kube-scheduler and kwok.
type Options struct {
	// NoControllerManager leaves out kube-controller-manager. Without it no
	// PodDisruptionBudget gets a status (every eviction it covers answers
	// 429), no namespace gets its default ServiceAccount (so Namespace and
	// CreatePod fail), and nodes keep the not-ready taint.
	NoControllerManager bool
	// NoScheduler leaves out kube-scheduler: pods without spec.nodeName stay
	// Pending. CreatePod binds pods directly and does not need it.
	NoScheduler bool
	// NoKwok leaves out kwok: nodes never become Ready and pods never run.
	NoKwok bool
	// Controllers overrides the controllers kube-controller-manager runs
	// (its --controllers flag); nil means DefaultControllers.
	Controllers []string
	// NodeLeaseDuration is how long kwok's node Leases last; kwok renews
	// each at a quarter of it. Zero means 40 s, the kubelet's default, with
	// kube-controller-manager's own --node-monitor-grace-period (50 s).
	// Otherwise that grace period is 5/4 of it, the same ratio. A fleet of
	// thousands of nodes needs longer Leases on two cores: at 40 s, 5,000
	// nodes renew 500 Leases a second, and those that fall behind the grace
	// period while the API server is busy get their pods marked not Ready.
	NodeLeaseDuration time.Duration
	// APIServerArgs are appended to kube-apiserver's flags (later flags win).
	APIServerArgs []string
	// Dir holds data, keys and logs. Empty means a fresh temporary directory
	// that Close removes; a given Dir is kept.
	Dir string

	// pickPort hands out the components' ports (nil: FreePort); a test
	// takes one itself to provoke the race StartOnFreePorts survives.
	pickPort PortPicker
}

// DefaultControllers are the kube-controller-manager controllers an Env runs.
var DefaultControllers = []string{
	"disruption-controller",     // PDB status; without it every covered eviction answers 429
	"node-lifecycle-controller", // not-ready/unreachable taints, node health from leases
	"taint-eviction-controller", // NoExecute taints evict pods, as in a real cluster
	"replicaset-controller",
	"deployment-controller",
	"daemonset-controller",
	"statefulset-controller",
	"namespace-controller",
	"garbage-collector-controller",
	"serviceaccount-controller",
	"pod-garbage-collector-controller",
	"clusterrole-aggregation-controller", // fills admin/edit/view
	"root-ca-certificate-publisher-controller",
}

// Env is a running Kubernetes control plane with kwok nodes. It is safe for
// concurrent use by parallel tests; each test should work in its own
// namespace (Namespace) and on its own nodes (CreateNode).
type Env struct {
	// Config is an admin (system:masters) client configuration.
	Config *rest.Config
	// Client is a clientset built from Config.
	Client kubernetes.Interface
	// URL is the kube-apiserver address, https://127.0.0.1:PORT.
	URL string
	// CA is the PEM certificate of the CA that signed the apiserver's
	// serving certificate; CAFile holds the same bytes.
	CA     []byte
	CAFile string
	// Kubeconfig is the path of an admin kubeconfig file, for running
	// lifeboat (or kubectl) as a separate process.
	Kubeconfig string
	// Dir holds the data, keys, kubeconfigs and component logs.
	Dir string
	// StartupTime is how long New took.
	StartupTime time.Duration

	opts    Options
	ownDir  bool
	mu      sync.Mutex
	procs   []*Process // in start order, failed start attempts included
	kwokCfg string
}

// addProc records a started process, so that Close stops it.
func (e *Env) addProc(p *Process) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.procs = append(e.procs, p)
}

// Start starts an Env for one test: it is closed by t's cleanup, and the
// component logs are printed when t fails. A missing component fails t.
func Start(t testing.TB, opts Options) *Env {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	env, err := New(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(env.Close)
	dumpOnFailure(t, env.Processes()...)
	t.Logf("testenv: control plane up in %v (dir %s)", env.StartupTime.Round(time.Millisecond), env.Dir)
	return env
}

// New starts the components selected by opts on free loopback ports and
// waits until they serve. On error nothing is left running. The caller must
// call Close.
func New(ctx context.Context, opts Options) (_ *Env, err error) {
	start := time.Now()
	bins := map[string]string{}
	need := []string{"etcd", "kube-apiserver"}
	if !opts.NoControllerManager {
		need = append(need, "kube-controller-manager")
	}
	if !opts.NoScheduler {
		need = append(need, "kube-scheduler")
	}
	if !opts.NoKwok {
		need = append(need, "kwok")
	}
	var missing []error
	for _, name := range need {
		p, err := BinPath(name)
		if err != nil {
			missing = append(missing, err)
		}
		bins[name] = p
	}
	if err := errors.Join(missing...); err != nil {
		return nil, err
	}

	e := &Env{opts: opts, Dir: opts.Dir}
	if e.Dir == "" {
		d, err := os.MkdirTemp("", "lifeboat-testenv-")
		if err != nil {
			return nil, fmt.Errorf("creating testenv directory: %w", err)
		}
		e.Dir, e.ownDir = d, true
	} else if err := os.MkdirAll(e.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("creating testenv directory: %w", err)
	}
	defer func() {
		if err != nil {
			e.Close()
		}
	}()

	etcdURL, err := e.startEtcd(ctx, bins["etcd"])
	if err != nil {
		return nil, err
	}
	creds, err := e.writeCredentials()
	if err != nil {
		return nil, err
	}
	if err := e.startAPIServer(ctx, bins["kube-apiserver"], etcdURL, creds); err != nil {
		return nil, err
	}

	// The rest only needs the apiserver: start it all at once.
	var g errgroup.Group
	if !opts.NoControllerManager {
		g.Go(func() error { return e.startControllerManager(ctx, bins["kube-controller-manager"], creds) })
	}
	if !opts.NoScheduler {
		g.Go(func() error { return e.startScheduler(ctx, bins["kube-scheduler"], creds) })
	}
	if !opts.NoKwok {
		g.Go(func() error { return e.startKwok(bins["kwok"], creds) })
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	if !opts.NoControllerManager {
		// The controllers are running once the default namespace has its
		// ServiceAccount.
		if err := e.waitServiceAccount(ctx, metav1.NamespaceDefault, "default"); err != nil {
			return nil, err
		}
	}
	e.StartupTime = time.Since(start)
	return e, nil
}

// credentials are the bearer tokens of the components, by user name.
type credentials struct {
	admin, controllerManager, scheduler, kwok string
}

func (e *Env) writeCredentials() (*credentials, error) {
	var c credentials
	for _, tok := range []*string{&c.admin, &c.controllerManager, &c.scheduler, &c.kwok} {
		t, err := randomToken()
		if err != nil {
			return nil, err
		}
		*tok = t
	}
	// All components are cluster admins: kube-controller-manager runs
	// without per-controller service-account credentials.
	lines := []string{
		c.admin + `,admin,admin,"system:masters"`,
		c.controllerManager + `,system:kube-controller-manager,kcm,"system:masters"`,
		c.scheduler + `,system:kube-scheduler,scheduler,"system:masters"`,
		c.kwok + `,kwok,kwok,"system:masters"`,
	}
	if err := os.WriteFile(filepath.Join(e.Dir, "tokens.csv"), []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		return nil, fmt.Errorf("writing token file: %w", err)
	}
	return &c, nil
}

func (e *Env) startEtcd(ctx context.Context, bin string) (clientURL string, err error) {
	_, _, err = StartOnFreePorts(ctx, "etcd", 2, e.opts.pickPort, func(ctx context.Context, attempt int, ports []int) (*Process, error) {
		clientURL = fmt.Sprintf("http://127.0.0.1:%d", ports[0])
		return e.runEtcd(ctx, bin, attempt, clientURL, fmt.Sprintf("http://127.0.0.1:%d", ports[1]))
	})
	return clientURL, err
}

func (e *Env) runEtcd(ctx context.Context, bin string, attempt int, clientURL, peerURL string) (*Process, error) {
	p, err := startAttempt("etcd", attempt, bin, []string{
		"--name=testenv",
		"--data-dir=" + filepath.Join(e.Dir, fmt.Sprintf("etcd-%d", attempt)), // a failed attempt may have written its own
		"--listen-client-urls=" + clientURL,
		"--advertise-client-urls=" + clientURL,
		"--listen-peer-urls=" + peerURL,
		"--initial-advertise-peer-urls=" + peerURL,
		"--initial-cluster=testenv=" + peerURL,
		"--unsafe-no-fsync",
		"--log-level=warn",
	}, nil, e.Dir)
	if err != nil {
		return nil, err
	}
	e.addProc(p)
	if err := WaitHTTP(ctx, p, nil, clientURL+"/health"); err != nil {
		return p, fmt.Errorf("etcd did not start: %w", err)
	}
	return p, nil
}

func (e *Env) startAPIServer(ctx context.Context, bin, etcdURL string, creds *credentials) error {
	keys, err := newPKI(e.Dir)
	if err != nil {
		return err
	}
	_, _, err = StartOnFreePorts(ctx, "kube-apiserver", 1, e.opts.pickPort, func(ctx context.Context, attempt int, ports []int) (*Process, error) {
		return e.runAPIServer(ctx, bin, attempt, ports[0], etcdURL, keys, creds)
	})
	return err
}

func (e *Env) runAPIServer(ctx context.Context, bin string, attempt, port int, etcdURL string, keys *pki, creds *credentials) (*Process, error) {
	e.URL = fmt.Sprintf("https://127.0.0.1:%d", port)
	e.CA, e.CAFile = keys.CACert, keys.CAFile
	args := []string{
		"--etcd-servers=" + etcdURL,
		"--bind-address=127.0.0.1",
		"--advertise-address=127.0.0.1",
		fmt.Sprintf("--secure-port=%d", port),
		"--tls-cert-file=" + keys.CertFile,
		"--tls-private-key-file=" + keys.KeyFile,
		"--token-auth-file=" + filepath.Join(e.Dir, "tokens.csv"),
		// No client certificates are issued; the CA only makes the apiserver
		// publish extension-apiserver-authentication, which the controller
		// manager and scheduler look up.
		"--client-ca-file=" + keys.CAFile,
		"--authorization-mode=RBAC",
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file=" + keys.SAPub,
		"--service-account-signing-key-file=" + keys.SAKey,
		"--service-cluster-ip-range=10.96.0.0/16",
		"--allow-privileged=true",
		"--profiling=false",
		"--v=1",
	}
	args = append(args, e.opts.APIServerArgs...)
	p, err := startAttempt("kube-apiserver", attempt, bin, args, nil, e.Dir)
	if err != nil {
		return nil, err
	}
	e.addProc(p)

	e.Config = e.restConfig(creds.admin)
	e.Client, err = kubernetes.NewForConfig(e.Config)
	if err != nil {
		return p, fmt.Errorf("building admin client: %w", err)
	}
	if e.Kubeconfig, err = e.writeKubeconfig("admin", creds.admin); err != nil {
		return p, err
	}
	// /readyz answers 200 once etcd is reachable and the RBAC bootstrap
	// policy, priority classes and system namespaces exist.
	err = wait.PollUntilContextCancel(ctx, 50*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		if exited, err := p.Exited(); exited {
			return false, fmt.Errorf("kube-apiserver exited while starting (%v); log tail:\n%s", err, p.Tail(30))
		}
		_, err := e.Client.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		return err == nil, nil
	})
	if err != nil {
		return p, fmt.Errorf("kube-apiserver did not become ready: %w", err)
	}
	return p, nil
}

func (e *Env) startControllerManager(ctx context.Context, bin string, creds *credentials) error {
	kubeconfig, err := e.writeKubeconfig("kube-controller-manager", creds.controllerManager)
	if err != nil {
		return err
	}
	controllers := e.opts.Controllers
	if controllers == nil {
		controllers = DefaultControllers
	}
	args := []string{
		"--kubeconfig=" + kubeconfig,
		"--authentication-kubeconfig=" + kubeconfig,
		"--authorization-kubeconfig=" + kubeconfig,
		"--leader-elect=false",
		"--bind-address=127.0.0.1",
		"--controllers=" + strings.Join(controllers, ","),
		"--root-ca-file=" + e.CAFile,
		"--use-service-account-credentials=false",
		"--profiling=false",
		"--v=1",
	}
	if d := e.opts.NodeLeaseDuration; d > 0 {
		args = append(args, "--node-monitor-grace-period="+(d*5/4).String())
	}
	return e.startSecure(ctx, "kube-controller-manager", bin, args)
}

func (e *Env) startScheduler(ctx context.Context, bin string, creds *credentials) error {
	kubeconfig, err := e.writeKubeconfig("kube-scheduler", creds.scheduler)
	if err != nil {
		return err
	}
	return e.startSecure(ctx, "kube-scheduler", bin, []string{
		"--kubeconfig=" + kubeconfig,
		"--authentication-kubeconfig=" + kubeconfig,
		"--authorization-kubeconfig=" + kubeconfig,
		"--leader-elect=false",
		"--bind-address=127.0.0.1",
		"--profiling=false",
		"--v=1",
	})
}

// startSecure starts a component that serves /healthz on --secure-port (a
// free port) and waits until it answers.
func (e *Env) startSecure(ctx context.Context, name, bin string, args []string) error {
	insecure := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // self-signed component on loopback
	}}
	_, _, err := StartOnFreePorts(ctx, name, 1, e.opts.pickPort, func(ctx context.Context, attempt int, ports []int) (*Process, error) {
		p, err := startAttempt(name, attempt, bin, append(args, fmt.Sprintf("--secure-port=%d", ports[0])), nil, e.Dir)
		if err != nil {
			return nil, err
		}
		e.addProc(p)
		if err := WaitHTTP(ctx, p, insecure, fmt.Sprintf("https://127.0.0.1:%d/healthz", ports[0])); err != nil {
			return p, fmt.Errorf("%s did not start: %w", name, err)
		}
		return p, nil
	})
	return err
}

// restConfig returns a client configuration for a bearer token.
func (e *Env) restConfig(token string) *rest.Config {
	return &rest.Config{
		Host:            e.URL,
		BearerToken:     token,
		TLSClientConfig: rest.TLSClientConfig{CAData: e.CA},
		QPS:             200,
		Burst:           400,
		UserAgent:       "lifeboat-testenv",
	}
}

// writeKubeconfig writes a kubeconfig for token into Dir and returns its path.
func (e *Env) writeKubeconfig(name, token string) (string, error) {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["testenv"] = &clientcmdapi.Cluster{Server: e.URL, CertificateAuthorityData: e.CA}
	cfg.AuthInfos[name] = &clientcmdapi.AuthInfo{Token: token}
	cfg.Contexts["testenv"] = &clientcmdapi.Context{Cluster: "testenv", AuthInfo: name}
	cfg.CurrentContext = "testenv"
	path := filepath.Join(e.Dir, name+".kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		return "", fmt.Errorf("writing kubeconfig %s: %w", path, err)
	}
	return path, nil
}

// Close stops every component (SIGKILL: the data is thrown away) and removes
// the directory New created. It is safe to call more than once.
func (e *Env) Close() {
	procs := e.Processes()
	for i := len(procs) - 1; i >= 0; i-- {
		procs[i].Kill()
	}
	if e.ownDir {
		_ = os.RemoveAll(e.Dir)
	}
}

// Processes returns the running components, in start order.
func (e *Env) Processes() []*Process {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]*Process(nil), e.procs...)
}

// DumpLogs writes the last lines of each component's log to w; TestMain
// calls it when the package's tests failed.
func (e *Env) DumpLogs(w io.Writer, lines int) {
	for _, p := range e.Processes() {
		fmt.Fprintf(w, "---- %s log (%s), last %d lines ----\n%s\n", p.Name, p.LogPath, lines, p.Tail(lines))
	}
}

// TokenFor returns a bearer token for a ServiceAccount (TokenRequest API,
// valid one hour), so a test can act as it under RBAC.
func (e *Env) TokenFor(ctx context.Context, namespace, serviceAccount string) (string, error) {
	tr, err := e.Client.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, serviceAccount, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)},
	}, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("requesting token for %s/%s: %w", namespace, serviceAccount, err)
	}
	return tr.Status.Token, nil
}

// RESTConfigFor returns a client configuration that authenticates as a
// ServiceAccount.
func (e *Env) RESTConfigFor(ctx context.Context, namespace, serviceAccount string) (*rest.Config, error) {
	tok, err := e.TokenFor(ctx, namespace, serviceAccount)
	if err != nil {
		return nil, err
	}
	return e.restConfig(tok), nil
}

// KubeconfigFor writes a kubeconfig that authenticates as a ServiceAccount
// and returns its path, for running lifeboat as a separate process.
func (e *Env) KubeconfigFor(ctx context.Context, namespace, serviceAccount string) (string, error) {
	tok, err := e.TokenFor(ctx, namespace, serviceAccount)
	if err != nil {
		return "", err
	}
	return e.writeKubeconfig(fmt.Sprintf("sa-%s-%s-%s", namespace, serviceAccount, tok[len(tok)-8:]), tok)
}

// waitServiceAccount waits until namespace holds the ServiceAccount name.
func (e *Env) waitServiceAccount(ctx context.Context, namespace, name string) error {
	err := wait.PollUntilContextCancel(ctx, 50*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		_, err := e.Client.CoreV1().ServiceAccounts(namespace).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return err == nil, err
	})
	if err != nil {
		return fmt.Errorf("waiting for ServiceAccount %s/%s (created by kube-controller-manager): %w", namespace, name, err)
	}
	return nil
}
