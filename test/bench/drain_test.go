package bench

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"golang.org/x/sync/errgroup"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"lifeboat.dev/lifeboat/test/testenv"
)

// BenchmarkDrain110Pods drains one node running 110 pods (the kubelet's
// default maximum) with grace 0 and no blocking PDB, and reports the time
// from the Spot message to the node drained, and lifeboat's own Kubernetes
// write requests per pod (from lifeboat_kube_requests_total).
func BenchmarkDrain110Pods(b *testing.B) {
	const pods = 110
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	env, moto, bin, dir := testbed(b, testenv.Options{NoScheduler: true})
	ns := env.Namespace(b)
	for i := 0; i < b.N; i++ {
		stack, err := testenv.CreateQueueStack(ctx, moto.Endpoint, fmt.Sprintf("drain%d", i))
		if err != nil {
			b.Fatal(err)
		}
		id := testenv.RandomInstanceID()
		node := env.Node(b, testenv.NodeSpec{InstanceID: id})
		g, gctx := errgroup.WithContext(ctx)
		g.SetLimit(20)
		for range pods {
			g.Go(func() error {
				_, err := env.CreatePod(gctx, testenv.PodSpec{Namespace: ns, Node: node.Name, Grace: -1})
				return err
			})
		}
		if err := g.Wait(); err != nil {
			b.Fatal(err)
		}
		port, err := testenv.FreePort()
		if err != nil {
			b.Fatal(err)
		}
		proc, err := testenv.StartProcess(fmt.Sprintf("lifeboat-drain-%d", i), bin, []string{"run",
			"--queue-url", stack.QueueURL, "--aws-endpoint", moto.Endpoint, "--region", "us-east-1",
			"--kubeconfig", env.Kubeconfig, "--leader-elect=false", "--listen", fmt.Sprintf("127.0.0.1:%d", port), "--log-level", "warn",
		}, testenv.AWSEnv(), dir)
		if err != nil {
			b.Fatal(err)
		}
		metricsURL := fmt.Sprintf("http://127.0.0.1:%d/metrics", port)
		if err := testenv.WaitHTTP(ctx, proc, nil, metricsURL); err != nil {
			b.Fatal(err)
		}
		// Let the informer settle: count only the drain's requests.
		time.Sleep(time.Second)
		before := writes(b, metricsURL)
		client := sqs.NewFromConfig(testenv.MotoAWSConfig(), func(o *sqs.Options) { o.BaseEndpoint = aws.String(moto.Endpoint) })
		body := fmt.Sprintf(`{"version":"0","id":"drain-%s","detail-type":"EC2 Spot Instance Interruption Warning","source":"aws.ec2","account":"123456789012","time":%q,"region":"us-east-1","resources":[],"detail":{"instance-id":%q,"instance-action":"terminate"}}`,
			id, time.Now().UTC().Format(time.RFC3339), id)
		b.ResetTimer()
		sent := time.Now()
		if _, err := client.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(stack.QueueURL), MessageBody: aws.String(body)}); err != nil {
			b.Fatal(err)
		}
		var took time.Duration
		for {
			n, err := env.Client.CoreV1().Nodes().Get(ctx, node.Name, metav1.GetOptions{})
			if err != nil {
				b.Fatal(err)
			}
			if n.Annotations["lifeboat.io/drained"] != "" {
				took = time.Since(sent)
				break
			}
			if time.Since(sent) > 2*time.Minute {
				b.Fatalf("node not drained after 2 minutes; lifeboat log:\n%s", proc.Tail(40))
			}
			time.Sleep(10 * time.Millisecond)
		}
		b.StopTimer()
		left, err := env.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			b.Fatal(err)
		}
		if len(left.Items) != 0 {
			b.Fatalf("%d pods left after the drain", len(left.Items))
		}
		w := writes(b, metricsURL) - before
		proc.Stop()
		b.ReportMetric(took.Seconds(), "drain_s")
		b.ReportMetric(w/pods, "writes/pod")
	}
}

// writes sums lifeboat's write requests (POST, PUT, PATCH, DELETE) to the API.
func writes(b *testing.B, url string) float64 {
	b.Helper()
	resp, err := http.Get(url)
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		b.Fatal(err)
	}
	var sum float64
	for _, line := range strings.Split(string(body), "\n") {
		if !strings.HasPrefix(line, "lifeboat_kube_requests_total{") {
			continue
		}
		for _, verb := range []string{`verb="POST"`, `verb="PUT"`, `verb="PATCH"`, `verb="DELETE"`} {
			if strings.Contains(line, verb) {
				f := strings.Fields(line)
				v, err := strconv.ParseFloat(f[len(f)-1], 64)
				if err != nil {
					b.Fatal(err)
				}
				sum += v
			}
		}
	}
	return sum
}
