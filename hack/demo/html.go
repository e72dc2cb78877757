package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"html"
	"html/template"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// report is what the HTML timeline shows; it is also embedded as JSON
// (script#timeline-data) for tools and the test.
type report struct {
	Generated   time.Time     `json:"generated"`
	HookTimeout string        `json:"hookTimeout"`
	PodShutdown string        `json:"podShutdown"`
	BootDelay   string        `json:"bootDelay"`
	Error       string        `json:"error,omitempty"`
	Scenes      []*sceneState `json:"scenes"`
	Facts       []Fact        `json:"facts"`
}

func (t *timeline) report(cfg config, err error) report {
	t.mu.Lock()
	defer t.mu.Unlock()
	r := report{
		Generated: time.Now(), HookTimeout: cfg.HookTimeout.String(), PodShutdown: cfg.PodShutdown.String(), BootDelay: cfg.BootDelay.String(),
		Facts: append([]Fact(nil), t.facts...),
	}
	for _, s := range t.scenes {
		c := *s
		r.Scenes = append(r.Scenes, &c)
	}
	if err != nil {
		r.Error = err.Error()
	}
	slices.SortStableFunc(r.Facts, func(a, b Fact) int { return a.At.Compare(b.At) })
	return r
}

// writeHTML writes the timeline as one self-contained HTML file: inline
// CSS and SVG, no script but the data block, no external asset.
func writeHTML(path string, r report) error {
	data, err := json.Marshal(r) // escapes <, > and &: safe inside <script>
	if err != nil {
		return fmt.Errorf("encoding the timeline: %w", err)
	}
	type sceneView struct {
		Name    string
		Number  int
		Title   string
		Summary []string
		SVG     template.HTML
		Facts   []factView
		Open    bool
	}
	var scenes []sceneView
	for i, s := range r.Scenes {
		var facts []Fact
		for _, f := range r.Facts {
			if f.Scene == s.Name {
				facts = append(facts, f)
			}
		}
		v := sceneView{Name: s.Name, Number: i + 1, Title: s.Title, Summary: s.Summary, SVG: template.HTML(sceneSVG(s, facts))}
		for _, f := range facts {
			v.Facts = append(v.Facts, factView{Rel: fmt.Sprintf("%+.2fs", f.At.Sub(s.Start).Seconds()), Fact: f, Color: stepColor(f.Step)})
		}
		scenes = append(scenes, v)
	}
	var buf bytes.Buffer
	err = page.Execute(&buf, map[string]any{
		"Report": r, "Scenes": scenes, "Data": template.JS(data), "Legend": legend(),
		"Generated": r.Generated.UTC().Format("2006-01-02 15:04:05 UTC"),
	})
	if err != nil {
		return fmt.Errorf("rendering the timeline: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("writing the timeline: %w", err)
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		return fmt.Errorf("writing the timeline: %w", err)
	}
	return nil
}

type factView struct {
	Rel   string
	Fact  Fact
	Color string
}

var stepColors = map[string]string{
	stepSignal: "#d97706", stepInstance: "#64748b", stepAction: "#0369a1", stepHeartbeat: "#2563eb",
	stepCompleted: "#15803d", stepTimedOut: "#dc2626", stepReceived: "#7c3aed", stepDraining: "#7c3aed",
	stepDrained: "#15803d", stepLifecycleReport: "#15803d", stepDeadline: "#dc2626", stepFailed: "#dc2626", stepForecast: "#dc2626",
	stepEvent: "#7c3aed", stepRefused: "#dc2626", stepCordoned: "#ea580c", stepTainted: "#ea580c",
	stepUncordoned: "#0891b2", stepNodeJoined: "#0891b2", stepNodeReady: "#059669", stepNodeDeleted: "#475569",
	stepPodCreated: "#0891b2", stepPodScheduled: "#0891b2", stepPodReady: "#059669", stepEvicting: "#f59e0b",
	stepEvicted: "#16a34a", stepPreStopBegin: "#0d9488", stepPreStopEnd: "#0f766e", stepSIGTERM: "#b45309",
	stepExit: "#15803d", stepCutOff: "#dc2626", stepPodCutOff: "#dc2626", stepReplacing: "#7c3aed", stepReplaced: "#15803d",
}

func stepColor(step string) string {
	if c, ok := stepColors[step]; ok {
		return c
	}
	return "#64748b"
}

var laneColors = map[string]string{srcAWS: "#f59e0b", srcASG: "#0ea5e9", srcLifeboat: "#8b5cf6", srcNode: "#f97316", srcPod: "#10b981"}

type legendItem struct{ Step, Color string }

func legend() []legendItem {
	steps := []string{stepSignal, stepAction, stepReceived, stepCordoned, stepDraining, stepEvicting, stepRefused, stepEvicted,
		stepReplacing, stepReplaced, stepDrained, stepHeartbeat, stepCompleted, stepNodeJoined, stepNodeReady, stepPodReady, stepInstance,
		stepPreStopBegin, stepPreStopEnd, stepSIGTERM, stepExit, stepCutOff, stepPodCutOff}
	var out []legendItem
	for _, s := range steps {
		out = append(out, legendItem{s, stepColor(s)})
	}
	return out
}

// sourceOrder orders the lanes: AWS first, then the instance and its hooks,
// lifeboat, the node, the pods.
var sourceOrder = map[string]int{srcAWS: 0, srcASG: 1, srcLifeboat: 2, srcNode: 3, srcPod: 4}

// Geometry of a scene's SVG.
const (
	svgWidth   = 1120
	labelWidth = 290
	plotX      = labelWidth + 12
	plotWidth  = svgWidth - plotX - 100
	rowHeight  = 24
	axisHeight = 30
)

// sceneSVG draws one scene: a lane per object, a marker per fact (a tick
// for heartbeats), a bar from an object's first fact to its last.
func sceneSVG(s *sceneState, facts []Fact) string {
	type lane struct {
		name, source string
		facts        []Fact
	}
	var lanes []*lane
	byName := map[string]*lane{}
	for _, f := range facts {
		l, ok := byName[f.Lane]
		if !ok {
			l = &lane{name: f.Lane, source: f.Source}
			if (f.Source == srcLifeboat || f.Source == srcWorkload) && strings.HasPrefix(f.Lane, "pod ") {
				l.source = srcPod
			}
			byName[f.Lane] = l
			lanes = append(lanes, l)
		}
		l.facts = append(l.facts, f)
	}
	slices.SortStableFunc(lanes, func(a, b *lane) int { return sourceOrder[a.source] - sourceOrder[b.source] })

	end := s.End
	for _, f := range facts {
		if f.At.After(end) {
			end = f.At
		}
		if f.Until.After(end) {
			end = f.Until
		}
	}
	span := math.Max(end.Sub(s.Start).Seconds()*1.03, 1)
	x := func(at time.Time) float64 {
		return plotX + math.Max(0, at.Sub(s.Start).Seconds())/span*plotWidth
	}
	height := axisHeight + len(lanes)*rowHeight + 8

	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 %d %d" width="%d" height="%d" role="img" aria-label="%s">`,
		svgWidth, height, svgWidth, height, html.EscapeString(s.Title))
	b.WriteString(`<style>text { font: 12px ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; fill: #374151; } ` +
		`text.tick { font-size: 11px; fill: #6b7280; text-anchor: middle; } text.mark { font-size: 10px; fill: #4b5563; }</style>`)
	fmt.Fprintf(&b, `<rect width="%d" height="%d" fill="#fff"/>`, svgWidth, height)
	for i := range lanes {
		if i%2 == 0 {
			fmt.Fprintf(&b, `<rect x="0" y="%d" width="%d" height="%d" fill="#f6f7f9"/>`, axisHeight+i*rowHeight, svgWidth, rowHeight)
		}
	}
	step := tickStep(span)
	for t := 0.0; t <= span; t += step {
		px := plotX + t/span*plotWidth
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#d4d7dd" stroke-width="1"/>`, px, axisHeight-6, px, height-4)
		fmt.Fprintf(&b, `<text x="%.1f" y="%d" class="tick">+%gs</text>`, px, axisHeight-10, t)
	}
	for i, l := range lanes {
		y := axisHeight + i*rowHeight
		mid := y + rowHeight/2
		fmt.Fprintf(&b, `<g class="lane" data-lane="%s" data-source="%s">`, html.EscapeString(l.name), l.source)
		label := l.name
		if len([]rune(label)) > 40 {
			label = string([]rune(label)[:39]) + "…"
		}
		fmt.Fprintf(&b, `<text x="8" y="%d" class="lane-name">%s</text>`, mid+4, html.EscapeString(label))
		first, last := l.facts[0].At, l.facts[len(l.facts)-1].At
		// A bar is an object's life in the scene; the demo's own calls and
		// lifeboat's reports other than a drain are points in time.
		bar := l.source != srcAWS && (l.source != srcLifeboat || l.facts[0].Step == stepReceived)
		if w := x(last) - x(first); bar && w > 0.5 {
			fmt.Fprintf(&b, `<rect class="bar" x="%.1f" y="%d" width="%.1f" height="8" rx="4" fill="%s" opacity="0.35"/>`,
				x(first), mid-4, w, laneColors[l.source])
		}
		writeShutdown(&b, l.facts, x, mid)
		for _, f := range l.facts {
			if !f.Until.IsZero() { // the lifecycle action's timeout, as of this fact
				fmt.Fprintf(&b, `<g class="timeout"><title>%s</title><line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#dc2626" stroke-width="1.2" stroke-dasharray="3 2"/>`+
					`<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#dc2626" stroke-width="1.5"/></g>`,
					html.EscapeString(fmt.Sprintf("times out at %+.2fs unless heartbeated or completed", f.Until.Sub(s.Start).Seconds())),
					x(f.At), mid+8, x(f.Until), mid+8, x(f.Until), mid+4, x(f.Until), mid+11)
			}
		}
		labelEnd := -1.0
		for _, f := range l.facts {
			px := x(f.At)
			title := html.EscapeString(fmt.Sprintf("%+.2fs  %s: %s", f.At.Sub(s.Start).Seconds(), f.Step, f.Text))
			if f.Step == stepHeartbeat {
				fmt.Fprintf(&b, `<g class="fact" data-step="%s"><title>%s</title><rect x="%.1f" y="%d" width="3" height="16" fill="%s"/></g>`,
					f.Step, title, px-1.5, mid-8, stepColor(f.Step))
				continue
			}
			fmt.Fprintf(&b, `<g class="fact" data-step="%s" data-source="%s"><title>%s</title><circle cx="%.1f" cy="%d" r="5.5" fill="%s" stroke="#fff" stroke-width="1.5"/></g>`,
				f.Step, f.Source, title, px, mid, stepColor(f.Step))
			text := f.Label
			width := float64(len([]rune(text))) * 6.1
			if text == "" || px < labelEnd {
				continue
			}
			if px+8+width > svgWidth-4 { // no room on the right: left of the marker
				fmt.Fprintf(&b, `<text x="%.1f" y="%d" class="mark" text-anchor="end">%s</text>`, px-8, mid-3, html.EscapeString(text))
			} else {
				fmt.Fprintf(&b, `<text x="%.1f" y="%d" class="mark">%s</text>`, px+8, mid-3, html.EscapeString(text))
			}
			labelEnd = px + 8 + width
		}
		b.WriteString(`</g>`)
	}
	for _, d := range s.Deadlines {
		rel := d.At.Sub(s.Start).Seconds()
		title := html.EscapeString(fmt.Sprintf("%+.2fs  %s", rel, d.Label))
		if rel <= span {
			fmt.Fprintf(&b, `<g class="deadline"><title>%s</title><line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#dc2626" stroke-width="2"/>`+
				`<text x="%.1f" y="%d" class="mark" text-anchor="end" fill="#dc2626">%s</text></g>`,
				title, x(d.At), axisHeight-4, x(d.At), height-4, x(d.At)-4, axisHeight+10, html.EscapeString(d.Label))
			continue
		}
		// Beyond the scene: say when, at the right edge of the axis.
		fmt.Fprintf(&b, `<g class="deadline"><title>%s</title><text x="%d" y="%d" class="mark" text-anchor="end" fill="#dc2626">%s at +%.0fs →</text></g>`,
			title, svgWidth-4, axisHeight+10, html.EscapeString(d.Label), rel)
	}
	b.WriteString(`</svg>`)
	return b.String()
}

// writeShutdown draws a pod's shutdown: from the eviction (deletion
// started: preStop, then SIGTERM) until the pod is gone (its containers
// exited), the part of its life AWS's deadline must cover.
func writeShutdown(b *strings.Builder, facts []Fact, x func(time.Time) float64, mid int) {
	var from, to time.Time
	for _, f := range facts {
		switch {
		case f.Step == stepEvicting && from.IsZero():
			from = f.At
		case f.Step == stepEvicted:
			to = f.At
		}
	}
	if from.IsZero() || to.IsZero() || to.Before(from) {
		return
	}
	w := math.Max(x(to)-x(from), 2)
	fmt.Fprintf(b, `<g class="shutdown"><title>%s</title><rect x="%.1f" y="%d" width="%.1f" height="8" rx="2" fill="#047857"/>`,
		html.EscapeString(fmt.Sprintf("shutting down %.2fs: preStop, SIGTERM, exit", to.Sub(from).Seconds())), x(from), mid-4, w)
	if w > 240 {
		fmt.Fprintf(b, `<text x="%.1f" y="%d" class="mark" fill="#fff">preStop → SIGTERM → exit</text>`, x(from)+70, mid+3)
	}
	b.WriteString(`</g>`)
}

// tickStep picks 1, 2 or 5 × 10ⁿ seconds for about ten ticks.
func tickStep(span float64) float64 {
	raw := span / 10
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	for _, m := range []float64{1, 2, 5, 10} {
		if raw <= m*mag {
			return m * mag
		}
	}
	return 10 * mag
}

var page = template.Must(template.New("timeline").Parse(`<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>lifeboat demo timeline</title>
<style>
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; color: #1f2937; margin: 24px auto; max-width: 1160px; padding: 0 16px; }
h1 { font-size: 22px; margin-bottom: 4px; }
h2 { font-size: 17px; margin: 32px 0 6px; }
.meta { color: #6b7280; }
.error { background: #fee2e2; border: 1px solid #fca5a5; padding: 8px 12px; border-radius: 6px; }
ul.summary { margin: 4px 0 10px; padding-left: 20px; }
ul.summary li::marker { content: "✓  "; color: #15803d; }
svg { display: block; border: 1px solid #e5e7eb; border-radius: 6px; background: #fff; max-width: 100%; height: auto; }
.legend span { display: inline-block; margin: 0 12px 4px 0; font-size: 12px; }
.legend i { display: inline-block; width: 10px; height: 10px; border-radius: 50%; margin-right: 4px; vertical-align: -1px; }
table { border-collapse: collapse; font: 12px ui-monospace, SFMono-Regular, Menlo, monospace; margin-top: 6px; }
td { padding: 2px 10px 2px 0; vertical-align: top; }
td.rel { text-align: right; color: #6b7280; }
details { margin-top: 6px; }
</style>
</head>
<body>
<h1>lifeboat demo timeline</h1>
<p class="meta">Generated {{.Generated}} by <code>make demo</code>: the real lifeboat binary in queue mode against an embedded testbed
(kube-apiserver, etcd, kube-controller-manager, kube-scheduler, moto for SQS/EC2/EventBridge, the Auto Scaling simulator). The Spot scene's node
is real (a kubelet with its own containerd on this machine) and its pods are real processes; the other nodes are kwok's.
Time is scaled: lifecycle hooks time out after {{.Report.HookTimeout}} (AWS: 30 s at least), the scale-in pod needs {{.Report.PodShutdown}} to shut down,
a warm instance {{.Report.BootDelay}} to boot. Facts come from the cluster (nodes, pods, lifeboat's Events), the Auto Scaling simulator
(instances, lifecycle actions) and lifeboat's log (refused evictions). Hover a marker for details.</p>
{{if .Report.Error}}<p class="error">The run did not finish: {{.Report.Error}}</p>{{end}}
<p class="legend">{{range .Legend}}<span><i style="background:{{.Color}}"></i>{{.Step}}</span>{{end}}</p>
<p class="legend">Each row is one object on one time axis (seconds since the scene began). A light bar is an object's life in the scene;
a <b style="color:#047857">dark green bar</b> is a pod shutting down (preStop, SIGTERM, until its containers exit);
a <b style="color:#dc2626">dashed red line</b> runs from a lifecycle action's start or heartbeat to when it would time out;
a <b style="color:#dc2626">red vertical line</b> is AWS's deadline for the instance.</p>
<p class="legend workload-note">On a real pod's row, the markers <b>prestop-begin</b>, <b>prestop-end</b>, <b>sigterm</b> and <b>exit</b>
(or <b style="color:#dc2626">cut-off</b>) come from the real process itself: the workload in the container writes each step with its
timestamp to its own record, which the demo reads after the pod is gone (source <code>workload</code> in the table).</p>
{{range .Scenes}}
<section class="scene" data-scene="{{.Name}}">
<h2>{{.Number}}. {{.Title}}</h2>
{{if .Summary}}<ul class="summary">{{range .Summary}}<li>{{.}}</li>{{end}}</ul>{{end}}
{{.SVG}}
<details><summary>every step ({{len .Facts}})</summary>
<table>{{range .Facts}}<tr><td class="rel">{{.Rel}}</td><td style="color:{{.Color}}">{{.Fact.Step}}</td><td>{{.Fact.Source}}</td><td>{{.Fact.Text}}{{if .Fact.Progress}} [{{.Fact.Progress}}]{{end}}</td></tr>{{end}}</table>
</details>
</section>
{{end}}
<script type="application/json" id="timeline-data">{{.Data}}</script>
</body>
</html>
`))
