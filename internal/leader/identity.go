package leader

import "k8s.io/apimachinery/pkg/util/uuid"

// Identity is this replica's identity in the Lease.
//
// In a pod (podName set, as the chart sets --pod-name) it is the pod's
// name: unique among the Deployment's replicas, what `kubectl get lease`
// shows the operator, and kept by the pod's restarted container, which
// takes its own Lease over at once (its previous process is gone) instead
// of waiting for it to run out.
//
// Outside a pod it is the host's name (else "lifeboat") followed by "_"
// and a random UUID, as client-go's leader election examples and
// kube-controller-manager make theirs: a host name alone is not unique
// (two processes on one machine, two machines with one name), and replicas
// sharing an identity each see themselves as the holder and both lead.
func Identity(podName, hostname string) string {
	if podName != "" {
		return podName
	}
	name := hostname
	if name == "" {
		name = "lifeboat"
	}
	return name + "_" + string(uuid.NewUUID())
}
