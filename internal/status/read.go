package status

import (
	"context"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"lifeboat.dev/lifeboat/internal/kube"
)

// Selection picks the nodes Read considers, as kubectl get nodes does: by
// name, or by a label selector the API server applies, else every node.
// Of those, the nodes lifeboat handles are shown.
type Selection struct {
	Names []string
	// Selector is sent with the list (nil: every node).
	Selector labels.Selector
}

// Any says whether the selection picks some nodes rather than all.
func (s Selection) Any() bool {
	return len(s.Names) > 0 || (s.Selector != nil && !s.Selector.Empty())
}

// Read reads the selected nodes, then the pods on those lifeboat handles,
// and builds their status at now. missing are the named nodes that do not
// exist (the others are read all the same); err is any other failure.
func Read(ctx context.Context, client kube.Client, sel Selection, now time.Time) (nodes []Node, missing []string, err error) {
	var items []corev1.Node
	if len(sel.Names) > 0 {
		for _, name := range sel.Names {
			if slices.ContainsFunc(items, func(n corev1.Node) bool { return n.Name == name }) || slices.Contains(missing, name) {
				continue
			}
			n, err := client.Nodes().Get(ctx, name, metav1.GetOptions{})
			switch {
			case apierrors.IsNotFound(err):
				missing = append(missing, name)
				continue
			case err != nil:
				return nil, nil, fmt.Errorf("reading node %s: %w", name, err)
			}
			items = append(items, *n)
		}
	} else {
		opts := metav1.ListOptions{}
		if sel.Selector != nil {
			opts.LabelSelector = sel.Selector.String()
		}
		nl, err := client.Nodes().List(ctx, opts)
		if err != nil {
			return nil, nil, fmt.Errorf("listing nodes: %w", err)
		}
		items = nl.Items
	}
	var pods []corev1.Pod
	for _, n := range Build(items, nil, now) {
		pl, err := client.Pods("").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + n.Name})
		if err != nil {
			return nil, nil, fmt.Errorf("listing pods on node %s: %w", n.Name, err)
		}
		for _, p := range pl.Items {
			if p.Spec.NodeName == n.Name { // client-go's fake clientset ignores field selectors
				pods = append(pods, p)
			}
		}
	}
	return Build(items, pods, now), missing, nil
}
