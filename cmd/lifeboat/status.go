package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"time"

	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/clientcmd"

	"lifeboat.dev/lifeboat/internal/kube"
	"lifeboat.dev/lifeboat/internal/status"
)

const statusHeader = `usage: lifeboat status [NODE...] [-l SELECTOR] [-o table|wide|json|yaml|name] [--no-headers] [-w]
                       [--kubeconfig FILE] [--context NAME]

Show the nodes lifeboat is handling now, read from the state it keeps on the
Node objects: the reason, AWS's deadline and the time left, the pods still on
each node, the lifecycle heartbeats sent and whether the lifecycle action is
pending or completed (docs/status.md). Nodes are picked as 'kubectl get nodes'
picks them: by name, or by label selector (-l). It needs only read access to
nodes and pods, with the kubeconfig kubectl uses (--kubeconfig, KUBECONFIG or
~/.kube/config). Installed as ` + pluginBinary + ` it is 'kubectl lifeboat status'.

Exit status: 0 printed; 1 an error (the API server unreachable, a named node
not found: the others are printed); 2 a wrong command line.

flags:
`

// pluginBinary is the name kubectl runs for `kubectl lifeboat` (its plugin
// rule: kubectl-<name> on PATH); deploy/krew/lifeboat.yaml installs the
// binary under it. lifeboat ignores the name it runs as (main passes
// os.Args[1:]), so the plugin is the same program.
const pluginBinary = "kubectl-lifeboat"

// statusOptions is the command line of lifeboat status.
type statusOptions struct {
	sel        status.Selection
	print      status.PrintOptions
	watch      bool
	interval   time.Duration
	kubeconfig string
	context    string
}

// errHelpShown: --help was asked for and printed.
var errHelpShown = errors.New("help shown")

// parseStatus reads lifeboat status's command line. It uses pflag, kubectl's
// flag library (unlike the other commands' flag): kubectl's shorthands
// (-o wide, -ojson, --output), and node names before or after the flags.
func parseStatus(args []string, stdout io.Writer) (statusOptions, error) {
	var o statusOptions
	flags := pflag.NewFlagSet("lifeboat status", pflag.ContinueOnError)
	flags.SetOutput(io.Discard)
	flags.SortFlags = false
	output := flags.StringP("output", "o", "table", "output format: table, wide (more columns), json, yaml (a NodeStatusList) or name (node/NAME)")
	selector := flags.StringP("selector", "l", "", "label selector the nodes must match (sent to the API server), e.g. -l 'karpenter.sh/nodepool=spot'")
	flags.BoolVar(&o.print.NoHeaders, "no-headers", false, "table and wide: leave out the header lines")
	flags.BoolVarP(&o.watch, "watch", "w", false, "watch: print again whenever the status changes, until interrupted")
	flags.DurationVar(&o.interval, "interval", 2*time.Second, "with -w, how often the nodes and pods are read")
	flags.StringVar(&o.kubeconfig, "kubeconfig", "", "kubeconfig file (default: KUBECONFIG, then ~/.kube/config)")
	flags.StringVar(&o.context, "context", "", "kubeconfig context (default: the current context)")
	help := "lifeboat status --help"
	if err := flags.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			fmt.Fprint(stdout, statusHeader)
			fmt.Fprint(stdout, flags.FlagUsages())
			return o, errHelpShown
		}
		return o, usageError{err, help}
	}
	var err error
	if o.print.Output, err = status.ParseOutput(*output); err != nil {
		return o, usageError{fmt.Errorf("-o: %w", err), help}
	}
	o.sel.Names = flags.Args()
	if *selector != "" {
		if len(o.sel.Names) > 0 {
			return o, usageError{errors.New("node names and -l cannot be used together"), help}
		}
		if o.sel.Selector, err = labels.Parse(*selector); err != nil {
			return o, usageError{fmt.Errorf("-l %s: %w", *selector, err), help}
		}
	}
	o.print.Selected = o.sel.Any()
	if o.interval <= 0 {
		return o, usageError{errors.New("--interval must be positive"), help}
	}
	if o.watch && o.print.Output == status.OutputName {
		return o, usageError{errors.New("-w does not work with -o name: a list of names has no changes to show (use -o table, wide, json or yaml)"), help}
	}
	return o, nil
}

// statusCommand is `lifeboat status`.
// newClient builds the client from --kubeconfig and --context (userClient).
func statusCommand(ctx context.Context, args []string, newClient func(kubeconfig, context string) (kube.Client, error), stdout io.Writer) error {
	o, err := parseStatus(args, stdout)
	if errors.Is(err, errHelpShown) {
		return nil
	}
	if err != nil {
		return err
	}
	client, err := newClient(o.kubeconfig, o.context)
	if err != nil {
		return err
	}
	return printStatus(ctx, client, o, stdout)
}

// printStatus prints the status once, or with watch every interval when it
// changed, until ctx ends. Named nodes missing at the first read are an
// error once the others are printed; while watching, a node that goes
// later (its instance terminated) just leaves the list.
func printStatus(ctx context.Context, client kube.Client, o statusOptions, stdout io.Writer) error {
	var last []byte
	for first := true; ; first = false {
		var b bytes.Buffer
		now := time.Now()
		nodes, missing, err := status.Read(ctx, client, o.sel, now)
		if err != nil {
			if o.watch && ctx.Err() != nil {
				return nil
			}
			return err
		}
		if err := status.Print(&b, nodes, now, o.print); err != nil {
			return err
		}
		var notFound error
		if first && len(missing) > 0 {
			errs := make([]error, len(missing))
			for i, name := range missing {
				errs[i] = apierrors.NewNotFound(corev1.Resource("nodes"), name) // nodes "x" not found, as kubectl says
			}
			notFound = errors.Join(errs...)
		}
		if !o.watch || notFound != nil {
			if _, err := stdout.Write(b.Bytes()); err != nil {
				return err
			}
			return notFound
		}
		// Watching: print only what changed (the time left ticks, so a node
		// in flight is printed each interval; an idle cluster once). The
		// JSON and YAML documents carry the time: compare without it.
		key := b.Bytes()
		structured := o.print.Output == status.OutputJSON || o.print.Output == status.OutputYAML
		if structured {
			key, _ = json.Marshal(nodes)
		}
		if !bytes.Equal(key, last) {
			switch {
			case !structured:
				fmt.Fprintf(stdout, "--- %s\n", now.UTC().Format(time.RFC3339))
			case o.print.Output == status.OutputYAML && last != nil:
				fmt.Fprintln(stdout, "---") // one YAML stream, a document per change
			}
			if _, err := stdout.Write(b.Bytes()); err != nil {
				return err
			}
			last = bytes.Clone(key)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(o.interval):
		}
	}
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
