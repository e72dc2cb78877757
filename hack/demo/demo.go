package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	"golang.org/x/sync/errgroup"
	"k8s.io/client-go/informers"

	"lifeboat.dev/lifeboat/test/awssim"
	"lifeboat.dev/lifeboat/test/testenv"
)

// errInterrupted is returned when the run was canceled (Ctrl-C) before it
// finished; everything was stopped all the same.
var errInterrupted = errors.New("interrupted")

// result is what a run leaves behind.
type result struct {
	// TimelinePath is the HTML timeline; LogPath lifeboat's JSON log.
	TimelinePath, LogPath string
	// TempDir held the testbed's data and logs; it is removed unless Keep.
	TempDir string
	// ProcessGroups are the process group IDs of every process started
	// (each component runs in its own group); none is left when run returns.
	ProcessGroups []int
	// Facts is the timeline, in the order seen.
	Facts []Fact
	// Took is the run's wall time.
	Took time.Duration
}

// demo is one run's world.
type demo struct {
	cfg config
	tl  *timeline

	tmp      string
	env      *testenv.Env
	moto     *testenv.Moto
	stack    *testenv.QueueStack
	sim      *awssim.Server
	as       *autoscaling.Client
	eb       *eventbridge.Client
	lifeboat *testenv.Process
	factory  informers.SharedInformerFactory
	bin      string
	// machines boots the real group's instances as real nodes (realpods.go).
	machines *testenv.RealMachines

	// joins carries instances that started running to the node joiner.
	joins chan awssim.Instance
	// g runs the observers and the joiner's boots; set while they run.
	g *errgroup.Group

	mu sync.Mutex
	// nodes maps instance IDs to their node names once the node is Ready.
	nodes map[string]string
	// bootDelay is how long instances of a group take to become nodes.
	bootDelay map[string]time.Duration
	procs     []*testenv.Process
}

func (c config) validate() error {
	var errs []error
	if c.HookTimeout < time.Second || c.HookTimeout%time.Second != 0 {
		errs = append(errs, fmt.Errorf("hook timeout %v: want whole seconds, at least 1s", c.HookTimeout))
	}
	if c.PodShutdown <= c.HookTimeout {
		errs = append(errs, fmt.Errorf("pod shutdown %v: want longer than the hook timeout %v, or no heartbeat is needed", c.PodShutdown, c.HookTimeout))
	}
	if c.BootDelay < 0 {
		errs = append(errs, fmt.Errorf("boot delay %v: want ≥ 0", c.BootDelay))
	}
	if c.OutDir == "" {
		errs = append(errs, errors.New("output directory: empty"))
	}
	return errors.Join(errs...)
}

// run plays the demo. Whatever happens, every process it started is
// stopped and its temporary directory removed (unless cfg.Keep) before it
// returns, and the HTML timeline holds what happened until then.
func run(ctx context.Context, cfg config, stdout io.Writer) (res *result, err error) {
	start := time.Now()
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("configuration: %w", err)
	}
	out, err := filepath.Abs(cfg.OutDir)
	if err != nil {
		return nil, fmt.Errorf("output directory: %w", err)
	}
	cfg.OutDir = out
	if err := os.MkdirAll(cfg.OutDir, 0o755); err != nil {
		return nil, fmt.Errorf("creating output directory: %w", err)
	}
	tmp, err := os.MkdirTemp("", "lifeboat-demo-")
	if err != nil {
		return nil, fmt.Errorf("creating temporary directory: %w", err)
	}
	res = &result{
		TimelinePath: filepath.Join(cfg.OutDir, "demo-timeline.html"),
		LogPath:      filepath.Join(cfg.OutDir, lifeboatLogName+".log"),
		TempDir:      tmp,
	}
	d := &demo{
		cfg: cfg, tl: newTimeline(stdout, cfg.Color, start), tmp: tmp,
		joins: make(chan awssim.Instance, 64), nodes: map[string]string{}, bootDelay: map[string]time.Duration{},
	}
	defer func() {
		interrupted := ctx.Err() != nil
		if interrupted {
			d.tl.say("interrupted: stopping everything")
		}
		n := d.close()
		res.ProcessGroups = d.processGroups()
		left := leftovers(res.ProcessGroups)
		removed := ""
		if !cfg.Keep {
			if rerr := os.RemoveAll(tmp); rerr != nil {
				err = errors.Join(err, fmt.Errorf("removing %s: %w", tmp, rerr))
			} else {
				removed = "; removed " + tmp
			}
		} else {
			removed = "; kept " + tmp + " (component logs)"
		}
		d.tl.say("stopped %d %s%s", n, map[bool]string{true: "process", false: "processes"}[n == 1], removed)
		if len(left) > 0 {
			err = errors.Join(err, fmt.Errorf("processes still running after the stop: %v", left))
		}
		res.Facts = d.tl.snapshot()
		res.Took = time.Since(start)
		if herr := writeHTML(res.TimelinePath, d.tl.report(cfg, err)); herr != nil {
			err = errors.Join(err, herr)
		} else {
			d.tl.say("timeline: %s", res.TimelinePath)
		}
		if d.lifeboat != nil {
			d.tl.say("lifeboat's JSON log: %s", res.LogPath)
		}
		if interrupted && err != nil {
			err = fmt.Errorf("%w: %w", errInterrupted, err)
		}
		if err == nil {
			d.tl.say("done in %s", res.Took.Round(100*time.Millisecond))
		}
	}()
	return res, d.play(ctx)
}

// play starts the testbed and lifeboat, sets the scene and plays it.
func (d *demo) play(ctx context.Context) error {
	if err := d.startTestbed(ctx); err != nil {
		return err
	}
	if err := d.startLifeboat(ctx); err != nil {
		return err
	}

	g, gctx := errgroup.WithContext(ctx)
	d.g = g
	// The observers and the joiner run until the scenes are over.
	loops, stopLoops := context.WithCancel(gctx)
	defer func() {
		stopLoops()
		if d.factory != nil {
			d.factory.Shutdown() // waits for the informers, which stop with loops
		}
	}()
	if err := d.watchCluster(loops); err != nil {
		return err
	}
	g.Go(func() error { return d.pollSimulator(loops) })
	g.Go(func() error { return d.tailLog(loops) })
	g.Go(func() error { return d.joinNodes(loops) })
	g.Go(func() error {
		defer stopLoops()
		return d.script(gctx)
	})
	if err := g.Wait(); err != nil {
		return err
	}
	if err := d.sim.Err(); err != nil {
		return fmt.Errorf("auto scaling simulator: %w", err)
	}
	return nil
}

// script sets the scene and plays the three scenes one after another.
func (d *demo) script(ctx context.Context) error {
	s, err := d.setScene(ctx)
	if err != nil {
		return err
	}
	for _, scene := range []func(context.Context, *scene) error{d.spotInterruption, d.scaleIn, d.warmPool} {
		if err := scene(ctx, s); err != nil {
			return err
		}
	}
	return nil
}

// close stops every process in reverse start order and returns how many
// were stopped.
func (d *demo) close() int {
	if d.lifeboat != nil {
		d.lifeboat.Stop() // SIGTERM: lifeboat shuts down as in production
	}
	if d.sim != nil {
		_ = d.sim.Close()
	}
	if d.machines != nil {
		d.machines.Close() // the real node: every process, mount and network namespace
	}
	if d.moto != nil {
		d.moto.Proc.Stop()
	}
	if d.env != nil {
		d.env.Close()
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.procs)
}

func (d *demo) processGroups() []int {
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []int
	for _, p := range d.procs {
		out = append(out, p.Pid()) // each process leads its own group
	}
	return out
}

func (d *demo) addProcs(ps ...*testenv.Process) {
	d.mu.Lock()
	d.procs = append(d.procs, ps...)
	d.mu.Unlock()
}
