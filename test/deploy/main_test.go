// Package deploy tests what operators install: the Helm chart
// (deploy/helm/lifeboat) rendered with the Helm SDK and applied to the
// testbed's RBAC-enabled kube-apiserver, the real lifeboat binary running
// with the chart's ServiceAccount, Roles and arguments (least privilege,
// leader election), rollouts on a one-node control plane (F5), and the
// Dockerfile's build line.
//
// It reuses the e2e approach: the testbed of package testenv (etcd,
// kube-apiserver, kube-controller-manager, kube-scheduler, kwok), moto for
// SQS and EventBridge, and the Auto Scaling simulator (package awssim) whose
// instances become kwok nodes. Top-level tests run one after another (the
// F5 test needs a cluster with a single node); subtests run in parallel,
// each with its own release, namespace, queue, event bus and group.
package deploy

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"lifeboat.dev/lifeboat/test/awssim"
	"lifeboat.dev/lifeboat/test/testenv"
)

var (
	kube        *testenv.Env
	moto        *testenv.Moto
	sim         *awssim.Server
	lifeboatBin string

	// instanceNodes maps the simulator's instances to their kwok nodes.
	instanceNodes sync.Map // instance ID -> node name
	// joinDelays delays the nodes of a group's instances (a boot).
	joinDelays sync.Map // group name -> time.Duration
)

// binVersion is the version the binary under test is built with.
const binVersion = "v0.0.0-deploytest"

// clusterName is the cluster the groups are tagged for.
const clusterName = "deploy"

func TestMain(m *testing.M) {
	os.Exit(testMain(m))
}

func testMain(m *testing.M) int {
	dir, err := os.MkdirTemp("", "lifeboat-deploy-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	// The binary under test is built by the Dockerfile's own go build line
	// (TestDockerfile checks it against the Makefile's): what the image ships.
	lifeboatBin, err = buildWithDockerfile(dir, binVersion)
	if err != nil {
		fmt.Fprintln(os.Stderr, "building lifeboat with the Dockerfile's go build line:", err)
		return 1
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	kube, err = testenv.New(ctx, testenv.Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, "starting the Kubernetes testbed:", err)
		return 1
	}
	defer kube.Close()
	moto, err = testenv.NewMoto(dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, "starting moto:", err)
		return 1
	}
	defer moto.Proc.Stop()
	sim, err = awssim.New(awssim.Options{
		MotoEndpoint:        moto.Endpoint,
		MinHeartbeatTimeout: time.Second,
		OnInstanceRunning:   instanceRunning,
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "starting the Auto Scaling simulator:", err)
		return 1
	}
	// The simulator serves until sim.Close: Start's context bounds its
	// whole life, and ctx (the testbed's start-up) ends after two minutes,
	// well before the package's last test.
	if err := sim.Start(context.Background(), "127.0.0.1:0"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer sim.Close()
	code := m.Run()
	if err := sim.Err(); err != nil {
		fmt.Fprintln(os.Stderr, "auto scaling simulator:", err)
		code = 1
	}
	if code != 0 {
		kube.DumpLogs(os.Stderr, 20)
	}
	return code
}

// instanceRunning makes a running instance a kwok node, as a real instance
// joins the cluster when it boots. Nodes stay after the instance is gone
// (so that tests can read what lifeboat wrote on them); each test deletes
// its own.
func instanceRunning(ctx context.Context, inst awssim.Instance) {
	if inst.InWarmPool {
		return
	}
	go func() { // a node's boot must not hold up the simulator's callbacks
		if d, ok := joinDelays.Load(inst.GroupName); ok {
			time.Sleep(d.(time.Duration))
		}
		_, err := kube.CreateNode(ctx, testenv.NodeSpec{Name: inst.PrivateDNSName, InstanceID: inst.ID, AZ: inst.AvailabilityZone,
			Labels: map[string]string{"deploy.lifeboat.io/group": inst.GroupName}})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			fmt.Fprintf(os.Stderr, "creating node for %s: %v\n", inst.ID, err)
			return
		}
		instanceNodes.Store(inst.ID, inst.PrivateDNSName)
	}()
}

func nodeOf(instanceID string) string {
	v, ok := instanceNodes.Load(instanceID)
	if !ok {
		return ""
	}
	return v.(string)
}

// eventually polls cond every 100 ms until it returns true (nil error),
// returns an error, or d passes.
func eventually(ctx context.Context, d time.Duration, what string, cond func() (bool, error)) error {
	deadline := time.Now().Add(d)
	for {
		ok, err := cond()
		if err != nil {
			return fmt.Errorf("waiting for %s: %w", what, err)
		}
		if ok {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("timed out after %v waiting for %s", d, what)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s: %w", what, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}
