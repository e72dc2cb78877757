package prom

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	promapi "github.com/prometheus/client_golang/api"
	promv1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/model"
	"sigs.k8s.io/yaml"

	"lifeboat.dev/lifeboat/test/testenv"
)

// scrapeInterval is the test Prometheus' scrape and rule evaluation
// interval (time is not scaled otherwise: the alerts' ranges and for
// durations are the real ones).
const scrapeInterval = time.Second

// scrapeJob is one scrape job of the test Prometheus: its job label and
// its targets (host:port).
type scrapeJob struct {
	name    string
	targets []string
}

// prometheus is a Prometheus server (Debian's package) run by a test: its
// own configuration, rule files and storage in a temporary directory, on a
// free loopback port. It is stopped in the test's cleanup, failed or not.
type prometheus struct {
	proc *testenv.Process
	url  string
	api  promv1.API
}

// startPrometheus starts Prometheus scraping jobs every scrapeInterval and
// evaluating ruleFiles as often, and waits until it is ready. A missing
// prometheus binary fails the test, naming the package.
func startPrometheus(ctx context.Context, t *testing.T, jobs []scrapeJob, ruleFiles []string) *prometheus {
	t.Helper()
	bin, err := exec.LookPath("prometheus")
	if err != nil {
		t.Fatalf("prometheus is not on PATH: install Debian's package (make deps does as root; or sudo apt-get install -y --no-install-recommends prometheus): %v", err)
	}
	dir := t.TempDir()
	cfg := map[string]any{
		"global": map[string]any{
			"scrape_interval":     scrapeInterval.String(),
			"scrape_timeout":      scrapeInterval.String(),
			"evaluation_interval": scrapeInterval.String(),
		},
		"rule_files": ruleFiles,
	}
	var scrapes []map[string]any
	for _, j := range jobs {
		scrapes = append(scrapes, map[string]any{"job_name": j.name, "static_configs": []map[string]any{{"targets": j.targets}}})
	}
	cfg["scrape_configs"] = scrapes
	b, err := yaml.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	cfgPath := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(cfgPath, b, 0o644); err != nil {
		t.Fatal(err)
	}
	var url string
	proc, _, err := testenv.StartOnFreePorts(ctx, "prometheus", 1, nil, func(ctx context.Context, attempt int, ports []int) (*testenv.Process, error) {
		url = fmt.Sprintf("http://127.0.0.1:%d", ports[0])
		p, err := testenv.StartProcess(fmt.Sprintf("prometheus-%d", attempt), bin, []string{
			"--config.file=" + cfgPath,
			"--storage.tsdb.path=" + filepath.Join(dir, fmt.Sprintf("data-%d", attempt)),
			"--web.listen-address=" + fmt.Sprintf("127.0.0.1:%d", ports[0]),
			"--log.level=info",
		}, nil, dir)
		if err != nil {
			return nil, err
		}
		return p, testenv.WaitHTTP(ctx, p, nil, url+"/-/ready") // 503 until the storage is open
	})
	if proc != nil {
		t.Cleanup(func() {
			proc.Stop()
			if t.Failed() {
				t.Logf("---- prometheus log, last 30 lines ----\n%s", proc.Tail(30))
			}
		})
	}
	if err != nil {
		t.Fatalf("starting prometheus: %v", err)
	}
	client, err := promapi.NewClient(promapi.Config{Address: url})
	if err != nil {
		t.Fatal(err)
	}
	return &prometheus{proc: proc, url: url, api: promv1.NewAPI(client)}
}

// waitScraped waits until every target has been scraped successfully at
// least twice since after, so that the counters' starting values are
// recorded before the scenario moves them.
func (p *prometheus) waitScraped(ctx context.Context, t *testing.T, after time.Time, targets int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	var last string
	for {
		res, err := p.api.Targets(ctx)
		if err == nil {
			ok := 0
			var states []string
			for _, tg := range res.Active {
				states = append(states, fmt.Sprintf("%s %s %s %v", tg.ScrapePool, tg.ScrapeURL, tg.Health, tg.LastError))
				if tg.Health == promv1.HealthGood && tg.LastScrape.After(after.Add(scrapeInterval)) {
					ok++
				}
			}
			if ok == targets && len(res.Active) == targets {
				return
			}
			last = strings.Join(states, "; ")
		} else {
			last = err.Error()
		}
		if time.Now().After(deadline) {
			t.Fatalf("prometheus did not scrape the %d targets: %s", targets, last)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// query evaluates expr now and returns the instant vector.
func (p *prometheus) query(ctx context.Context, t *testing.T, expr string) model.Vector {
	t.Helper()
	v, warnings, _, err := p.api.Query(ctx, expr, time.Now())
	if err != nil {
		t.Fatalf("query %s: %v", expr, err)
	}
	if len(warnings) > 0 {
		t.Errorf("query %s: warnings %v", expr, warnings)
	}
	vec, ok := v.(model.Vector)
	if !ok {
		t.Fatalf("query %s: a %s, want a vector", expr, v.Type())
	}
	return vec
}
