package testenv

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"
)

// stealer is a PortPicker that, for the components it is told to rob,
// listens on the first port it hands out to each of them before returning
// it: the race of FreePort (another process binds the port between
// FreePort's close and the component's bind), every time.
type stealer struct {
	t      *testing.T
	rob    []string
	mu     sync.Mutex
	stolen map[string]int // component -> the port taken from it
	picks  map[string]int // component -> ports handed out
}

func newStealer(t *testing.T, rob ...string) *stealer {
	return &stealer{t: t, rob: rob, stolen: map[string]int{}, picks: map[string]int{}}
}

func (s *stealer) pick(who string) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.picks[who]++
	if _, done := s.stolen[who]; done || !slices.Contains(s.rob, who) {
		return FreePort()
	}
	// The stolen port is one the stealer holds already: taking a port
	// FreePort found free raced with the other processes of a parallel CI
	// (afdfcfc's CI: "taking port 36389: address already in use").
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("taking a port: %w", err)
	}
	s.t.Cleanup(func() { l.Close() })
	port := l.Addr().(*net.TCPAddr).Port
	s.stolen[who] = port
	return port, nil
}

// check fails t unless every robbed component was given its ports again.
func (s *stealer) check(t *testing.T, perStart map[string]int) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, who := range s.rob {
		if _, ok := s.stolen[who]; !ok {
			t.Errorf("%s was never given a port to steal", who)
		}
		if got, want := s.picks[who], 2*perStart[who]; got != want {
			t.Errorf("%s was handed %d ports, want %d (one start, one retry)", who, got, want)
		}
	}
}

// TestStartSurvivesATakenPort (issue 22, defect 13): every component the
// testbed starts on a free port still starts when another process binds
// that port between FreePort and the component's own bind. Without the
// retry (portAttempts 1) each start fails with "address already in use".
func TestStartSurvivesATakenPort(t *testing.T) {
	t.Run("etcd, kube-apiserver, kube-controller-manager, kube-scheduler", func(t *testing.T) {
		s := newStealer(t, "etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler")
		env := Start(t, Options{NoKwok: true, pickPort: s.pick})
		s.check(t, map[string]int{"etcd": 2, "kube-apiserver": 1, "kube-controller-manager": 1, "kube-scheduler": 1})
		if port := fmt.Sprintf(":%d", s.stolen["kube-apiserver"]); env.URL == "https://127.0.0.1"+port {
			t.Errorf("the Env reports the stolen address %s", env.URL)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := env.Client.Discovery().ServerVersion(); err != nil {
			t.Errorf("the API server does not answer at %s: %v", env.URL, err)
		}
		if err := env.waitServiceAccount(ctx, "kube-system", "default"); err != nil {
			t.Errorf("kube-controller-manager does not work: %v", err)
		}
	})
	t.Run("moto", func(t *testing.T) {
		s := newStealer(t, "moto")
		m, err := startMoto(t.TempDir(), s.pick)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(m.Proc.Stop)
		s.check(t, map[string]int{"moto": 1})
		answers(t, m.Endpoint+"/moto-api/")
	})
	t.Run("ec2-metadata-mock", func(t *testing.T) {
		s := newStealer(t, "ec2-metadata-mock")
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		m, err := NewIMDS(ctx, t.TempDir(), IMDSOptions{pickPort: s.pick})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(m.Close)
		s.check(t, map[string]int{"ec2-metadata-mock": 1})
		answers(t, m.URL+"/latest/meta-data/instance-id")
	})
	t.Run("lifeboat", func(t *testing.T) {
		dir := t.TempDir()
		bin, err := BuildLifeboat(dir)
		if err != nil {
			t.Fatal(err)
		}
		// Nothing answers at port 1: lifeboat serves /healthz all the same.
		kubeconfig := filepath.Join(dir, "kubeconfig")
		if err := os.WriteFile(kubeconfig, []byte("apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: 'http://127.0.0.1:1'}}]\n"+
			"users: [{name: u, user: {token: t}}]\ncontexts: [{name: c, context: {cluster: c, user: u}}]\ncurrent-context: c\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		s := newStealer(t, "lifeboat")
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		l, err := StartLifeboat(ctx, LifeboatOptions{Bin: bin, Dir: dir, pickPort: s.pick,
			Args: []string{"--queue-url", "http://127.0.0.1:1/123456789012/q", "--kubeconfig", kubeconfig, "--leader-elect=false"}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(l.Stop)
		s.check(t, map[string]int{"lifeboat": 1})
		answers(t, l.URL()+"/healthz")
		if n := l.Runs(); n != 1 {
			t.Errorf("Runs() = %d after one start, want 1 (an attempt that could not bind is no run)", n)
		}
	})
}

// answers fails t unless url answers 200.
func answers(t *testing.T, url string) {
	t.Helper()
	resp, err := (&http.Client{Timeout: 5 * time.Second}).Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("GET %s: %d", url, resp.StatusCode)
	}
}
