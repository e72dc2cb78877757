package main

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"lifeboat.dev/lifeboat/test/awssim"
	"lifeboat.dev/lifeboat/test/testenv"
)

// The Spot scene's instance is a real machine: its node is a kubelet with
// its own containerd on this host (testenv.RealMachines), and its pods are
// real processes (test/images/workload) with a preStop exec hook and a
// SIGTERM handler, each recording its own life to a file. After the scene
// the demo reads those records and puts what the processes themselves saw
// on the pods' rows: the preStop hook's begin and end, SIGTERM, the exit,
// or "cut off" when the process never got to exit by itself.

// srcWorkload marks facts taken from a workload's own record.
const srcWorkload = "workload"

// Steps read from the workload records.
const (
	stepPreStopBegin = "prestop-begin" // the preStop hook started (the workload's record)
	stepPreStopEnd   = "prestop-end"   // the preStop hook ran to its end
	stepSIGTERM      = "sigterm"       // the process received SIGTERM
	stepExit         = "exit"          // the SIGTERM handler finished its work and the process exited
	stepCutOff       = "cut-off"       // the process was killed before it exited by itself
)

// realGroup is the Auto Scaling group whose instances boot real nodes.
const realGroup = groupSpot

// realPod is a workload pod on the real node, and how its controller is
// made (as testenv.PodSpec.OwnerKind).
type realPod struct {
	name      string
	labels    map[string]string
	owner     string
	preStop   time.Duration
	shutdown  time.Duration
	grace     time.Duration
	replaceOn map[string]string
}

// realPods are the Spot node's pods: short hooks and handlers (seconds),
// so that the scene stays short while each step is visible.
func realPods() []realPod {
	replace := map[string]string{groupLabel: groupOnDemand}
	checkout := map[string]string{"app": "checkout"}
	return []realPod{
		{name: "checkout-a", labels: checkout, owner: testenv.OwnerReplicaSet, replaceOn: replace,
			preStop: 2 * time.Second, shutdown: 2 * time.Second, grace: 30 * time.Second},
		{name: "checkout-b", labels: checkout, owner: testenv.OwnerReplicaSet, replaceOn: replace,
			preStop: 2 * time.Second, shutdown: 2 * time.Second, grace: 30 * time.Second},
		{name: "worker", labels: map[string]string{"app": "worker"}, owner: testenv.OwnerReplicaSet, replaceOn: replace,
			preStop: 2 * time.Second, shutdown: 3 * time.Second, grace: 300 * time.Second},
		{name: "log-shipper", owner: testenv.OwnerDaemonSet, shutdown: time.Second, grace: 30 * time.Second},
	}
}

// recordDir is where the workloads write their records (a hostPath).
func (d *demo) recordDir() string { return filepath.Join(d.tmp, "records") }

// bootReal boots an instance of the real group as a real node and waits
// until it is Ready. Its kubelet and containerd count among the demo's
// processes; close tears the node down with RealMachines.Close.
func (d *demo) bootReal(ctx context.Context, inst awssim.Instance) error {
	d.tl.say("booting %s as a real node: a kubelet with its own containerd, images imported from the repo's Go source", inst.ID)
	began := time.Now()
	if _, err := d.machines.Boot(ctx, inst, map[string]string{groupLabel: inst.GroupName}); err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return fmt.Errorf("booting instance %s as a real node (kubelet + containerd; `make deps` installs what it needs): %w", inst.ID, err)
	}
	n := d.machines.Node(inst.ID)
	if n == nil {
		return fmt.Errorf("instance %s: real node powered off while booting", inst.ID)
	}
	d.addProcs(n.Containerd(), n.Kubelet())
	d.mu.Lock()
	d.nodes[inst.ID] = inst.PrivateDNSName
	d.mu.Unlock()
	d.tl.say("real node %s Ready in %s (kubelet pid %d, containerd pid %d, %s)", shortNode(inst.PrivateDNSName),
		time.Since(began).Round(100*time.Millisecond), n.Kubelet().Pid(), n.Containerd().Pid(), n.ProviderID)
	return nil
}

// createRealPods creates the workload pods on the real node, waits until
// each runs and has recorded that it is ready, then gives each its
// controller, which adopts it (as testenv.Env.CreatePod does for kwok
// pods): a ReplicaSet whose replacements go to the on-demand group, or a
// DaemonSet on this node only.
func (d *demo) createRealPods(ctx context.Context, node string) error {
	pods := d.env.Client.CoreV1().Pods(nsShop)
	for _, p := range realPods() {
		pod := testenv.WorkloadPod(testenv.WorkloadSpec{Namespace: nsShop, Name: p.name, Node: node, RecordDir: d.recordDir(),
			PreStop: p.preStop, Shutdown: p.shutdown, Grace: p.grace, Labels: map[string]string{testenv.OwnerLabel: p.name}})
		for k, v := range p.labels {
			pod.Labels[k] = v
		}
		if p.owner == testenv.OwnerDaemonSet {
			pod.Spec.Tolerations = []corev1.Toleration{
				{Key: corev1.TaintNodeUnschedulable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
				{Key: corev1.TaintNodeNotReady, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute},
				{Key: corev1.TaintNodeUnreachable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute},
			}
		}
		if _, err := pods.Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("creating real pod %s/%s: %w", nsShop, p.name, err)
		}
	}
	for _, p := range realPods() {
		err := d.tl.waitFor(ctx, sceneTimeout, "real pod "+p.name+" Running and its workload ready", func(ctx context.Context) (bool, error) {
			got, err := pods.Get(ctx, p.name, metav1.GetOptions{})
			if err != nil || !testenv.PodReady(got) {
				return false, err
			}
			rec, err := testenv.ReadWorkloadRecord(d.recordDir(), nsShop, p.name)
			return rec.Count(testenv.WorkloadReady) > 0, err
		})
		if err != nil {
			return err
		}
		if err := d.adopt(ctx, p, node); err != nil {
			return err
		}
	}
	return nil
}

// adopt creates the controller of a real pod, its template the pod's own
// spec, and waits until it owns the pod.
func (d *demo) adopt(ctx context.Context, p realPod, node string) error {
	pod, err := d.env.Client.CoreV1().Pods(nsShop).Get(ctx, p.name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	selector := &metav1.LabelSelector{MatchLabels: map[string]string{testenv.OwnerLabel: p.name}}
	template := corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: pod.Labels}, Spec: *pod.Spec.DeepCopy()}
	meta := metav1.ObjectMeta{Namespace: nsShop, Name: p.name}
	switch p.owner {
	case testenv.OwnerReplicaSet:
		// Replacements land on the on-demand group's kwok nodes.
		template.Spec.NodeName, template.Spec.NodeSelector = "", p.replaceOn
		_, err = d.env.Client.AppsV1().ReplicaSets(nsShop).Create(ctx, &appsv1.ReplicaSet{ObjectMeta: meta,
			Spec: appsv1.ReplicaSetSpec{Replicas: ptr.To[int32](1), Selector: selector, Template: template}}, metav1.CreateOptions{})
	case testenv.OwnerDaemonSet:
		template.Spec.NodeName = node
		_, err = d.env.Client.AppsV1().DaemonSets(nsShop).Create(ctx, &appsv1.DaemonSet{ObjectMeta: meta,
			Spec: appsv1.DaemonSetSpec{Selector: selector, Template: template,
				UpdateStrategy: appsv1.DaemonSetUpdateStrategy{Type: appsv1.OnDeleteDaemonSetStrategyType}}}, metav1.CreateOptions{})
	}
	if err != nil {
		return fmt.Errorf("creating the %s of real pod %s: %w", p.owner, p.name, err)
	}
	return d.tl.waitFor(ctx, sceneTimeout, "real pod "+p.name+" adopted by its "+p.owner, func(ctx context.Context) (bool, error) {
		got, err := d.env.Client.CoreV1().Pods(nsShop).Get(ctx, p.name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		ref := metav1.GetControllerOf(got)
		return err == nil && ref != nil && ref.Kind == p.owner, err
	})
}

// endWithRecords reads the records of a scene's evicted real pods, adds
// what each process recorded to its row, and ends the scene with summary
// and a line per pod.
func (d *demo) endWithRecords(scene string, evicted []string, summary []string) error {
	var errs []string
	d.tl.say("what the real processes recorded themselves (read from their records now that the pods are gone):")
	for _, key := range evicted {
		ns, name, _ := strings.Cut(key, "/")
		rec, err := testenv.ReadWorkloadRecord(d.recordDir(), ns, name)
		if err != nil {
			errs = append(errs, err.Error())
			continue
		}
		summary = append(summary, d.addRecordFacts(scene, name, rec))
	}
	d.tl.end(scene, summary...)
	if len(errs) > 0 {
		return fmt.Errorf("reading the workloads' records: %s", strings.Join(errs, "; "))
	}
	return nil
}

// addRecordFacts adds a pod's recorded preStop, SIGTERM and exit (or cut
// off) to its row and returns the summary line of its shutdown.
func (d *demo) addRecordFacts(scene, name string, rec testenv.WorkloadRecord) string {
	lane := "pod " + name
	add := func(e testenv.WorkloadEntry, step, label, text string) {
		d.tl.add(Fact{At: e.Time, Scene: scene, Source: srcWorkload, Step: step, Lane: lane, Label: label,
			Text: fmt.Sprintf("%s (pid %d) recorded: %s", name, e.PID, text)})
	}
	var begin, term time.Time
	for _, e := range rec {
		switch e.Event {
		case testenv.WorkloadPreStopBegin:
			begin = e.Time
			add(e, stepPreStopBegin, "preStop", "preStop hook began")
		case testenv.WorkloadPreStopEnd:
			add(e, stepPreStopEnd, "preStop done", fmt.Sprintf("preStop hook ended after %.2fs", e.Time.Sub(begin).Seconds()))
		case testenv.WorkloadSIGTERM:
			term = e.Time
			add(e, stepSIGTERM, "SIGTERM", "SIGTERM received; the handler starts its work")
		case testenv.WorkloadExit:
			add(e, stepExit, "exit", fmt.Sprintf("work finished, exited %.2fs after SIGTERM", e.Time.Sub(term).Seconds()))
		}
	}
	if !rec.Finished() {
		last := rec.Last()
		add(last, stepCutOff, "cut off", fmt.Sprintf("killed after %q: it never finished its work and exited by itself", last.Event))
		return fmt.Sprintf("real process %s was cut off (its own record: %s)", name, rec)
	}
	pre := "no preStop hook"
	if end, ok := rec.At(testenv.WorkloadPreStopEnd); ok {
		pre = fmt.Sprintf("preStop ran %.1fs to its end", end.Sub(begin).Seconds())
	}
	exit, _ := rec.At(testenv.WorkloadExit)
	return fmt.Sprintf("real process %s, from its own record: %s, then SIGTERM, then its handler finished and it exited %.1fs later",
		name, pre, exit.Sub(term).Seconds())
}
