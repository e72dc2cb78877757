package main

import (
	"fmt"
	"strings"
	"time"
)

// stepPodCutOff: lifeboat reported the pod cut off (still on the node when
// its drain ended: DeadlinePassed, NodeGone, Drained with deletions at the
// deadline), named, with why, in its log line's cutOff.
const stepPodCutOff = "pod-cut-off"

// cutOffFacts puts each pod lifeboat reported cut off on the pod's own
// row; entries are "namespace/name: cause (detail)" (package drainreport).
func (d *demo) cutOffFacts(at time.Time, reason string, cutOff []string) {
	for _, c := range cutOff {
		key, why, _ := strings.Cut(c, ": ")
		ns, name, ok := strings.Cut(key, "/")
		if !ok {
			continue
		}
		cause, _, _ := strings.Cut(why, " (")
		d.tl.add(Fact{At: at, Scene: d.tl.sceneOfNamespace(ns), Source: srcLifeboat, Step: stepPodCutOff, Lane: "pod " + name,
			Label: "cut off: " + cause, Text: fmt.Sprintf("%s cut off (%s): %s", name, reason, why)})
	}
}
