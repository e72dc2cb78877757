package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	"golang.org/x/sync/errgroup"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"lifeboat.dev/lifeboat/test/awssim"
	"lifeboat.dev/lifeboat/test/testenv"
)

const (
	// clusterName is lifeboat's --cluster-name; the groups carry its tag.
	clusterName = "demo"
	// lifeboatLogName is the name of lifeboat's log file in the output
	// directory (without .log).
	lifeboatLogName = "demo-lifeboat"
)

// startTestbed starts the Kubernetes control plane with kwok, moto and the
// Auto Scaling simulator, and creates the queue and rules of
// deploy/aws/lifeboat.cfn.json in moto.
func (d *demo) startTestbed(ctx context.Context) error {
	// The Spot scene's node is real: no silent fallback to kwok.
	if err := testenv.CheckRealNodeDeps(); err != nil {
		return fmt.Errorf("the Spot scene runs a real node: %w", err)
	}
	d.tl.say("starting the testbed: etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kwok, moto; building the real node's images")
	began := time.Now()
	var (
		env    *testenv.Env
		moto   *testenv.Moto
		images map[string]string
		bin    = d.cfg.Lifeboat
	)
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error {
		var err error
		if images, err = testenv.BuildImages(d.tmp); err != nil {
			return fmt.Errorf("building the real node's images (sandbox, workload): %w", err)
		}
		return nil
	})
	g.Go(func() error {
		var err error
		env, err = testenv.New(gctx, testenv.Options{Dir: filepath.Join(d.tmp, "kube")})
		if err != nil {
			return fmt.Errorf("starting the Kubernetes testbed (etcd, kube-apiserver, …): %w", err)
		}
		return nil
	})
	g.Go(func() error {
		var err error
		moto, err = testenv.NewMoto(d.tmp)
		if err != nil {
			return fmt.Errorf("starting moto: %w", err)
		}
		return nil
	})
	if bin == "" {
		g.Go(func() error {
			var err error
			bin, err = testenv.BuildLifeboat(d.tmp)
			return err
		})
	}
	err := g.Wait()
	// Whatever started is stopped by close, also when another part failed.
	d.env, d.moto, d.bin = env, moto, bin
	if env != nil {
		d.addProcs(env.Processes()...)
	}
	if moto != nil {
		d.addProcs(moto.Proc)
	}
	if err != nil {
		return err
	}
	d.machines = &testenv.RealMachines{Env: env, Images: images}
	d.tl.say("testbed up in %s", time.Since(began).Round(100*time.Millisecond))

	d.stack, err = testenv.CreateQueueStack(ctx, moto.Endpoint, "lifeboat")
	if err != nil {
		return fmt.Errorf("creating the queue stack in moto: %w", err)
	}
	d.sim, err = awssim.New(awssim.Options{
		MotoEndpoint: moto.Endpoint,
		// Scaled time: AWS's smallest heartbeat timeout is 30 s.
		MinHeartbeatTimeout: time.Second,
		OnInstanceRunning:   d.instanceRunning,
		OnInstanceGone:      d.instanceGone,
	})
	if err != nil {
		return fmt.Errorf("creating the Auto Scaling simulator: %w", err)
	}
	if err := d.sim.Start(ctx, "127.0.0.1:0"); err != nil {
		return fmt.Errorf("starting the Auto Scaling simulator: %w", err)
	}
	cfg := testenv.MotoAWSConfig()
	d.as = autoscaling.NewFromConfig(cfg, func(o *autoscaling.Options) { o.BaseEndpoint = aws.String(d.sim.Endpoint()) })
	d.eb = eventbridge.NewFromConfig(cfg, func(o *eventbridge.Options) { o.BaseEndpoint = aws.String(moto.Endpoint) })
	d.tl.say("queue %s and %d EventBridge rules created from deploy/aws/lifeboat.cfn.json; Auto Scaling simulator at %s",
		lastSegment(d.stack.QueueURL), len(d.stack.Rules), d.sim.Endpoint())
	return nil
}

// startLifeboat runs the lifeboat binary in queue mode, as the chart's
// Deployment would (leader election on), its JSON log going to the output
// directory.
func (d *demo) startLifeboat(ctx context.Context) error {
	port, err := testenv.FreePort()
	if err != nil {
		return err
	}
	args := []string{"run",
		"--queue-url", d.stack.QueueURL,
		"--aws-endpoint", "sqs=" + d.moto.Endpoint + ",ec2=" + d.moto.Endpoint + ",eventbridge=" + d.moto.Endpoint +
			",sts=" + d.moto.Endpoint + ",autoscaling=" + d.sim.Endpoint(),
		"--region", "us-east-1",
		"--kubeconfig", d.env.Kubeconfig,
		"--cluster-name", clusterName,
		"--lease-namespace", "kube-system",
		"--listen", fmt.Sprintf("127.0.0.1:%d", port),
		// Scaled time: a refused eviction is retried after 0.5 s, not 5 s.
		"--eviction-backoff", "500ms",
		// The Spot scene's frontend, a Deployment's only replica, is
		// replaced before it is evicted (frontend.go).
		"--replacement-first",
	}
	p, err := testenv.StartProcess(lifeboatLogName, d.bin, args, testenv.AWSEnv(), d.cfg.OutDir)
	if err != nil {
		return err
	}
	d.lifeboat = p
	d.addProcs(p)
	if err := testenv.WaitHTTP(ctx, p, nil, fmt.Sprintf("http://127.0.0.1:%d/healthz", port)); err != nil {
		return fmt.Errorf("lifeboat did not start: %w", err)
	}
	d.tl.say("lifeboat running in queue mode (pid %d): lifeboat run --queue-url …/%s --cluster-name %s --replacement-first …",
		p.Pid(), lastSegment(d.stack.QueueURL), clusterName)
	return nil
}

// instanceRunning is the simulator's callback for an instance that started
// running: it boots and joins the cluster, unless it sits in the warm pool.
func (d *demo) instanceRunning(ctx context.Context, inst awssim.Instance) {
	if inst.InWarmPool {
		return
	}
	select {
	case d.joins <- inst:
	case <-ctx.Done():
	}
}

// instanceGone powers a real node off as AWS powers a machine off (its
// processes killed), and deletes the node of a terminated instance, as the
// cloud controller manager would.
func (d *demo) instanceGone(ctx context.Context, inst awssim.Instance) {
	d.machines.PowerOff(inst) // nothing for a kwok node
	if inst.EC2State != "terminated" {
		return
	}
	d.mu.Lock()
	name, ok := d.nodes[inst.ID]
	d.mu.Unlock()
	if ok {
		_ = d.env.DeleteNode(ctx, name)
	}
}

// joinNodes turns running instances into nodes, each after its group's
// boot delay: real nodes for the real group, kwok nodes for the others.
func (d *demo) joinNodes(ctx context.Context) error {
	for {
		select {
		case <-ctx.Done():
			return nil
		case inst := <-d.joins:
			d.mu.Lock()
			delay := d.bootDelay[inst.GroupName]
			d.mu.Unlock()
			d.tl.mapNode(inst.PrivateDNSName, d.tl.sceneOfGroup(inst.GroupName))
			d.g.Go(func() error { return d.boot(ctx, inst, delay) })
		}
	}
}

func (d *demo) boot(ctx context.Context, inst awssim.Instance, delay time.Duration) error {
	if inst.GroupName == realGroup {
		return d.bootReal(ctx, inst)
	}
	timer := time.NewTimer(delay)
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return nil
	case <-timer.C:
	}
	_, err := d.env.CreateNode(ctx, testenv.NodeSpec{
		Name: inst.PrivateDNSName, InstanceID: inst.ID, AZ: inst.AvailabilityZone, InstanceType: inst.InstanceType,
		Labels: map[string]string{groupLabel: inst.GroupName},
	})
	if ctx.Err() != nil {
		return nil
	}
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("joining instance %s as node %s: %w", inst.ID, inst.PrivateDNSName, err)
	}
	d.mu.Lock()
	d.nodes[inst.ID] = inst.PrivateDNSName
	d.mu.Unlock()
	return nil
}

// nodeOf returns the node of an instance, "" before it is Ready.
func (d *demo) nodeOf(instanceID string) string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.nodes[instanceID]
}

// leftovers returns the processes still in one of the process groups,
// waiting up to two seconds for those being killed to go.
func leftovers(groups []int) []string {
	want := map[int]bool{}
	for _, g := range groups {
		want[g] = true
	}
	deadline := time.NewTimer(2 * time.Second)
	defer deadline.Stop()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		left := processesInGroups(want)
		if len(left) == 0 {
			return nil
		}
		select {
		case <-deadline.C:
			return left
		case <-tick.C:
		}
	}
}

// processesInGroups lists the live (not zombie) processes whose process
// group is in groups, as "pid (name)".
func processesInGroups(groups map[int]bool) []string {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return []string{fmt.Sprintf("cannot read /proc: %v", err)}
	}
	var out []string
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue // gone meanwhile
		}
		// pid (comm) state ppid pgrp ...; comm may hold spaces and parentheses.
		i := bytes.LastIndexByte(b, ')')
		if i < 0 {
			continue
		}
		fields := strings.Fields(string(b[i+1:]))
		if len(fields) < 3 || fields[0] == "Z" {
			continue
		}
		pgrp, err := strconv.Atoi(fields[2])
		if err != nil || !groups[pgrp] {
			continue
		}
		name := string(b[bytes.IndexByte(b, '(')+1 : i])
		out = append(out, fmt.Sprintf("%d (%s)", pid, name))
	}
	return out
}

func lastSegment(url string) string {
	return url[strings.LastIndexByte(url, '/')+1:]
}
