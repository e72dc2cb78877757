package check

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"lifeboat.dev/lifeboat/internal/nodes"
)

// DefaultIMDSEndpoint is where EC2 serves instance metadata.
const DefaultIMDSEndpoint = "http://169.254.169.254"

const hopLimitFix = "run the DaemonSet on the host network (the chart's default, useHostNetwork=true; hostNetwork: true in the pod spec) " +
	"and keep the hop limit at 1: a pod on the pod network is one hop further and never gets the token. Raising the hop limit to 2 " +
	"would hand the instance role's credentials to every pod on the node (docs/install.md#imds-mode)"

// imds checks that an IMDSv2 session token can be obtained from the pod
// and the instance ID read with it. A token PUT that fails while metadata
// still answers GETs is the hop limit of 1 (the PUT's answer dies one hop
// short of a pod).
func (r *run) imds(ctx context.Context) {
	endpoint := strings.TrimRight(r.cfg.IMDSEndpoint, "/")
	if endpoint == "" {
		endpoint = DefaultIMDSEndpoint
	}
	client := r.c.IMDS
	if client == nil {
		client = http.DefaultClient
	}
	token, putErr := imdsToken(ctx, client, endpoint)
	if putErr == nil {
		id, status, err := imdsGet(ctx, client, endpoint, "/latest/meta-data/instance-id", token)
		if err != nil || status != http.StatusOK {
			r.add("imds", Fail, fmt.Sprintf("IMDSv2 token obtained at %s, but reading the instance ID failed: %s", endpoint, describe(status, err)),
				"check the instance's metadata options (aws ec2 describe-instances --query 'Reservations[].Instances[].MetadataOptions')")
			return
		}
		r.imdsID = id
		r.add("imds", OK, fmt.Sprintf("IMDSv2 token obtained at %s; this is instance %s", endpoint, id), "")
		return
	}
	id, status, getErr := imdsGet(ctx, client, endpoint, "/latest/meta-data/instance-id", "")
	switch {
	case getErr == nil && status == http.StatusOK:
		r.imdsID = id
		st := Fail
		if r.cfg.IMDSAllowV1 {
			st = Warn
		}
		r.add("imds", st, fmt.Sprintf("the IMDSv2 token request to %s failed (%v) but IMDSv1 answers (instance %s): the PUT response hop limit is probably 1", endpoint, putErr, id), hopLimitFix)
	case getErr == nil && status == http.StatusUnauthorized:
		r.add("imds", Fail, fmt.Sprintf("the IMDSv2 token request to %s failed (%v) while metadata answers 401 (tokens required): the PUT response hop limit is probably 1", endpoint, putErr), hopLimitFix)
	default:
		r.add("imds", Fail, fmt.Sprintf("instance metadata is unreachable at %s: token request: %v; GET: %s", endpoint, putErr, describe(status, getErr)),
			"run on an EC2 instance with the metadata endpoint enabled (--http-endpoint enabled) and let the pod reach 169.254.169.254 (network policies, proxies); --imds-endpoint overrides the address")
	}
}

func describe(status int, err error) string {
	if err != nil {
		return err.Error()
	}
	return fmt.Sprintf("HTTP %d", status)
}

func imdsToken(ctx context.Context, c *http.Client, endpoint string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, endpoint+"/latest/api/token", nil)
	if err != nil {
		return "", err
	}
	req.Header.Set("X-aws-ec2-metadata-token-ttl-seconds", "60")
	resp, err := c.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK || len(b) == 0 {
		return "", fmt.Errorf("HTTP %d", resp.StatusCode)
	}
	return string(b), nil
}

func imdsGet(ctx context.Context, c *http.Client, endpoint, path, token string) (string, int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, endpoint+path, nil)
	if err != nil {
		return "", 0, err
	}
	if token != "" {
		req.Header.Set("X-aws-ec2-metadata-token", token)
	}
	resp, err := c.Do(req)
	if err != nil {
		return "", 0, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if err != nil {
		return "", resp.StatusCode, err
	}
	return strings.TrimSpace(string(b)), resp.StatusCode, nil
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
