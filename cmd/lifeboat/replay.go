package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"time"

	"lifeboat.dev/lifeboat/internal/config"
	"lifeboat.dev/lifeboat/internal/event"
	"lifeboat.dev/lifeboat/internal/message"
	"lifeboat.dev/lifeboat/internal/plan"
)

// replayLine is one line of `lifeboat replay` output (docs/replay.md).
type replayLine struct {
	File     string        `json:"file"`
	Accepted bool          `json:"accepted"`
	Format   string        `json:"format,omitempty"`
	Reason   string        `json:"reason,omitempty"`
	Error    string        `json:"error,omitempty"`
	Events   []event.Event `json:"events"`
	Plan     *replayPlan   `json:"plan,omitempty"`
}

type replayPlan struct {
	Act       bool                    `json:"act"`
	NotBefore time.Time               `json:"notBefore,omitzero"`
	Cordon    bool                    `json:"cordon"`
	Taints    []string                `json:"taints,omitempty"`
	Drain     bool                    `json:"drain"`
	Deadline  time.Time               `json:"deadline,omitzero"`
	Lifecycle []event.LifecycleAction `json:"lifecycle,omitempty"`
	Undo      bool                    `json:"undo,omitempty"`
	Reason    event.Kind              `json:"reason,omitempty"`
}

const replayHeader = `usage: lifeboat replay FILE|DIR...

Print, one JSON object per line, what lifeboat makes of saved queue messages
(one message body per file; directories are read recursively): accepted or
why not, the events, and the plan under the default policy as of the newest
event's time, so the output is deterministic. No AWS or Kubernetes access
(docs/replay.md). replay has no flags.
`

// replayCommand is `lifeboat replay`.
func replayCommand(args []string, stdout io.Writer) error {
	flags := flag.NewFlagSet("lifeboat replay", flag.ContinueOnError)
	flags.SetOutput(io.Discard)
	if err := flags.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprint(stdout, replayHeader)
			return nil
		}
		return usageError{config.NewFlagError(err), "lifeboat replay --help"}
	}
	if flags.NArg() == 0 {
		return usageError{errors.New("replay: give one or more files or directories"), "lifeboat replay --help"}
	}
	defaults, err := config.Load([]string{"--queue-url", "https://sqs.invalid/0/replay", "--leader-elect=false"}, func(string) string { return "" })
	if err != nil {
		return fmt.Errorf("replay: default configuration: %w", err)
	}
	policy := plan.Policy{DrainKinds: defaults.DrainKinds, ScheduledChangeLead: defaults.ScheduledChangeLead, CompleteLifecycle: true}
	var files []string
	for _, a := range flags.Args() {
		err := filepath.WalkDir(a, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if !d.IsDir() {
				files = append(files, p)
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("replay: %w", err)
		}
	}
	slices.Sort(files)
	enc := json.NewEncoder(stdout)
	for _, f := range files {
		line := replayFile(f, policy)
		if err := enc.Encode(line); err != nil {
			return fmt.Errorf("replay: writing output: %w", err)
		}
	}
	return nil
}

func replayFile(path string, policy plan.Policy) replayLine {
	line := replayLine{File: path, Events: []event.Event{}}
	body, err := os.ReadFile(path)
	if err != nil {
		line.Reason, line.Error = "unreadable", err.Error()
		return line
	}
	res, err := message.Parse(body)
	if err != nil {
		line.Reason, line.Error = message.Reason(err), err.Error()
		return line
	}
	line.Format = res.Format
	if len(res.Events) == 0 {
		line.Reason = res.Ignored
		return line
	}
	line.Accepted = true
	line.Events = res.Events
	var now time.Time
	for _, e := range res.Events {
		if e.Time.After(now) {
			now = e.Time
		}
	}
	p := plan.For(res.Events, policy, now)
	line.Plan = &replayPlan{Act: p.Act, NotBefore: p.NotBefore, Cordon: p.Cordon, Taints: p.TaintKeys, Drain: p.Drain,
		Deadline: p.Deadline, Lifecycle: p.Lifecycle, Undo: p.Undo, Reason: p.Reason}
	return line
}
