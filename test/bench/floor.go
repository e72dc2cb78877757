package bench

import (
	"fmt"
	"strings"
)

// Floor is what a bare client took to send the writes lifeboat needs for
// the same burst, in the same run, against an equivalent fresh set of nodes
// and pods: one cordon+taint PATCH per node, then one Eviction per pod,
// Concurrency requests at once and no client rate limit. Times are seconds
// since its first request: AllCordoned when a node watch saw the last node
// cordoned (as lifeboat's cordons are seen), CordonsAnswered and AllEvicted
// when the API server answered the last cordon and eviction, AllGone when a
// pod watch saw the last pod deleted (kwok deletes an evicted pod).
// AllReceived is apart: the seconds moto took to hand the same number of
// Spot notices to a bare SQS client with Receivers receives at once
// (receiveFloor), the floor of lifeboat's own AllReceived.
type Floor struct {
	Nodes           int     `json:"nodes"`
	Pods            int     `json:"pods"`
	Concurrency     int     `json:"concurrency"`
	AllCordoned     float64 `json:"all_cordoned_s"`
	CordonsAnswered float64 `json:"cordons_answered_s"`
	AllEvicted      float64 `json:"all_evicted_s"`
	AllGone         float64 `json:"all_pods_gone_s"`
	AllReceived     float64 `json:"all_received_s,omitempty"`
	Receivers       int     `json:"receivers,omitempty"`
	// Namespace holds the floor's pods (the audit timeline tells them from
	// lifeboat's).
	Namespace string `json:"namespace"`
	// APIRequests is the API server's apiserver_request_total by verb over
	// the floor run (every client).
	APIRequests map[string]float64 `json:"apiserver_requests_by_verb"`
	// StorageReads is Result.StorageReads over the floor run.
	StorageReads map[string]float64 `json:"apiserver_storage_reads,omitempty"`
	// APF is Result.APF over the floor run.
	APF map[string]float64 `json:"apiserver_apf,omitempty"`
	// CPU is Result.CPU over the floor run (first request to last pod gone).
	CPU map[string]float64 `json:"cpu_s_by_process,omitempty"`
	// Pipeline is the whole spot-queued job done by a bare client, with
	// moto's delivery sharing the cores (nil: not run).
	Pipeline *PipelineFloor `json:"pipeline,omitempty"`
}

// PipelineFloor is what a bare client took to do a spot-queued burst's
// whole job on its own fresh nodes and queue (runPipelineFloor): receive
// every notice, cordon each node as its notice arrives, evict its pods,
// delete its message. Unlike Floor's times, moto's delivery, the cordons
// and the evictions share the cores, as in lifeboat's burst. Seconds from
// the first receive: AllReceived when the last message came, AllCordoned
// and AllGone as Floor's, AllDeleted when the last message was deleted.
type PipelineFloor struct {
	AllReceived float64            `json:"all_received_s"`
	AllCordoned float64            `json:"all_cordoned_s"`
	AllGone     float64            `json:"all_pods_gone_s"`
	AllDeleted  float64            `json:"all_deleted_s"`
	CPU         map[string]float64 `json:"cpu_s_by_process,omitempty"`
}

// VsFloor is lifeboat's time as a multiple of the floor's: all cordoned
// against all cordoned, all drained (pods gone, node marked) against all
// pods gone. CordonedWithQueue is all cordoned against the longer of the
// bare client's all cordoned and moto's delivery to a bare receiver: no
// cordon can come before its message, so that is the floor of the whole
// path from the queue. 0 when either side has no time.
type VsFloor struct {
	Cordoned          float64 `json:"all_cordoned"`
	Drained           float64 `json:"all_drained"`
	CordonedWithQueue float64 `json:"all_cordoned_with_queue,omitempty"`
	// CordonedPipeline and DrainedPipeline are all cordoned and all
	// drained against Floor.Pipeline's (0: not run).
	CordonedPipeline float64 `json:"all_cordoned_pipeline,omitempty"`
	DrainedPipeline  float64 `json:"all_drained_pipeline,omitempty"`
}

// compare fills r.VsFloor from r's totals and r.Floor.
func (r *Result) compare() {
	if r.Floor == nil {
		r.VsFloor = nil
		return
	}
	ratio := func(a, b float64) float64 {
		if a <= 0 || b <= 0 {
			return 0
		}
		return a / b
	}
	r.VsFloor = &VsFloor{Cordoned: ratio(r.AllCordoned, r.Floor.AllCordoned), Drained: ratio(r.AllDrained, r.Floor.AllGone)}
	if r.Floor.AllReceived > 0 {
		r.VsFloor.CordonedWithQueue = ratio(r.AllCordoned, max(r.Floor.AllCordoned, r.Floor.AllReceived))
	}
	if p := r.Floor.Pipeline; p != nil {
		r.VsFloor.CordonedPipeline, r.VsFloor.DrainedPipeline = ratio(r.AllCordoned, p.AllCordoned), ratio(r.AllDrained, p.AllGone)
	}
}

// floorTable is the report's lines about the floor and where lifeboat's
// time went before the cordons (receiving), empty when neither was measured.
func (r *Result) floorTable() string {
	var b strings.Builder
	if r.AllReceived > 0 {
		fmt.Fprintf(&b, "lifeboat received all %d messages at %.2f s (its events-received counter, polled every 0.1 s; a message received again counts again, so this is a lower bound)\n", r.Nodes, r.AllReceived)
	}
	if f := r.Floor; f != nil {
		fmt.Fprintf(&b, "bare client (%d requests at once, no rate limit; %d nodes, %d pods): all cordoned %.2f s, all evicted %.2f s, all pods gone %.2f s\n",
			f.Concurrency, f.Nodes, f.Pods, f.AllCordoned, f.AllEvicted, f.AllGone)
		if f.AllReceived > 0 {
			fmt.Fprintf(&b, "bare SQS client (%d receives at once, ten messages each, nothing else): moto handed it all %d messages in %.2f s\n",
				f.Receivers, f.Nodes, f.AllReceived)
		}
		if v := r.VsFloor; v != nil {
			fmt.Fprintf(&b, "lifeboat / bare client: all cordoned %.2f x, all drained %.2f x (pods gone)\n", v.Cordoned, v.Drained)
			if v.CordonedWithQueue > 0 {
				fmt.Fprintf(&b, "lifeboat / the longer of the bare client's cordons and moto's delivery: all cordoned %.2f x\n", v.CordonedWithQueue)
			}
		}
		if p := f.Pipeline; p != nil {
			fmt.Fprintf(&b, "bare client doing the whole job (receive, cordon, evict, delete; moto sharing the cores): all received %.2f s, all cordoned %.2f s, all pods gone %.2f s, all messages deleted %.2f s\n",
				p.AllReceived, p.AllCordoned, p.AllGone, p.AllDeleted)
			if v := r.VsFloor; v != nil && v.CordonedPipeline > 0 {
				fmt.Fprintf(&b, "lifeboat / the bare client doing the whole job: all cordoned %.2f x, all drained %.2f x\n", v.CordonedPipeline, v.DrainedPipeline)
			}
			if len(p.CPU) > 0 {
				fmt.Fprintf(&b, "bare client doing the whole job: CPU seconds, by process: %s\n", cpuLine(p.CPU))
			}
		}
		if l := apfLine(f.APF); l != "" {
			fmt.Fprintf(&b, "bare client: API priority and fairness: %s\n", l)
		}
		if len(f.CPU) > 0 {
			fmt.Fprintf(&b, "bare client: CPU seconds, by process: %s\n", cpuLine(f.CPU))
		}
		if len(f.StorageReads) > 0 {
			fmt.Fprintf(&b, "bare client: apiserver lists that reached etcd, watches it closed (all clients): %s\n", storageLine(f.StorageReads))
		}
	}
	if b.Len() == 0 {
		return ""
	}
	return "\n" + b.String()
}
