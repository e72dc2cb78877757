package dsstop

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"lifeboat.dev/lifeboat/internal/drain"
)

// Event reasons, each recorded on the pod and on its node.
const (
	// ReasonStopped (Normal): an opted-in DaemonSet pod was evicted after
	// the node's other pods left and was gone before the action's
	// completion; the message says the grace it got and how long its
	// shutdown took.
	ReasonStopped = "DaemonSetPodStopped"
	// ReasonNotStopped (Warning): an opted-in DaemonSet pod was still
	// running when the step ended (no time left, its eviction refused, its
	// shutdown not over by the deadline less the margin).
	ReasonNotStopped = "DaemonSetPodNotStopped"
	// ReasonRecreated (Warning): the DaemonSet put a new pod on the node
	// after its pod there was stopped (it tolerates lifeboat's taint). It
	// is not stopped again: it dies with the instance.
	ReasonRecreated = "DaemonSetPodRecreated"
)

// recreated reports, once each, the pods the DaemonSets of stopped pods
// put on the node since the Stop began.
func (s *Stopper) recreated(node string, pods []corev1.Pod, w *watch, res *Result) {
	for i := range pods {
		p := &pods[i]
		ds := DaemonSetOf(p)
		if w.known[p.UID] || ds == "" || !w.owners[ds] {
			continue
		}
		w.known[p.UID] = true
		name := p.Namespace + "/" + p.Name
		res.Recreated = append(res.Recreated, name)
		s.log.Warn(ReasonRecreated, "node", node, "pod", name)
		s.record(node, p, corev1.EventTypeWarning, ReasonRecreated,
			"its DaemonSet put this pod on the node after its pod there was stopped (it tolerates lifeboat's taint, e.g. a toleration with operator Exists and no key): it is not stopped again and dies with the instance; give the DaemonSet tolerations that leave out lifeboat.io/ taints")
	}
}

// notStopped reports an opted-in pod left running.
func (s *Stopper) notStopped(node string, p corev1.Pod, why string, res *Result) {
	res.NotStopped = append(res.NotStopped, drain.PodProblem{Namespace: p.Namespace, Name: p.Name, Reason: why})
	s.log.Warn(ReasonNotStopped, "node", node, "pod", p.Namespace+"/"+p.Name, "reason", why)
	s.record(node, &p, corev1.EventTypeWarning, ReasonNotStopped, "not stopped before its terminate lifecycle action is completed: "+why)
}

// record records an Event on the pod and, naming the pod, on its node.
func (s *Stopper) record(node string, p *corev1.Pod, typ, reason, msg string) {
	if s.o.Recorder == nil {
		return
	}
	s.o.Recorder.Event(&corev1.ObjectReference{Kind: "Pod", APIVersion: "v1", Namespace: p.Namespace, Name: p.Name, UID: p.UID}, typ, reason, msg)
	s.o.Recorder.Event(&corev1.ObjectReference{Kind: "Node", Name: node, UID: types.UID(node)}, typ, reason, p.Namespace+"/"+p.Name+": "+msg)
}
