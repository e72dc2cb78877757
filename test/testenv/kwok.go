package testenv

import (
	"bytes"
	"embed"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"time"
)

// stageFS holds the kwok Stages an Env applies: node initialization and
// heartbeat (with leases), pods Running and Ready at once, and pod deletion
// at the deadline or after ShutdownAnnotation (see stages/pod-delete.yaml).
//
//go:embed stages/*.yaml
var stageFS embed.FS

const (
	// KwokNodeAnnotation marks the nodes kwok manages; CreateNode sets it.
	KwokNodeAnnotation = "kwok.x-k8s.io/node"
	// ShutdownAnnotation on a pod says how many seconds (fractions allowed)
	// its shutdown really takes once its deletion started: kwok removes the
	// pod that long after the deletion, or at its deletion deadline if that
	// comes first. Without it a deleted pod lives until its deadline
	// (deletionTimestamp). Both ends can come up to 1 s early, since
	// deletionTimestamp has whole seconds. See stages/pod-delete.yaml.
	ShutdownAnnotation = "lifeboat.test/shutdown-seconds"
)

// kwokOptions is kwok's own configuration. podPlayStageParallelism: each
// real kubelet ends its own pods, in parallel with every other node's;
// kwok, one process playing every node, moves 4 pods through their stages
// at a time by default, so a 1,000-node burst's deletions queued behind
// each other, 4 per API round trip (docs/benchmarks.md, "Where a storm's
// time goes": evicted -> deleted 9-12 s at p50 while the API server was
// busy). 64 at a time keeps kwok from being the bound. kwok (v0.8.0)
// applies no defaults to a configuration it is given, so every option
// with one is written out, at its default but the one.
const kwokOptions = `apiVersion: config.kwok.x-k8s.io/v1alpha1
kind: KwokConfiguration
options:
  podPlayStageParallelism: 64
  nodePlayStageParallelism: 4
  nodeLeaseParallelism: 4
  podsOnNodeSyncParallelism: 1
  enablePodsOnNodeSyncListPager: true
  enablePodsOnNodeSyncStreamWatch: false
  enableDebuggingHandlers: true
  enableContentionProfiling: false
  enableProfilingHandler: true
  manageAllNodes: false
`

// kwokConfig is kwokOptions and the embedded Stages, one multi-document
// file.
func kwokConfig() ([]byte, error) {
	names, err := fs.Glob(stageFS, "stages/*.yaml")
	if err != nil {
		return nil, fmt.Errorf("listing kwok stages: %w", err)
	}
	sort.Strings(names)
	var buf bytes.Buffer
	buf.WriteString("---\n" + kwokOptions)
	for _, n := range names {
		b, err := stageFS.ReadFile(n)
		if err != nil {
			return nil, fmt.Errorf("reading kwok stage %s: %w", n, err)
		}
		buf.WriteString("---\n")
		buf.Write(b)
		if !bytes.HasSuffix(b, []byte("\n")) {
			buf.WriteByte('\n')
		}
	}
	return buf.Bytes(), nil
}

// nodeLeaseSeconds is the length of kwok's node Leases in seconds
// (Options.NodeLeaseDuration, 40 by default).
func (e *Env) nodeLeaseSeconds() int {
	if d := e.opts.NodeLeaseDuration; d > 0 {
		return int(max(d/time.Second, 1))
	}
	return 40
}

// startKwok starts kwok once for the Env: it manages the nodes annotated
// KwokNodeAnnotation=fake and the pods bound to them.
func (e *Env) startKwok(bin string, creds *credentials) error {
	kubeconfig, err := e.writeKubeconfig("kwok", creds.kwok)
	if err != nil {
		return err
	}
	cfg, err := kwokConfig()
	if err != nil {
		return err
	}
	e.kwokCfg = filepath.Join(e.Dir, "kwok.yaml")
	if err := os.WriteFile(e.kwokCfg, cfg, 0o644); err != nil {
		return fmt.Errorf("writing kwok config: %w", err)
	}
	home := filepath.Join(e.Dir, "kwok-home") // keep ~/.kwok/kwok.yaml out
	if err := os.MkdirAll(home, 0o755); err != nil {
		return fmt.Errorf("creating kwok home: %w", err)
	}
	p, err := StartProcess("kwok", bin, []string{
		"--config=" + e.kwokCfg,
		"--kubeconfig=" + kubeconfig,
		"--manage-all-nodes=false",
		"--manage-nodes-with-annotation-selector=" + KwokNodeAnnotation + "=fake",
		"--node-lease-duration-seconds=" + strconv.Itoa(e.nodeLeaseSeconds()),
		"--cidr=10.128.0.1/12",
		"--node-ip=10.127.0.1",
	}, []string{"HOME=" + home}, e.Dir)
	if err != nil {
		return err
	}
	e.addProc(p)
	return nil
}
