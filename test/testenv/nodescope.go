package testenv

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"
)

// The writes a node's pod may attempt with its own token, for the tests of
// the chart's node-scope policies: each is one request as lifeboat makes it
// (or as an attacker holding the token would), returning the API server's
// answer.

// NodeClaimKey is the user extra in which the API server passes the node
// named in a pod-bound service-account token (Kubernetes 1.30+).
const NodeClaimKey = "authentication.kubernetes.io/node-name"

// ClientForToken returns a clientset that authenticates with a bearer
// token (a service account's, read from a pod or from the TokenRequest API).
func (e *Env) ClientForToken(token string) (kubernetes.Interface, error) {
	return kubernetes.NewForConfig(e.restConfig(token))
}

// BoundToken requests a token of a ServiceAccount bound to one of its pods,
// as the kubelet does for the pod's projected token: it names the pod and,
// when the pod is bound to a node, the node.
func (e *Env) BoundToken(ctx context.Context, pod *corev1.Pod) (string, error) {
	tr, err := e.Client.CoreV1().ServiceAccounts(pod.Namespace).CreateToken(ctx, pod.Spec.ServiceAccountName, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{
			ExpirationSeconds: ptr.To[int64](3600),
			BoundObjectRef:    &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("requesting a token bound to pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	return tr.Status.Token, nil
}

// WhoAmI asks the API server who the client is (SelfSubjectReview): the
// user name and the node claim (empty when the token names no node).
func WhoAmI(ctx context.Context, c kubernetes.Interface) (user, node string, err error) {
	r, err := c.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		return "", "", fmt.Errorf("self subject review: %w", err)
	}
	u := r.Status.UserInfo
	if v := u.Extra[NodeClaimKey]; len(v) == 1 {
		node = v[0]
	}
	return u.Username, node, nil
}

// TokenNodeClaim returns the kubernetes.io.node.name claim of a service
// account JWT, read without verifying it (the API server verifies it).
func TokenNodeClaim(token string) (string, error) {
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return "", fmt.Errorf("not a JWT (%d parts)", len(parts))
	}
	payload, err := jwtSegment(parts[1])
	if err != nil {
		return "", err
	}
	var claims struct {
		Kubernetes struct {
			Node *struct{ Name string } `json:"node"`
		} `json:"kubernetes.io"`
	}
	if err := json.Unmarshal(payload, &claims); err != nil {
		return "", fmt.Errorf("decoding JWT claims: %w", err)
	}
	if claims.Kubernetes.Node == nil {
		return "", nil
	}
	return claims.Kubernetes.Node.Name, nil
}

// CordonNode sets spec.unschedulable as lifeboat does: read, modify, update.
func CordonNode(ctx context.Context, c kubernetes.Interface, name string, dryRun bool) error {
	return updateNode(ctx, c, name, dryRun, func(n *corev1.Node) { n.Spec.Unschedulable = true })
}

// TaintNode adds a NoSchedule taint by read, modify, update.
func TaintNode(ctx context.Context, c kubernetes.Interface, name, key string) error {
	return updateNode(ctx, c, name, false, func(n *corev1.Node) {
		n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: key, Value: "test", Effect: corev1.TaintEffectNoSchedule})
	})
}

// PatchNodeMetadata merge-patches one annotation or label of a node, as
// lifeboat patches its annotations.
func PatchNodeMetadata(ctx context.Context, c kubernetes.Interface, name, field, key, value string) error {
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{field: map[string]string{key: value}}})
	if err != nil {
		return err
	}
	_, err = c.CoreV1().Nodes().Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{})
	return err
}

// NodeEvent records an Event about a node in the default namespace, where
// lifeboat's Events about nodes live.
func NodeEvent(ctx context.Context, c kubernetes.Interface, node string, dryRun bool) error {
	opts := metav1.CreateOptions{}
	if dryRun {
		opts.DryRun = []string{metav1.DryRunAll}
	}
	now := metav1.Now()
	_, err := c.CoreV1().Events(metav1.NamespaceDefault).Create(ctx, &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{GenerateName: node + "."},
		InvolvedObject: corev1.ObjectReference{Kind: "Node", Name: node, UID: types.UID(node)},
		Reason:         "Cordoned", Message: "node-scope test", Type: corev1.EventTypeNormal,
		Source:         corev1.EventSource{Component: "lifeboat"},
		FirstTimestamp: now, LastTimestamp: now, Count: 1,
	}, opts)
	return err
}

// DeletePod deletes a pod (dry run: admission runs, nothing is deleted).
func DeletePod(ctx context.Context, c kubernetes.Interface, namespace, name string, dryRun bool) error {
	opts := metav1.DeleteOptions{}
	if dryRun {
		opts.DryRun = []string{metav1.DryRunAll}
	}
	return c.CoreV1().Pods(namespace).Delete(ctx, name, opts)
}

// updateNode reads, changes and updates a node, again after a conflict
// (kwok and the kubelet write nodes too), as lifeboat does.
func updateNode(ctx context.Context, c kubernetes.Interface, name string, dryRun bool, change func(*corev1.Node)) error {
	return PatchNode(ctx, c, name, dryRun, change)
}

// PatchNode changes a node as lifeboat writes one: it reads the node, applies
// change and sends only what changed as a JSON merge patch with the read's
// resourceVersion as precondition, again after a conflict. (lifeboat holds
// no nodes update verb: internal/drain's node writes are such patches.)
// dryRun runs admission and stores nothing.
func PatchNode(ctx context.Context, c kubernetes.Interface, name string, dryRun bool, change func(*corev1.Node)) error {
	opts := metav1.PatchOptions{}
	if dryRun {
		opts.DryRun = []string{metav1.DryRunAll}
	}
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		n, err := c.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		orig, err := json.Marshal(n)
		if err != nil {
			return err
		}
		m := n.DeepCopy()
		if m.Labels == nil {
			m.Labels = map[string]string{}
		}
		change(m)
		modified, err := json.Marshal(m)
		if err != nil {
			return err
		}
		diff, err := jsonpatch.CreateMergePatch(orig, modified)
		if err != nil {
			return err
		}
		var p map[string]any
		if err := json.Unmarshal(diff, &p); err != nil {
			return err
		}
		meta, _ := p["metadata"].(map[string]any)
		if meta == nil {
			meta = map[string]any{}
			p["metadata"] = meta
		}
		meta["resourceVersion"] = n.ResourceVersion
		patch, err := json.Marshal(p)
		if err != nil {
			return err
		}
		_, err = c.CoreV1().Nodes().Patch(ctx, name, types.MergePatchType, patch, opts)
		return err
	})
}

// jwtSegment decodes one base64url segment of a JWT.
func jwtSegment(s string) ([]byte, error) {
	b, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(s, "="))
	if err != nil {
		return nil, fmt.Errorf("decoding JWT segment: %w", err)
	}
	return b, nil
}
