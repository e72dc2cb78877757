package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"

	"lifeboat.dev/lifeboat/internal/kube"
	"lifeboat.dev/lifeboat/internal/status"
)

const statusHeader = `usage: lifeboat status [-o table|json] [-w] [--kubeconfig FILE] [--context NAME]

Show the nodes lifeboat is handling now, read from the state it keeps on the
Node objects: the reason, AWS's deadline and the time left, the pods still on
each node, the lifecycle heartbeats sent and whether the lifecycle action is
pending or completed (docs/status.md). It needs only read access to nodes and
pods, with the kubeconfig kubectl uses (--kubeconfig, KUBECONFIG or
~/.kube/config). Installed as kubectl-lifeboat it is 'kubectl lifeboat status'.

flags:
`

// statusCommand is `lifeboat status`.
func statusCommand(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error {
	flags := flag.NewFlagSet("lifeboat status", flag.ContinueOnError)
	flags.SetOutput(io.Discard)
	output := flags.String("o", "table", "output format: table or json")
	watch := flags.Bool("w", false, "watch: print again whenever the status changes, until interrupted")
	interval := flags.Duration("interval", 2*time.Second, "with -w, how often the nodes and pods are read")
	kubeconfig := flags.String("kubeconfig", "", "kubeconfig file (default: KUBECONFIG, then ~/.kube/config)")
	kubecontext := flags.String("context", "", "kubeconfig context (default: the current context)")
	help := "lifeboat status --help"
	if err := flags.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprint(stdout, statusHeader)
			flags.SetOutput(stdout)
			flags.PrintDefaults()
			return nil
		}
		return usageError{err, help}
	}
	if flags.NArg() > 0 {
		return usageError{fmt.Errorf("unexpected argument %q", flags.Arg(0)), help}
	}
	if *output != "table" && *output != "json" {
		return usageError{fmt.Errorf("-o %s: want table or json", *output), help}
	}
	if *interval <= 0 {
		return usageError{errors.New("--interval must be positive"), help}
	}
	client, err := userClient(*kubeconfig, *kubecontext, getenv)
	if err != nil {
		return err
	}
	return printStatus(ctx, client, *output == "json", *watch, *interval, stdout)
}

// printStatus prints the status once, or with watch every interval when it
// changed, until ctx ends.
func printStatus(ctx context.Context, client kube.Client, asJSON, watch bool, interval time.Duration, stdout io.Writer) error {
	var last []byte
	for {
		var b bytes.Buffer
		now := time.Now()
		nodes, err := readStatus(ctx, client, now)
		if err != nil {
			if watch && ctx.Err() != nil {
				return nil
			}
			return err
		}
		if asJSON {
			err = status.JSON(&b, nodes, now)
		} else {
			err = status.Render(&b, nodes)
		}
		if err != nil {
			return err
		}
		if !watch {
			_, err = stdout.Write(b.Bytes())
			return err
		}
		// Watching: print only what changed (the time left ticks, so a node
		// in flight is printed each interval; an idle cluster once).
		// JSON carries the time, so compare without it.
		key := b.Bytes()
		if asJSON {
			key, _ = json.Marshal(nodes)
		}
		if !bytes.Equal(key, last) {
			if !asJSON {
				fmt.Fprintf(stdout, "--- %s\n", now.UTC().Format(time.RFC3339))
			}
			if _, err := stdout.Write(b.Bytes()); err != nil {
				return err
			}
			last = bytes.Clone(key)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(interval):
		}
	}
}

// readStatus reads the nodes, then the pods of those lifeboat handles.
func readStatus(ctx context.Context, client kube.Client, now time.Time) ([]status.Node, error) {
	nl, err := client.Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("listing nodes: %w", err)
	}
	var pods []corev1.Pod
	for _, n := range status.Build(nl.Items, nil, now) {
		pl, err := client.Pods("").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + n.Name})
		if err != nil {
			return nil, fmt.Errorf("listing pods on node %s: %w", n.Name, err)
		}
		pods = append(pods, pl.Items...)
	}
	return status.Build(nl.Items, pods, now), nil
}

// userClient builds a Kubernetes client the way kubectl does: --kubeconfig,
// else the files in KUBECONFIG, else ~/.kube/config; in a pod without any,
// the in-cluster configuration.
func userClient(kubeconfig, kubecontext string, getenv func(string) string) (kube.Client, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	if env := getenv(clientcmd.RecommendedConfigPathEnvVar); env != "" {
		rules.Precedence = filepath.SplitList(env)
	}
	rules.ExplicitPath = kubeconfig
	cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: kubecontext})
	rc, err := cc.ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("kubernetes client configuration: %w", err)
	}
	rc.UserAgent = "lifeboat-status/" + version
	return kube.NewREST(rc)
}
