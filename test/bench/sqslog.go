package bench

// The SQS calls of a failover run's replicas, per message: receives,
// deletes, hand-backs and visibility extensions.

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"
)

// Messages are the burst's SQS messages as both replicas saw them.
type Messages struct {
	Sent int `json:"sent"`
	// Receives and Deletes: messages by how often a replica received /
	// deleted them (a delete answered 200).
	Receives map[int]int `json:"messages_by_receives"`
	Deletes  map[int]int `json:"messages_by_deletes"`
	// HandedBack counts messages made visible again at once (visibility
	// 0) by a replica.
	HandedBack int `json:"handed_back"`
	// Regained: for messages received more than once, seconds from the
	// first receive to the second (a hand-back: about at once; a dead
	// consumer's: the visibility timeout).
	Regained Percentiles `json:"first_to_second_receive,omitzero"`
	// Calls are both replicas' SQS calls answered 200, by action, over
	// the whole run (idle receives included); Extensions the visibility
	// changes to more than 0 among their entries (one per message and
	// round: the cost of keeping messages hidden).
	Calls      map[string]int `json:"calls_by_action"`
	Extensions int            `json:"extension_entries"`
	// Repeated tells, for each message deleted more than once or received
	// more than twice, its receives and deletes in order.
	Repeated map[string][]string `json:"repeated,omitempty"`
	// LeftVisible and LeftNotVisible are the queue's approximate counts at
	// the end.
	LeftVisible    int `json:"left_visible"`
	LeftNotVisible int `json:"left_not_visible"`
}

// sqsLog records the SQS calls of the replicas (seen through a proxy each):
// which message every receipt handle belongs to, when and by which replica
// each message was received and deleted, and which were handed back.
type sqsLog struct {
	mu         sync.Mutex
	byHandle   map[string]string
	received   map[string][]sqsCall // receives, in order
	deleted    map[string][]sqsCall
	handed     map[string]bool
	calls      map[string]int
	extensions int
	unknown    int // deletes or changes of handles never seen received
}

// sqsCall is a receive or a delete of one message: when, by which replica
// and with which receipt handle.
type sqsCall struct {
	at      time.Time
	replica string
	handle  string
}

func newSQSLog() *sqsLog {
	return &sqsLog{byHandle: map[string]string{}, received: map[string][]sqsCall{}, deleted: map[string][]sqsCall{},
		handed: map[string]bool{}, calls: map[string]int{}}
}

// record reads one answered SQS call of replica (AWS JSON protocol).
func (l *sqsLog) record(replica, action string, status int, request, response []byte, at time.Time) {
	if status != 200 {
		return
	}
	type entry struct {
		MessageID         string `json:"MessageId"`
		ReceiptHandle     string `json:"ReceiptHandle"`
		VisibilityTimeout *int   `json:"VisibilityTimeout"`
	}
	var req struct {
		entry
		Entries []entry `json:"Entries"`
	}
	_ = json.Unmarshal(request, &req)
	l.mu.Lock()
	defer l.mu.Unlock()
	l.calls[action]++
	id := func(handle string) string {
		m, ok := l.byHandle[handle]
		if !ok {
			l.unknown++
		}
		return m
	}
	switch action {
	case "ReceiveMessage":
		var out struct {
			Messages []entry `json:"Messages"`
		}
		_ = json.Unmarshal(response, &out)
		for _, m := range out.Messages {
			l.byHandle[m.ReceiptHandle] = m.MessageID
			l.received[m.MessageID] = append(l.received[m.MessageID], sqsCall{at: at, replica: replica, handle: m.ReceiptHandle})
		}
	case "DeleteMessage":
		if m := id(req.ReceiptHandle); m != "" {
			l.deleted[m] = append(l.deleted[m], sqsCall{at: at, replica: replica, handle: req.ReceiptHandle})
		}
	case "ChangeMessageVisibility", "ChangeMessageVisibilityBatch":
		for _, e := range append(req.Entries, req.entry) {
			if e.ReceiptHandle == "" || e.VisibilityTimeout == nil {
				continue
			}
			if *e.VisibilityTimeout > 0 {
				l.extensions++
				continue
			}
			if m := id(e.ReceiptHandle); m != "" {
				l.handed[m] = true
			}
		}
	}
}

// messages summarizes the log for the ids of the messages sent; times in
// Repeated are seconds since t0.
func (l *sqsLog) messages(ids []string, t0 time.Time) Messages {
	l.mu.Lock()
	defer l.mu.Unlock()
	m := Messages{Sent: len(ids), Receives: map[int]int{}, Deletes: map[int]int{}, Calls: maps.Clone(l.calls), Extensions: l.extensions}
	var gaps []float64
	for _, id := range ids {
		r, d := l.received[id], l.deleted[id]
		m.Receives[len(r)]++
		m.Deletes[len(d)]++
		if l.handed[id] {
			m.HandedBack++
		}
		if len(r) > 1 {
			gaps = append(gaps, r[1].at.Sub(r[0].at).Seconds())
		}
		if len(d) > 1 || len(r) > 2 {
			if m.Repeated == nil {
				m.Repeated = map[string][]string{}
			}
			m.Repeated[id] = history(r, d, t0)
		}
	}
	if len(gaps) > 0 {
		m.Regained = percentiles(gaps)
	}
	return m
}

// history lists a message's receives and deletes in time order, e.g.
// "0.12 s b received #2", "0.50 s b deleted with #2's handle".
func history(received, deleted []sqsCall, t0 time.Time) []string {
	type line struct {
		at   time.Time
		text string
	}
	var lines []line
	for i, r := range received {
		lines = append(lines, line{r.at, fmt.Sprintf("%.2f s %s received #%d", r.at.Sub(t0).Seconds(), r.replica, i+1)})
	}
	for _, d := range deleted {
		which := "an unknown"
		for i, r := range received {
			if r.handle == d.handle {
				which = fmt.Sprintf("#%d's", i+1)
			}
		}
		lines = append(lines, line{d.at, fmt.Sprintf("%.2f s %s deleted with %s handle", d.at.Sub(t0).Seconds(), d.replica, which)})
	}
	slices.SortStableFunc(lines, func(a, b line) int { return a.at.Compare(b.at) })
	out := make([]string, len(lines))
	for i, x := range lines {
		out[i] = x.text
	}
	return out
}

// receivedIDs returns the ids of every message received.
func (l *sqsLog) receivedIDs() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Sorted(maps.Keys(l.received))
}
