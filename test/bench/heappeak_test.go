package bench

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// heapAtPeak samples lifeboat's heap profile (as of its last garbage
// collection, none forced: the burst's timing stays its own) and its RSS
// every interval until stop closes, and writes the profile taken at the
// highest RSS to path: where the burst's peak memory goes. Errors are
// logged, not fatal (the profile is an aid, not a figure).
func heapAtPeak(b *testing.B, addr string, pid int, interval time.Duration, stop <-chan struct{}, path string) {
	var best []byte
	var bestRSS float64
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-stop:
			if best == nil {
				b.Logf("heap at peak: no profile taken")
				return
			}
			err := os.MkdirAll(filepath.Dir(path), 0o755)
			if err == nil {
				err = os.WriteFile(path, best, 0o644)
			}
			if err != nil {
				b.Logf("heap at peak: %v", err)
				return
			}
			b.Logf("heap profile of lifeboat at its highest sampled RSS (%.1f MiB) written to %s", bestRSS/1024, path)
			return
		case <-tick.C:
		}
		data, err := fetchHeap(addr)
		if err != nil {
			b.Logf("heap at peak: %v", err)
			continue
		}
		if rss, _, err := readMemory(pid); err == nil && rss > bestRSS {
			best, bestRSS = data, rss
		}
	}
}

// fetchHeap reads one heap profile from a pprof endpoint.
func fetchHeap(addr string) ([]byte, error) {
	resp, err := http.Get(fmt.Sprintf("http://%s/debug/pprof/heap", addr))
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("heap profile: status %d", resp.StatusCode)
	}
	return data, nil
}
