package check

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
	astypes "github.com/aws/aws-sdk-go-v2/service/autoscaling/types"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"lifeboat.dev/lifeboat/test/awssim"
	"lifeboat.dev/lifeboat/test/testenv"
)

const (
	terminating = "autoscaling:EC2_INSTANCE_TERMINATING"
	launching   = "autoscaling:EC2_INSTANCE_LAUNCHING"
	// The rules of deploy/aws/lifeboat.cfn.json, as CreateQueueStack names them.
	spotRule      = "SpotInterruptionRule"
	lifecycleRule = "LifecycleRule"
	stateRule     = "StateChangeRule"
)

// world is one test's AWS and Kubernetes setup, correct unless a test
// breaks it: the template's queue and rules, an Auto Scaling group of the
// cluster with terminate and launch hooks and a warm pool, and a
// ServiceAccount with exactly the permissions lifeboat needs.
type world struct {
	t          *testing.T
	ctx        context.Context
	prefix     string
	stack      *testenv.QueueStack
	sim        *awssim.Server
	as         *autoscaling.Client
	eb         *eventbridge.Client
	sqs        *sqs.Client
	group      string
	ns         string
	kubeconfig string
}

type worldOptions struct {
	// omit leaves an RBAC permission out, as "verb resource".
	omit string
}

// clusterRules and leaseRules are the permissions lifeboat needs, as the
// Helm chart grants them (deploy/helm/lifeboat/templates/rbac.yaml).
var (
	clusterRules = []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"nodes"}, Verbs: []string{"get", "list", "watch", "patch"}},
		{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"list", "watch", "delete", "patch"}}, // delete: deleteBlockedPodsBeforeDeadline, patch: annotatePodsWithDeadline, both on by default
		{APIGroups: []string{""}, Resources: []string{"pods/eviction"}, Verbs: []string{"create"}},
		{APIGroups: []string{""}, Resources: []string{"events"}, Verbs: []string{"create", "patch"}},
		{APIGroups: []string{"policy"}, Resources: []string{"poddisruptionbudgets"}, Verbs: []string{"list"}},
		{APIGroups: []string{"storage.k8s.io"}, Resources: []string{"volumeattachments"}, Verbs: []string{"list", "watch"}},
	}
	leaseRules = []rbacv1.PolicyRule{
		{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"create"}},
		{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, ResourceNames: []string{"lifeboat"}, Verbs: []string{"get", "update"}},
	}
)

func newWorld(t *testing.T, o worldOptions) *world {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	if err := moto.Reset(ctx); err != nil {
		t.Fatal(err)
	}
	w := &world{t: t, ctx: ctx, prefix: "lifeboat", group: "nodes-a"}
	var err error
	if w.stack, err = testenv.CreateQueueStack(ctx, moto.Endpoint, w.prefix); err != nil {
		t.Fatal(err)
	}
	w.sim, err = awssim.New(awssim.Options{MotoEndpoint: moto.Endpoint, MinHeartbeatTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.sim.Start(ctx, "127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = w.sim.Close() })
	cfg := testenv.MotoAWSConfig()
	w.as = autoscaling.NewFromConfig(cfg, func(o *autoscaling.Options) { o.BaseEndpoint = aws.String(w.sim.Endpoint()) })
	w.eb = eventbridge.NewFromConfig(cfg, func(o *eventbridge.Options) { o.BaseEndpoint = aws.String(moto.Endpoint) })
	w.sqs = sqs.NewFromConfig(cfg, func(o *sqs.Options) { o.BaseEndpoint = aws.String(moto.Endpoint) })

	w.must(w.as.CreateAutoScalingGroup(ctx, &autoscaling.CreateAutoScalingGroupInput{
		AutoScalingGroupName: aws.String(w.group), MinSize: aws.Int32(0), MaxSize: aws.Int32(10), DesiredCapacity: aws.Int32(0),
		AvailabilityZones: []string{"us-east-1a"},
		LaunchTemplate:    &astypes.LaunchTemplateSpecification{LaunchTemplateName: aws.String("nodes"), Version: aws.String("$Latest")},
		Tags:              []astypes.Tag{{Key: aws.String("kubernetes.io/cluster/" + clusterName), Value: aws.String("owned")}},
	}))
	w.putHook("lifeboat-terminate", terminating, 300, "CONTINUE")
	w.putHook("lifeboat-launch", launching, 300, "ABANDON")
	w.must(w.as.PutWarmPool(ctx, &autoscaling.PutWarmPoolInput{AutoScalingGroupName: aws.String(w.group),
		MinSize: aws.Int32(0), MaxGroupPreparedCapacity: aws.Int32(0), PoolState: astypes.WarmPoolStateStopped,
		InstanceReusePolicy: &astypes.InstanceReusePolicy{ReuseOnScaleIn: aws.Bool(true)}}))

	w.ns = kube.Namespace(t)
	w.serviceAccount("lifeboat", o.omit)
	if w.kubeconfig, err = kube.KubeconfigFor(ctx, w.ns, "lifeboat"); err != nil {
		t.Fatal(err)
	}
	return w
}

// must fails the test on the error of an AWS call.
func (w *world) must(_ any, err error) {
	w.t.Helper()
	if err != nil {
		w.t.Fatal(err)
	}
}

func (w *world) putHook(name, transition string, timeout int32, defaultResult string) {
	w.t.Helper()
	w.must(w.as.PutLifecycleHook(w.ctx, &autoscaling.PutLifecycleHookInput{AutoScalingGroupName: aws.String(w.group),
		LifecycleHookName: aws.String(name), LifecycleTransition: aws.String(transition),
		HeartbeatTimeout: aws.Int32(timeout), DefaultResult: aws.String(defaultResult)}))
}

// serviceAccount creates a ServiceAccount bound to lifeboat's permissions,
// minus omit ("verb resource").
func (w *world) serviceAccount(name, omit string) {
	w.t.Helper()
	ctx := w.ctx
	if _, err := kube.Client.CoreV1().ServiceAccounts(w.ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		w.t.Fatal(err)
	}
	without := func(rules []rbacv1.PolicyRule) []rbacv1.PolicyRule {
		var out []rbacv1.PolicyRule
		verb, res, _ := strings.Cut(omit, " ")
		for _, r := range rules {
			r := *r.DeepCopy()
			if slices.Contains(r.Resources, res) {
				r.Verbs = slices.DeleteFunc(r.Verbs, func(v string) bool { return v == verb })
			}
			if len(r.Verbs) > 0 {
				out = append(out, r)
			}
		}
		return out
	}
	role := w.ns + "-" + name
	ref := func(kind string) rbacv1.RoleRef {
		return rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: kind, Name: role}
	}
	subjects := []rbacv1.Subject{{Kind: "ServiceAccount", Name: name, Namespace: w.ns}}
	rbac := kube.Client.RbacV1()
	for _, err := range []error{
		func() error {
			_, err := rbac.ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: role}, Rules: without(clusterRules)}, metav1.CreateOptions{})
			return err
		}(),
		func() error {
			_, err := rbac.ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: role}, RoleRef: ref("ClusterRole"), Subjects: subjects}, metav1.CreateOptions{})
			return err
		}(),
		func() error {
			_, err := rbac.Roles(w.ns).Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: role}, Rules: without(leaseRules)}, metav1.CreateOptions{})
			return err
		}(),
		func() error {
			_, err := rbac.RoleBindings(w.ns).Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: role}, RoleRef: ref("Role"), Subjects: subjects}, metav1.CreateOptions{})
			return err
		}(),
	} {
		if err != nil {
			w.t.Fatal(err)
		}
	}
	w.t.Cleanup(func() {
		ctx := context.Background()
		_ = kube.Client.RbacV1().ClusterRoleBindings().Delete(ctx, role, metav1.DeleteOptions{})
		_ = kube.Client.RbacV1().ClusterRoles().Delete(ctx, role, metav1.DeleteOptions{})
	})
}

// ruleName is the name CreateQueueStack gave a template rule.
func (w *world) ruleName(templateName string) string { return w.prefix + "-" + templateName }

// flags are the `lifeboat run` flags of this world (check takes the same).
func (w *world) flags() []string {
	return []string{
		"--queue-url", w.stack.QueueURL,
		"--aws-endpoint", "sqs=" + moto.Endpoint + ",ec2=" + moto.Endpoint + ",eventbridge=" + moto.Endpoint + ",sts=" + moto.Endpoint + ",autoscaling=" + w.sim.Endpoint(),
		"--region", "us-east-1",
		"--kubeconfig", w.kubeconfig,
		"--cluster-name", clusterName,
		"--pod-namespace", w.ns,
	}
}

// report is `lifeboat check --output json`.
type report struct {
	Checks []struct {
		Name, Status, Found, Fix string
	}
	Summary map[string]int
}

func (r report) row(name string) (status, found, fix string, ok bool) {
	for _, c := range r.Checks {
		if c.Name == name {
			return c.Status, c.Found, c.Fix, true
		}
	}
	return "", "", "", false
}

func (r report) withStatus(s string) []string {
	var out []string
	for _, c := range r.Checks {
		if c.Status == s {
			out = append(out, c.Name)
		}
	}
	return out
}

// lifeboat runs the binary with args and returns stdout, stderr and the
// exit code.
func lifeboat(t *testing.T, ctx context.Context, args ...string) (string, string, int) {
	t.Helper()
	cmd := exec.CommandContext(ctx, lifeboatBin, args...)
	cmd.Env = append(cmd.Environ(), testenv.AWSEnv()...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return stdout.String(), stderr.String(), 0
	case errors.As(err, &ee):
		return stdout.String(), stderr.String(), ee.ExitCode()
	default:
		t.Fatalf("running lifeboat %v: %v", args, err)
		return "", "", -1
	}
}

// check runs `lifeboat check --output json` with the world's flags and extra.
func (w *world) check(extra ...string) (report, int) {
	w.t.Helper()
	args := append(append([]string{"check", "--output", "json"}, w.flags()...), extra...)
	out, stderr, code := lifeboat(w.t, w.ctx, args...)
	var r report
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		w.t.Fatalf("check output is not JSON (%v); exit %d\nstdout:\n%s\nstderr:\n%s", err, code, out, stderr)
	}
	if len(r.Checks) == 0 {
		w.t.Fatalf("check reported nothing; stderr:\n%s", stderr)
	}
	return r, code
}

func (w *world) logReport(r report) {
	w.t.Helper()
	for _, c := range r.Checks {
		w.t.Logf("%-45s %-4s %s%s", c.Name, c.Status, c.Found, map[bool]string{true: "\n\tfix: " + c.Fix, false: ""}[c.Fix != ""])
	}
}

func eventually(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", d, what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
