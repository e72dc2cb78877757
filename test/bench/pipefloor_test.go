package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"k8s.io/client-go/kubernetes"

	"lifeboat.dev/lifeboat/test/testenv"
)

// runPipelineFloor times a bare client doing a spot-queued burst's whole
// job the least costly way any client could, on a fresh set of n nodes
// with podsPer pods each, so that moto's delivery, the cordons and the
// evictions share the cores as they do in lifeboat's burst (runFloor
// times them apart). It queues n Spot notices (sendSpotNotices), then:
// receiveFloorPollers receives at once, ten messages each, every message
// hidden for 10 minutes (no visibility changes); each notice's node
// cordoned (floorCordonPatch) as soon as it arrives; its pods (listed
// before the clock starts, so no list in the burst) evicted once the node
// is cordoned; its message deleted, ten to a DeleteMessageBatch, once its
// evictions were answered. floorConcurrency requests to the API server at
// once, a cordon before any eviction whenever one is waiting. Times are
// seconds from the first receive.
func runPipelineFloor(ctx context.Context, b *testing.B, env *testenv.Env, moto *testenv.Moto, i, n, podsPer int) *PipelineFloor {
	ns, f, client, pods := floorFleet(ctx, b, env, fmt.Sprintf("pipe-%d", i), n, podsPer)
	defer f.deleteNodes(ctx, env)
	nodeOf := make(map[string]string, n) // instance ID -> node
	for j, id := range f.ids {
		nodeOf[id] = f.names[j]
	}
	podsOf := make(map[string][]string, n)
	for _, p := range pods.Items {
		podsOf[p.Spec.NodeName] = append(podsOf[p.Spec.NodeName], p.Name)
	}
	stack, err := testenv.CreateQueueStack(ctx, moto.Endpoint, fmt.Sprintf("floor-pipe-%d", i))
	if err != nil {
		b.Fatal(err)
	}
	sendSpotNotices(ctx, b, moto.Endpoint, stack.QueueURL, f.ids, func(int, time.Time) {})
	wctx, stop := context.WithCancel(ctx)
	defer stop()
	w := watchFloor(wctx, b, env, ns, f.names, len(pods.Items))
	pids := burstProcesses(env, moto, nil)
	cpuBefore := cpuNow(pids)

	p := &pipeline{client: client, ns: ns, podsOf: podsOf,
		sqs:     sqs.NewFromConfig(testenv.MotoAWSConfig(), func(o *sqs.Options) { o.BaseEndpoint = aws.String(moto.Endpoint) }),
		queue:   stack.QueueURL,
		cordons: make(chan pipeJob, n), evictions: make(chan pipeJob, n*podsPer), acks: make(chan string, n),
		seen: make(map[string]bool, n), evicting: make(map[string]int, n), failed: make(chan error, 1)}
	rctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	t0 := time.Now()
	var wg sync.WaitGroup
	for range receiveFloorPollers {
		wg.Go(func() { p.receive(rctx, n, nodeOf) })
	}
	for range floorConcurrency {
		wg.Go(func() { p.work(rctx) })
	}
	acked := make(chan time.Time, 1)
	wg.Go(func() { p.ack(rctx, n, acked) })
	var ackedAt time.Time
	select {
	case ackedAt = <-acked:
	case err := <-p.failed:
		b.Fatalf("pipeline floor: %v", err)
	case <-rctx.Done():
		b.Fatalf("pipeline floor: not every message deleted in 10 minutes")
	}
	w.waitGone(b, 10*time.Minute)
	cpu := cpuSince(cpuBefore, pids)
	cancel()
	wg.Wait()
	gone, cordoned := w.times(b, t0)
	p.mu.Lock()
	received := p.receivedAt.Sub(t0).Seconds()
	p.mu.Unlock()
	return &PipelineFloor{AllReceived: received, AllCordoned: cordoned, AllGone: gone, AllDeleted: ackedAt.Sub(t0).Seconds(), CPU: cpu}
}

// pipeJob is one request of the pipeline floor: a node's cordon (pod
// empty) or one pod's eviction, with the node's receipt handle.
type pipeJob struct {
	node, pod, handle string
}

// pipeline is the pipeline floor's state shared by its goroutines.
type pipeline struct {
	client *kubernetes.Clientset
	ns     string
	podsOf map[string][]string // node -> its pods (read only)
	sqs    *sqs.Client
	queue  string

	cordons, evictions chan pipeJob
	acks               chan string // receipt handles of drained nodes
	failed             chan error  // the first error

	mu         sync.Mutex
	seen       map[string]bool // IDs of the messages received
	receivedAt time.Time       // when the last message came
	evicting   map[string]int  // node -> evictions not yet answered
}

func (p *pipeline) fail(err error) {
	select {
	case p.failed <- err:
	default:
	}
}

// receive long-polls the queue until n messages came, queueing each
// notice's cordon.
func (p *pipeline) receive(ctx context.Context, n int, nodeOf map[string]string) {
	for {
		p.mu.Lock()
		done := len(p.seen) >= n
		p.mu.Unlock()
		if done || ctx.Err() != nil {
			return
		}
		out, err := p.sqs.ReceiveMessage(ctx, floorReceive(p.queue))
		if err != nil {
			if ctx.Err() == nil {
				p.fail(fmt.Errorf("receiving: %w", err))
			}
			return
		}
		for _, m := range out.Messages {
			var notice struct {
				Detail struct {
					InstanceID string `json:"instance-id"`
				} `json:"detail"`
			}
			if err := json.Unmarshal([]byte(aws.ToString(m.Body)), &notice); err != nil {
				p.fail(fmt.Errorf("message %s: %w", aws.ToString(m.MessageId), err))
				return
			}
			node, ok := nodeOf[notice.Detail.InstanceID]
			if !ok {
				p.fail(fmt.Errorf("message %s names instance %q, not one of the floor's", aws.ToString(m.MessageId), notice.Detail.InstanceID))
				return
			}
			// A standard queue delivers at least once: a message received
			// again is not worked on again (its pods are evicted already).
			p.mu.Lock()
			again := p.seen[aws.ToString(m.MessageId)]
			p.seen[aws.ToString(m.MessageId)] = true
			if !again && len(p.seen) == n {
				p.receivedAt = time.Now()
			}
			p.mu.Unlock()
			if !again {
				p.cordons <- pipeJob{node: node, handle: aws.ToString(m.ReceiptHandle)}
			}
		}
	}
}

// work sends one request at a time until ctx ends, a waiting cordon
// before any eviction.
func (p *pipeline) work(ctx context.Context) {
	for {
		select {
		case j := <-p.cordons:
			p.cordon(ctx, j)
			continue
		default:
		}
		select {
		case j := <-p.cordons:
			p.cordon(ctx, j)
		case j := <-p.evictions:
			p.evict(ctx, j)
		case <-ctx.Done():
			return
		}
	}
}

func (p *pipeline) cordon(ctx context.Context, j pipeJob) {
	if err := floorCordon(ctx, p.client, j.node); err != nil {
		p.fail(fmt.Errorf("cordoning %s: %w", j.node, err))
		return
	}
	pods := p.podsOf[j.node]
	p.mu.Lock()
	p.evicting[j.node] = len(pods)
	p.mu.Unlock()
	if len(pods) == 0 {
		p.acks <- j.handle
	}
	for _, pod := range pods {
		p.evictions <- pipeJob{node: j.node, pod: pod, handle: j.handle}
	}
}

func (p *pipeline) evict(ctx context.Context, j pipeJob) {
	if err := floorEvict(ctx, p.client, p.ns, j.pod); err != nil {
		p.fail(fmt.Errorf("evicting %s: %w", j.pod, err))
		return
	}
	p.mu.Lock()
	p.evicting[j.node]--
	last := p.evicting[j.node] == 0
	p.mu.Unlock()
	if last {
		p.acks <- j.handle
	}
}

// ack deletes the drained nodes' messages, ten to a batch (or what came
// within 100 ms), and sends the time once n were deleted.
func (p *pipeline) ack(ctx context.Context, n int, acked chan<- time.Time) {
	var batch []string
	deleted := 0
	flush := func() bool {
		if len(batch) == 0 {
			return true
		}
		entries := make([]sqstypes.DeleteMessageBatchRequestEntry, len(batch))
		for k, h := range batch {
			entries[k] = sqstypes.DeleteMessageBatchRequestEntry{Id: aws.String(fmt.Sprint(k)), ReceiptHandle: aws.String(h)}
		}
		out, err := p.sqs.DeleteMessageBatch(ctx, &sqs.DeleteMessageBatchInput{QueueUrl: aws.String(p.queue), Entries: entries})
		if err == nil && len(out.Failed) > 0 {
			err = fmt.Errorf("%d of %d entries failed, first: %s", len(out.Failed), len(entries), aws.ToString(out.Failed[0].Message))
		}
		if err != nil {
			if ctx.Err() == nil {
				p.fail(fmt.Errorf("deleting messages: %w", err))
			}
			return false
		}
		deleted += len(batch)
		batch = batch[:0]
		if deleted == n {
			acked <- time.Now()
		}
		return true
	}
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case h := <-p.acks:
			if batch = append(batch, h); len(batch) == 10 && !flush() {
				return
			}
		case <-tick.C:
			if !flush() {
				return
			}
		case <-ctx.Done():
			return
		}
	}
}
