package check

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"lifeboat.dev/lifeboat/internal/nodes"
	imdssrc "lifeboat.dev/lifeboat/internal/source/imds"
)

const hopLimitFix = "run the DaemonSet on the host network (the chart's default, useHostNetwork=true; hostNetwork: true in the pod spec) " +
	"and keep the hop limit at 1: a pod on the pod network is one hop further and never gets the token. Raising the hop limit to 2 " +
	"would hand the instance role's credentials to every pod on the node (docs/install.md#imds-mode)"

// imds reads the instance ID through the metadata client `lifeboat run`
// uses, at the endpoint it resolves, so that check says OK exactly when
// run's reads succeed and otherwise reports run's error. After a token
// failure it reads once without a token to tell the hop limit (the
// token's answer dies one hop short of a pod while GETs still answer)
// from an outage.
func (r *run) imds(ctx context.Context) {
	if r.c.IMDSErr != nil {
		r.add("imds", Fail, fmt.Sprintf("no instance metadata endpoint: %v", r.c.IMDSErr),
			"leave --imds-endpoint, AWS_EC2_METADATA_SERVICE_ENDPOINT and AWS_EC2_METADATA_SERVICE_ENDPOINT_MODE unset on EC2, or set the mode to IPv4 or IPv6 (docs/imds.md)")
		return
	}
	client := r.c.IMDS
	if client == nil {
		r.add("imds", Fail, "no instance metadata client", "")
		return
	}
	endpoint := client.Endpoint()
	body, err := client.Get(ctx, imdssrc.PathInstanceID)
	id := strings.TrimSpace(string(body))
	switch {
	case err == nil && client.ReadWithoutToken():
		r.imdsID = id
		r.add("imds", Warn, fmt.Sprintf("no IMDSv2 token at %s, read with IMDSv1 (--imds-allow-v1): instance %s; the PUT response hop limit is probably 1", endpoint, id), hopLimitFix)
		return
	case err == nil:
		r.imdsID = id
		r.add("imds", OK, fmt.Sprintf("IMDSv2 token obtained at %s; this is instance %s", endpoint, id), "")
		return
	}
	var terr *imdssrc.TokenError
	if !errors.As(err, &terr) {
		r.add("imds", Fail, fmt.Sprintf("reading the instance ID at %s failed: %v", endpoint, err),
			"check the instance's metadata options (aws ec2 describe-instances --query 'Reservations[].Instances[].MetadataOptions')")
		return
	}
	v1, v1Err := client.GetWithoutToken(ctx, imdssrc.PathInstanceID)
	var status interface{ HTTPStatusCode() int }
	switch {
	case v1Err == nil:
		r.imdsID = strings.TrimSpace(string(v1))
		r.add("imds", Fail, fmt.Sprintf("at %s: %v, but IMDSv1 answers (instance %s): the PUT response hop limit is probably 1", endpoint, err, r.imdsID), hopLimitFix)
	case errors.As(v1Err, &status) && status.HTTPStatusCode() == http.StatusUnauthorized:
		r.add("imds", Fail, fmt.Sprintf("at %s: %v, while metadata answers 401 (tokens required): the PUT response hop limit is probably 1", endpoint, err), hopLimitFix)
	default:
		r.add("imds", Fail, fmt.Sprintf("instance metadata is unreachable at %s: %v (without a token: %v)", endpoint, err, v1Err),
			"run on an EC2 instance with the metadata endpoint enabled (--http-endpoint enabled) and let the pod reach 169.254.169.254 (network policies); --imds-endpoint overrides the address")
	}
}

// imdsNode checks that --node-name is a node, and the node of this instance.
func (r *run) imdsNode(ctx context.Context) {
	if r.c.Kube == nil {
		return
	}
	n, err := r.c.Kube.CoreV1().Nodes().Get(ctx, r.cfg.NodeName, metav1.GetOptions{})
	if err != nil {
		r.add("node", Fail, fmt.Sprintf("--node-name %q: %v", r.cfg.NodeName, err),
			"set --node-name from the downward API: env LIFEBOAT_NODE_NAME valueFrom fieldRef spec.nodeName")
		return
	}
	id := nodes.InstanceID(n.Spec.ProviderID)
	switch {
	case r.imdsID == "":
		r.add("node", Warn, fmt.Sprintf("node %s exists (providerID %q); instance metadata gave no instance ID to compare", n.Name, n.Spec.ProviderID), "")
	case id != r.imdsID:
		r.add("node", Fail, fmt.Sprintf("node %s is instance %q (providerID %q), but instance metadata says this is %s", n.Name, id, n.Spec.ProviderID, r.imdsID),
			"set --node-name from the downward API (spec.nodeName), not by hand")
	default:
		r.add("node", OK, fmt.Sprintf("node %s is this instance (%s)", n.Name, id), "")
	}
}
