//go:build !imdsonly

package main

import (
	"k8s.io/client-go/kubernetes"

	"lifeboat.dev/lifeboat/internal/drain"
	"lifeboat.dev/lifeboat/internal/replace"
)

// newReplacer is the drain's replacement first (--replacement-first, queue
// mode), through cs, the clientset on the main client's configuration (its
// rate limiter and write fence); nil when off.
func newReplacer(a *app, cs kubernetes.Interface) drain.Replacer {
	if !a.cfg.ReplacementFirst {
		return nil
	}
	return replace.New(replace.NewApps(cs.AppsV1()), a.kube.main, a.clock, a.log, replace.Options{Recorder: a.recorder,
		Count: func(result string) { a.metrics.Replacements.WithLabelValues(result).Inc() }})
}
