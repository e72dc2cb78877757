package bench

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// heapAtPeak reads lifeboat's RSS at once and every interval until stop
// closes and, each time it is the highest yet, takes its heap profile (as
// of its last garbage collection, none forced: the burst's timing stays its
// own); it writes the last one taken to path: where the burst's peak memory
// goes (a burst shorter than interval still gets its first sample).
// Errors are logged, not fatal (the profile is an aid, not a figure).
func heapAtPeak(b *testing.B, addr string, pid int, interval time.Duration, stop <-chan struct{}, path string) {
	var best []byte
	var bestRSS float64
	sample := func() {
		rss, _, err := readMemory(pid)
		if err != nil || rss <= bestRSS {
			return
		}
		data, err := fetchProfile(fmt.Sprintf("http://%s/debug/pprof/heap", addr))
		if err != nil {
			b.Logf("heap at peak: %v", err)
			return
		}
		best, bestRSS = data, rss
	}
	tick := time.NewTicker(interval)
	defer tick.Stop()
	sample()
	for {
		select {
		case <-stop:
			if best == nil {
				b.Logf("heap at peak: no profile taken")
				return
			}
			if err := writeProfile(path, best); err != nil {
				b.Logf("heap at peak: %v", err)
				return
			}
			b.Logf("heap profile of lifeboat at its highest sampled RSS (%.1f MiB) written to %s", bestRSS/1024, path)
			return
		case <-tick.C:
			sample()
		}
	}
}

// fetchProfile reads one profile from a pprof URL.
func fetchProfile(url string) ([]byte, error) {
	resp, err := http.Get(url)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("status %d: %s", resp.StatusCode, strings.TrimSpace(string(data[:min(len(data), 200)])))
	}
	return data, nil
}

// writeProfile writes a profile to path, making its directory.
func writeProfile(path string, data []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, data, 0o644)
}
