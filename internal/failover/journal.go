// Package failover keeps, while this replica leads, the receipt handles of
// the queue messages it holds in a few ConfigMaps (the journal), so that
// the next leader can make them visible at once when this one dies without
// handing them back (SIGKILL, an OOM kill, a lost node). Without it those
// messages stay hidden for the visibility timeout, and a storm's last nodes
// wait it out (docs/benchmarks.md, issue 28 item 6). A replica that stops
// cleanly hands its messages back itself (sqs.Source) and empties the
// journal on the way out.
//
// Newly held messages are written within Soon of their receive (Notify);
// other changes (messages done, visibility extended) at the next Interval.
// A message received less than Soon before a crash may be missing from the
// journal and comes back after its visibility timeout, as before.
package failover

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"

	"lifeboat.dev/lifeboat/internal/source/sqs"
)

// Shards is the number of ConfigMaps the journal is spread over: a
// ConfigMap holds at most 1 MiB, and a real SQS receipt handle is about
// 400 bytes, so one holds ~2,200 messages and four a region-wide storm's
// 5,000 with room to spare. A message's shard is fixed by its ID, so that
// a change to one message rewrites one ConfigMap.
const Shards = 4

// Soon bounds how long a newly received message waits to be journaled: a
// round of writes follows a Notify at once, or Soon after the last round.
// A kill at the peak of a 1,000-notice storm lost the last second's
// receives (112 messages) to the visibility timeout when every write
// waited for Interval (docs/benchmarks.md).
const Soon = 250 * time.Millisecond

// Interval is how often the journal catches up with the rest: messages
// done (a stale entry only makes the next leader try a deleted message)
// and extended visibilities (a stale one only makes it more careful).
// Written every Soon as well, a 5,000-message journal would send etcd
// several megabytes a second for the whole storm.
const Interval = 2 * time.Second

// bytesPerSecond bounds what the journal sends the API server, and etcd
// keeps a revision of, in a storm: after a round that wrote n bytes the
// next waits n/bytesPerSecond at least. A 5,000-message journal of real
// receipt handles is about 2 MB, so its rounds come every 2 s instead of
// every Soon (8 MB a second); a 1,000-message one's every 400 ms.
const bytesPerSecond = 1 << 20

// maxShardBytes bounds a shard's data below the API server's 1 MiB limit
// for a ConfigMap; what does not fit is left out (and logged): those
// messages come back after their visibility timeout.
const maxShardBytes = 960 << 10

// revealMargin: a message whose recorded visibility ends sooner than this
// is not made visible by the next leader. It comes back by itself anyway,
// and one whose visibility lapsed may be held by another consumer already;
// the margin also covers the two replicas' clocks differing a little
// (nodes kept by NTP or chrony differ by milliseconds).
const revealMargin = time.Second

// dataKey is the key of a shard's lines, one message each.
const dataKey = "messages"

// ConfigMaps is the part of client-go's ConfigMapInterface the journal uses.
type ConfigMaps interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (*corev1.ConfigMap, error)
	Create(ctx context.Context, cm *corev1.ConfigMap, opts metav1.CreateOptions) (*corev1.ConfigMap, error)
	Update(ctx context.Context, cm *corev1.ConfigMap, opts metav1.UpdateOptions) (*corev1.ConfigMap, error)
}

// Holder is what the journal records: the messages the SQS source holds.
type Holder interface {
	Held() []sqs.Held
}

// Reveal makes the messages of receipt handles visible at once and returns
// how many it made visible (sqs.Source.Reveal).
type Reveal func(ctx context.Context, handles []string) int

// Journal writes the messages a leader holds to its shards.
type Journal struct {
	cms    ConfigMaps
	name   string
	labels map[string]string
	clock  clock.WithTicker
	log    *slog.Logger

	shards [Shards]shard

	// notify wakes Run when messages are newly held (Notify).
	notify chan struct{}

	mu sync.Mutex
	// recorded are the receipt handles the journal holds as last written
	// by this replica, by shard.
	recorded [Shards]map[string]bool
}

// shard is what this replica last wrote to (or read from) one ConfigMap.
type shard struct {
	known           bool // the ConfigMap's state is known: read or written by this replica
	exists          bool
	resourceVersion string
	data            string
	failing         bool // the last write failed (logged once until one succeeds)
	leftOut         int  // messages that did not fit at the last write
}

// New returns the journal whose shards are ConfigMaps Name(name, 0..Shards-1)
// of cms, labelled with labels.
func New(cms ConfigMaps, name string, labels map[string]string, clk clock.WithTicker, log *slog.Logger) *Journal {
	return &Journal{cms: cms, name: name, labels: labels, clock: clk, log: log.With("journal", name), notify: make(chan struct{}, 1)}
}

// Name is the name of shard i of the journal called name.
func Name(name string, i int) string {
	return fmt.Sprintf("%s-%d", name, i)
}

// Recover reads the journal a previous leader left and makes its messages
// whose visibility has not lapsed visible again at once, then empties it.
// Called once a replica leads, before it receives. Only the leader writes
// the journal: a former leader that was paused finds its writes refused by
// its fence (leader.Fence) once its lease may have run out.
func (j *Journal) Recover(ctx context.Context, reveal Reveal) error {
	now := j.clock.Now()
	var handles []string
	stale, bad := 0, 0
	for i := range j.shards {
		cm, err := j.cms.Get(ctx, Name(j.name, i), metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			j.shards[i] = shard{known: true}
			continue
		case err != nil:
			return fmt.Errorf("reading the failover journal %s: %w", Name(j.name, i), err)
		}
		j.shards[i] = shard{known: true, exists: true, resourceVersion: cm.ResourceVersion, data: cm.Data[dataKey]}
		entries, malformed := decode(cm.Data[dataKey])
		bad += malformed
		for _, e := range entries {
			if e.HiddenUntil.Before(now.Add(revealMargin)) {
				stale++
				continue
			}
			handles = append(handles, e.Handle)
		}
	}
	if bad > 0 {
		j.log.Warn("failover journal lines not understood, skipped", "lines", bad)
	}
	if len(handles) > 0 || stale > 0 {
		revealed := reveal(ctx, handles)
		j.log.Info("made the previous leader's messages visible again", "messages", len(handles), "revealed", revealed,
			"notRevealed", "visibility lapsed or about to: they come back by themselves", "lapsed", stale)
	}
	j.write(ctx, nil)
	return nil
}

// Notify tells the journal that the holder holds new messages: they are
// written within Soon. It never blocks (sqs.Options.OnHold).
func (j *Journal) Notify() {
	select {
	case j.notify <- struct{}{}:
	default:
	}
}

// Run writes what the holder holds while it changes (newly held messages
// within Soon of a Notify, everything else every Interval) until ctx ends;
// then once more, with what the holder still holds (nothing, after the
// source handed its messages back on a stop).
func (j *Journal) Run(ctx context.Context, h Holder) {
	t := j.clock.NewTicker(Interval)
	defer t.Stop()
	var next time.Time        // the earliest next round (Soon, bytesPerSecond)
	var soon <-chan time.Time // armed by a Notify
	// A round is never cut short by the stop (its writes would fail with
	// "context canceled" and the last one wait for the next): the stop
	// waits for it, then writes once more.
	round := func() {
		soon = nil
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), roundTimeout)
		defer cancel()
		started := j.clock.Now()
		wrote := j.write(rctx, h.Held())
		next = started.Add(max(Soon, time.Duration(wrote)*time.Second/bytesPerSecond))
	}
	for {
		select {
		case <-ctx.Done():
			round()
			return
		case <-t.C():
			if soon == nil && !j.clock.Now().Before(next) {
				round()
			}
		case <-soon:
			round()
		case <-j.notify:
			if soon != nil {
				continue // a round is due already
			}
			if wait := next.Sub(j.clock.Now()); wait > 0 {
				soon = j.clock.After(wait)
				continue
			}
			round()
		}
	}
}

// roundTimeout bounds a round of writes (four ConfigMaps at most).
const roundTimeout = 5 * time.Second

// write brings every shard to what held says, writing only the shards that
// changed, and returns the bytes it sent.
func (j *Journal) write(ctx context.Context, held []sqs.Held) (wrote int) {
	for i, data := range split(held) {
		s := &j.shards[i]
		if s.known && s.data == data.text && s.leftOut == data.leftOut {
			continue
		}
		if data.leftOut > 0 && data.leftOut != s.leftOut {
			j.log.Warn("failover journal shard full: messages left out come back after their visibility timeout if this replica dies",
				"shard", Name(j.name, i), "leftOut", data.leftOut)
		}
		err := j.put(ctx, i, data.text)
		wrote += len(data.text)
		if err == nil {
			j.record(i, data.handles)
		}
		switch {
		case apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err):
			// Someone else wrote the shard. Not a former leader: the
			// fence refuses its writes once its lease may have run out.
			// Read it again and write over it at the next tick.
			j.log.Info("the failover journal changed under this replica; reading it again", "shard", Name(j.name, i))
			s.known = false
			continue
		case err != nil:
			if !s.failing {
				j.log.Warn("writing the failover journal failed; retrying at the next round", "shard", Name(j.name, i), "error", err.Error())
			}
			s.failing = true
			continue
		}
		if s.failing {
			j.log.Info("writing the failover journal works again", "shard", Name(j.name, i))
		}
		s.failing, s.leftOut = false, data.leftOut
	}
	return wrote
}

func (j *Journal) record(i int, handles []string) {
	set := make(map[string]bool, len(handles))
	for _, h := range handles {
		set[h] = true
	}
	j.mu.Lock()
	j.recorded[i] = set
	j.mu.Unlock()
}

// Recorded reports whether the journal, as this replica last wrote it,
// holds handle: the next leader will make its message visible. A replica
// that may have lost the Lease does not hand such a message back itself:
// by then the next leader may have made it visible and received it, and a
// second hand-back would show it to a third consumer while the new leader
// works on it (sqs.Options.KeepOnHandBack).
func (j *Journal) Recorded(handle string) bool {
	j.mu.Lock()
	defer j.mu.Unlock()
	for _, set := range j.recorded {
		if set[handle] {
			return true
		}
	}
	return false
}

// put writes data to shard i: an update of the version this replica knows,
// or a create while there is none. A shard whose state this replica does
// not know is read first; one that does not exist is not created empty.
func (j *Journal) put(ctx context.Context, i int, data string) error {
	s := &j.shards[i]
	if !s.known {
		got, err := j.cms.Get(ctx, Name(j.name, i), metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			*s = shard{known: true, failing: s.failing, leftOut: s.leftOut}
		case err != nil:
			return err
		default:
			*s = shard{known: true, exists: true, resourceVersion: got.ResourceVersion, data: got.Data[dataKey], failing: s.failing, leftOut: s.leftOut}
		}
		if s.data == data {
			return nil
		}
	}
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: Name(j.name, i), Labels: j.labels, ResourceVersion: s.resourceVersion},
		Data:       map[string]string{dataKey: data},
	}
	var out *corev1.ConfigMap
	var err error
	if s.exists {
		out, err = j.cms.Update(ctx, cm, metav1.UpdateOptions{})
	} else {
		out, err = j.cms.Create(ctx, cm, metav1.CreateOptions{})
	}
	if err != nil {
		return err
	}
	s.exists, s.resourceVersion, s.data = true, out.ResourceVersion, data
	return nil
}
