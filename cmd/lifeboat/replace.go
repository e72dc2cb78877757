//go:build !imdsonly

package main

import (
	"lifeboat.dev/lifeboat/internal/drain"
	"lifeboat.dev/lifeboat/internal/replace"
)

// newReplacer is the drain's replacement first (--replacement-first, queue
// mode), through the main client's configuration (its rate limiter and
// write fence); nil when off.
func newReplacer(a *app) (drain.Replacer, error) {
	if !a.cfg.ReplacementFirst {
		return nil, nil
	}
	apps, err := replace.NewREST(a.kube.mainConfig)
	if err != nil {
		return nil, err
	}
	return replace.New(apps, a.kube.main, a.clock, a.log, replace.Options{Recorder: a.recorder,
		Count: func(result string) { a.metrics.Replacements.WithLabelValues(result).Inc() }}), nil
}
