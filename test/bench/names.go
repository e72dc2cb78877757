package bench

import "fmt"

// fleetNodeName is the name of node j of a fleet: <prefix>-NNNN.
func fleetNodeName(prefix string, j int) string {
	return fmt.Sprintf("%s-%04d", prefix, j)
}

// podName is the name of pod k on node: <node>-p<k>. Pods are named after
// their node, deterministically: generated names (six random letters from
// Kubernetes' 27-letter alphabet) collide more often than not among
// 20,000 pods in one namespace (a 5,000-node run, 2 pods each for the
// floor and again for lifeboat, aborted on "pods ... already exists").
// Unique as long as node names are and no node is named <other node>-p<k>.
func podName(node string, k int) string {
	return fmt.Sprintf("%s-p%d", node, k)
}
