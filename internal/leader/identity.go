package leader

import "k8s.io/apimachinery/pkg/util/uuid"

// Identity is this replica's identity in the Lease: the pod's name (else
// the host's, else "lifeboat"), so that the Lease shows who holds it,
// followed by "_" and a random UUID, as client-go's leader election
// examples and kube-controller-manager make theirs. A name alone is not
// unique: two processes on one machine, or two machines with the same host
// name, would each see itself as the holder and both lead.
func Identity(podName, hostname string) string {
	name := podName
	if name == "" {
		name = hostname
	}
	if name == "" {
		name = "lifeboat"
	}
	return name + "_" + string(uuid.NewUUID())
}
