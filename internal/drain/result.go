package drain

import (
	"errors"
	"fmt"
	"strings"

	"lifeboat.dev/lifeboat/internal/textlist"
)

// Result is the outcome of a drain.
type Result struct {
	// Evicted counts evictions the API server accepted (and pods found gone).
	Evicted int
	// Pods names them (namespace/name), for Events and notifications;
	// those cut off (CutOff) among them did not leave.
	Pods []string
	// GraceCapped counts pods whose grace period was cut to fit the deadline.
	GraceCapped int
	// ForceDeleted counts pods deleted at the deadline.
	ForceDeleted int
	// Remaining counts pods still on the node: the deadline passed without
	// force deletion, their eviction was refused (NotEvicted) and there was
	// no deadline, they are Stuck, or dry-run.
	Remaining int
	// NotEvicted lists pods whose eviction was refused for good (a 403 from
	// an admission webhook, 400, 422, ...), with the API server's answer.
	// They are not retried; the node's other pods and later priority groups
	// are drained all the same. With a deadline they are waited for until
	// it and then force-deleted (ForceDeleteAtDeadline) or left
	// (ErrDeadline); without one the drain ends with ErrNotEvicted.
	NotEvicted []PodProblem
	// DeletedBlocked lists the pods whose eviction was still refused when
	// an enforced deadline neared, deleted in time for their shutdown
	// (Options.DeleteBlocked), each with the grace period it got and what
	// blocked it. They are waited for like the pods evicted, and are not
	// counted in Evicted.
	DeletedBlocked []PodProblem
	// Stuck lists pods that were asked to leave but were still present past
	// their bound (Options.StuckAfter); the drain ends with ErrStuck.
	Stuck []PodProblem
	// Finished names the pods whose containers had all ended while their
	// objects stayed (a finalizer nobody removes): off the node, not waited
	// for; each reason says what holds its object.
	Finished []PodProblem
	// CutOff names the pods still on the node when the drain ended before
	// they were gone: at the deadline (left, or force-deleted), or when the
	// drain was canceled (new events for the node, the Node deleted), each
	// with why (CutOffPod.Cause). Sorted by namespace/name.
	CutOff []CutOffPod
	// Listed: the drain listed the node's pods, so Remaining, NotEvicted,
	// Stuck and CutOff say how the node stood when it ended. A drain
	// stopped before its list (canceled at once by new events, the Node
	// deleted) saw nothing: the pods an earlier drain left are still
	// there as far as anyone knows.
	Listed bool
}

// PodProblem names a pod the drain could not move off the node, and why.
type PodProblem struct {
	Namespace, Name string
	Reason          string
}

func (p PodProblem) String() string { return p.Namespace + "/" + p.Name + ": " + p.Reason }

// ErrDeadline is returned (wrapped) when AWS's deadline passed with pods left.
var ErrDeadline = errors.New("deadline passed before the node was empty")

// ErrNotEvicted is returned (wrapped) when a drain without a deadline ended
// with pods whose eviction was refused for good (Result.NotEvicted).
// Draining again will not help.
var ErrNotEvicted = errors.New("pods could not be evicted")

// ErrStuck is returned (wrapped) when pods that were asked to leave were
// still present past their bound (Result.Stuck): the drain stopped waiting
// for them. After the deadline's force deletion it comes with ErrDeadline.
var ErrStuck = errors.New("pods did not leave the node")

// withRefused adds the refused evictions to a drain's error, so that the
// report of a passed deadline says why those pods were left.
func (r *Result) withRefused(err error) error {
	if len(r.NotEvicted) == 0 || !errors.Is(err, ErrDeadline) {
		return err
	}
	return fmt.Errorf("%w; eviction refused: %s", err, ListProblems(r.NotEvicted))
}

// incomplete is the error of a drain that ended with pods left that no
// wait could remove: refused evictions without a deadline, stuck pods.
func (r *Result) incomplete(node string, refusedLeft int, forcedStuck bool) error {
	var msgs []string
	var errs []error
	if refusedLeft > 0 {
		msgs = append(msgs, fmt.Sprintf("%d pods could not be evicted (%s)", refusedLeft, ListProblems(r.NotEvicted)))
		errs = append(errs, ErrNotEvicted)
	}
	if len(r.Stuck) > 0 {
		msgs = append(msgs, fmt.Sprintf("%d pods did not leave (%s)", len(r.Stuck), ListProblems(r.Stuck)))
		errs = append(errs, ErrStuck)
	}
	if forcedStuck {
		errs = append(errs, ErrDeadline)
	}
	if len(errs) == 0 {
		return nil
	}
	return &drainError{msg: "draining node " + node + ": " + strings.Join(msgs, "; "), errs: errs}
}

// drainError carries several sentinel errors (errors.Is matches each).
type drainError struct {
	msg  string
	errs []error
}

func (e *drainError) Error() string   { return e.msg }
func (e *drainError) Unwrap() []error { return e.errs }

// ListProblems names up to five pods and why, for an Event or a log line.
func ListProblems(ps []PodProblem) string { return ListFive(ps) }

// ListFive joins the first five of xs with "; ", then "and N more".
func ListFive[T fmt.Stringer](xs []T) string { return textlist.Join(xs, 5, "; ") }

// addWait adds what a wait saw.
func (r *Result) addWait(w waitResult) {
	r.ForceDeleted += w.forced
	r.Remaining += w.left + len(w.stuck)
	r.Stuck = append(r.Stuck, w.stuck...)
	r.Finished = append(r.Finished, w.finished...)
	r.CutOff = append(r.CutOff, w.cut...)
	r.DeletedBlocked = append(r.DeletedBlocked, w.deletedBlocked...)
}
