//go:build pprof

package main

// A build with -tags pprof serves net/http/pprof on LIFEBOAT_PPROF_ADDR, for
// profiling lifeboat under load (the bench harness's LIFEBOAT_BENCH_PROFILE).
// The release build does not link it.

import (
	"net/http"
	_ "net/http/pprof" // registers /debug/pprof on the default mux
	"os"
)

func init() {
	if addr := os.Getenv("LIFEBOAT_PPROF_ADDR"); addr != "" {
		go func() { _ = http.ListenAndServe(addr, nil) }()
	}
}
