package checkdocs

import (
	"slices"
	"strings"
	"testing"
	"time"

	"lifeboat.dev/lifeboat/test/testenv"
)

// env is the testbed environment a documented command runs in
// (TestDocCommandsRun sets it up; docs/testing.md lists them). Every
// environment has lifeboat (built from ./cmd/lifeboat) and helm (bin/helm, at
// the version go.mod pins) first on PATH and the repository root as working
// directory, and sets the shell variables QUEUE_URL, CLUSTER_NAME, ROLE_ARN,
// NODE_NAME, POD_NAME and POD_NAMESPACE (not exported: lifeboat reads
// aws-node-termination-handler's variables of those names) that the docs'
// earlier steps or the downward API would set.
type env int

const (
	// notRun: the command does not run here; verdict.why says why.
	notRun env = iota
	// bare: nothing more.
	bare
	// kube: KUBECONFIG is the testbed API server's admin kubeconfig.
	kube
	// aws: kube, and AWS through LIFEBOAT_AWS_ENDPOINT (SQS, EC2,
	// EventBridge and STS in moto, Auto Scaling in test/awssim) with fake
	// credentials in us-east-1; QUEUE_URL is the queue that
	// deploy/aws/lifeboat.cfn.json creates, made in moto with its rules;
	// LIFEBOAT_LISTEN is a free loopback port.
	aws
	// queuePod: aws, and LIFEBOAT_QUEUE_URL and LIFEBOAT_CLUSTER_NAME
	// exported, as the chart's Deployment sets them.
	queuePod
	// imdsPod: kube, the metadata mock (amazon-ec2-metadata-mock) as
	// LIFEBOAT_IMDS_ENDPOINT, NODE_NAME a kwok node whose providerID is the
	// mock's instance, POD_NAMESPACE a namespace; LIFEBOAT_LISTEN as in aws.
	imdsPod
)

// verdict is what TestDocCommandsRun does with a documented command.
type verdict struct {
	in env
	// serves: the command is a server (lifeboat run); it passes once its
	// /readyz answers 200, and is then stopped.
	serves bool
	// exit is the exit status the command must end with.
	exit int
	// says is text its output must hold ("" checks none).
	says string
	// before are commands run first, in the same environment, each of which
	// must succeed (a release to replace removed, one to upgrade installed).
	before []string
	// why the command cannot run here (in == notRun).
	why string
	// takes is how long the command may run; 0: defaultTakes.
	takes time.Duration
}

// defaultTakes bounds a documented command (and its before commands).
const defaultTakes = 3 * time.Minute

// buildTakes bounds the release builds: both binaries compiled with
// -trimpath, which shares no build cache with go test's builds, on two
// cores beside the other testbed lane (180 s was not enough on
// 2026-11-28).
const buildTakes = 8 * time.Minute

// placeholders are the words of documented commands that stand for the
// reader's values, and what the test puts in their place: the testbed's
// values, through the shell variables every environment sets.
var placeholders = []struct{ doc, testbed string }{
	{"--queue-url URL", `--queue-url "$QUEUE_URL"`},
	{"--cluster-name NAME", `--cluster-name "$CLUSTER_NAME"`},
	{"--queue-url …", `--queue-url "$QUEUE_URL"`},
	{"--cluster-name …", `--cluster-name "$CLUSTER_NAME"`},
	// the saved messages of internal/message's tests
	{"FILE|DIR...", "internal/message/testdata"},
	// the release installed in the step before (migration-from-nth.md)
	{"helm upgrade lifeboat …", "helm upgrade lifeboat deploy/helm/lifeboat --namespace kube-system"},
	// an aws-node-termination-handler values file whose values all keep
	// their meaning (testdata/nth-values.yaml)
	{"-f nth-values.yaml", "-f hack/checkdocs/testdata/nth-values.yaml"},
}

// Reasons shared by several commands.
const (
	whyInMakeTest   = "`make test` runs this test: running it from here would run the test again, inside itself"
	whyPrerequisite = "a prerequisite `make test` and `make check-docs` run before this test (test: preflight deps tools helm lint)"
	whyDemo         = "the demo needs root and a real node and takes ~45 s warm; hack/demo's TestDemo runs the same program on the testbed in `make test`"
	whyPod          = "needs lifeboat running in a pod (kubectl exec): the testbed's kwok nodes run no containers; a real node needs the image, root and containerd (test/realnode)"
	whyKubectl      = "needs kubectl, which the testbed does not build (the machine's kubectl, if any, is not pinned); test/e2e TestStatusDuringDrain runs the binary as kubectl-lifeboat with the testbed's KUBECONFIG, as kubectl runs a plugin"
	whyName         = "names the command in the prose; not a command line"
	whyImage        = "pushes to a registry (the testbed has none); `make image` cross-compiles for arm64 too (~10 min cold): hack/imagebuild's TestBuild builds the same image for this machine's platform, and the real-node tests run it"
	whyRegistry     = "needs an OCI registry (the testbed has none); the package `make chart` writes is what test/testenv renders and installs (hack/chartpkg, the same code)"
	whyBuilt        = "run by `make build build-imds && ls -l bin/lifeboat bin/lifeboat-imds` (docs/benchmarks.md), which builds both targets"
)

// Install lines of the docs that other commands' before name.
const (
	installIMDS = "helm install lifeboat deploy/helm/lifeboat --namespace kube-system --set mode=imds --set image.repository=123456789012.dkr.ecr.us-east-1.amazonaws.com/lifeboat --set image.tag=0.1.0"
	// uninstall removes the release of an earlier install line (in either
	// namespace the docs install it: its ClusterRoles would clash).
	uninstall = "helm uninstall lifeboat --namespace kube-system --ignore-not-found && helm uninstall lifeboat --namespace default --ignore-not-found"
)

// verdicts classifies every command the docs hold (Extract): a command
// missing here fails TestEveryDocCommandClassified, and so does one here
// that the docs no longer hold.
var verdicts = map[string]verdict{
	// README.md
	"make demo":      {why: whyDemo},
	"make preflight": {in: bare},
	"make tools":     {why: whyPrerequisite},
	"make test":      {why: whyInMakeTest},
	"make test-unit": {why: "runs the unit tests of `make test`, whose first step they are, again (~3 min on 2 cores)"},
	"lifeboat run --queue-url URL --cluster-name NAME":  {in: aws, serves: true},
	`lifeboat run --mode imds --node-name "$NODE_NAME"`: {in: imdsPod, serves: true},
	"lifeboat check":          {in: queuePod},
	"lifeboat replay":         {why: whyName + " (docs/replay.md's `lifeboat replay FILE|DIR...` is run)"},
	"lifeboat status":         {in: kube, says: "lifeboat is handling no nodes"},
	"kubectl lifeboat status": {why: whyKubectl},

	// deploy/helm/lifeboat/README.md
	`helm install lifeboat deploy/helm/lifeboat --namespace kube-system --set image.repository=123456789012.dkr.ecr.us-east-1.amazonaws.com/lifeboat --set image.tag=0.1.0 --set queueURL=https://sqs.us-east-1.amazonaws.com/123456789012/lifeboat --set awsRegion=us-east-1 --set clusterName=my-cluster --set serviceAccount.annotations."eks\.amazonaws\.com/role-arn"=arn:aws:iam::123456789012:role/lifeboat`: {in: kube, before: []string{uninstall}, says: "STATUS: deployed"},
	installIMDS: {in: kube, before: []string{uninstall}, says: "STATUS: deployed"},

	// docs/benchmarks.md
	"make build build-imds && ls -l bin/lifeboat bin/lifeboat-imds": {in: bare, says: "bin/lifeboat-imds", takes: buildTakes},
	"make build-imds": {why: whyBuilt},

	// docs/configuration.md
	"make docs":             {why: "writes docs/configuration.md and the environment table of docs/migration-from-nth.md into the working tree; internal/config's TestConfigurationDocUpToDate and TestMigrationDocUpToDate compare both with what it writes"},
	"lifeboat run --help":   {in: bare, says: "--queue-url"},
	"lifeboat check --help": {in: bare, says: "--queue-url"},

	// docs/demo.md
	"make demo DEMO_FLAGS='-pod-shutdown 20s -keep'": {why: whyDemo},
	"make deps":                {why: whyPrerequisite + "; it installs Debian packages (root, apt)"},
	"make build":               {why: whyBuilt},
	"make demo DEMO_FLAGS='…'": {why: whyDemo + "; the flags are elided (…)"},
	"lifeboat run":             {in: queuePod, serves: true},

	// docs/imds.md
	`lifeboat run --mode imds --node-name "$NODE_NAME" --pod-name "$POD_NAME" --pod-namespace "$POD_NAMESPACE"`: {in: imdsPod, serves: true},

	// docs/install.md
	"make image-push IMAGE=123456789012.dkr.ecr.us-east-1.amazonaws.com/lifeboat:0.1.0": {why: whyImage},
	"make chart VERSION=v0.1.0": {in: bare, says: "dist/lifeboat-0.1.0.tgz"},
	"make chart":                {in: bare, says: ".tgz"},
	"make image-push":           {why: whyImage},
	"make image-docker":         {why: "needs a Docker engine with buildx (the testbed has none); test/deploy TestDockerfile checks its build lines are the Makefile's"},
	"helm upgrade --install lifeboat deploy/helm/lifeboat -n kube-system --reuse-values --set serviceMonitor.create=true --set prometheusRule.create=true --set serviceMonitor.additionalLabels.release=kube-prometheus-stack --set prometheusRule.additionalLabels.release=kube-prometheus-stack": {why: "needs the Prometheus Operator's CRDs, which this environment does not install; test/prom TestMonitoringObjectsInstall installs the same objects with them"},
	"helm push dist/lifeboat-0.1.0.tgz oci://123456789012.dkr.ecr.us-east-1.amazonaws.com/charts": {why: whyRegistry},
	`helm install lifeboat oci://123456789012.dkr.ecr.us-east-1.amazonaws.com/charts/lifeboat --version 0.1.0 --namespace kube-system --set image.repository=123456789012.dkr.ecr.us-east-1.amazonaws.com/lifeboat --set queueURL="$QUEUE_URL" --set clusterName=my-cluster`: {why: whyRegistry},
	"helm upgrade lifeboat oci://123456789012.dkr.ecr.us-east-1.amazonaws.com/charts/lifeboat --version 0.1.1 --namespace kube-system --reuse-values":                                                                                                                        {why: whyRegistry},
	"make image": {why: whyImage},
	`helm install lifeboat deploy/helm/lifeboat --namespace kube-system --set queueURL="$QUEUE_URL" --set awsRegion=us-east-1 --set clusterName=my-cluster --set image.repository=123456789012.dkr.ecr.us-east-1.amazonaws.com/lifeboat --set image.tag=0.1.0 --set serviceAccount.annotations."eks\.amazonaws\.com/role-arn"="$ROLE_ARN"`: {in: kube, before: []string{uninstall}, says: "STATUS: deployed"},
	"kubectl -n kube-system exec deploy/lifeboat -- lifeboat check":                                           {why: whyPod},
	"kubectl -n kube-system exec ds/lifeboat -- lifeboat check":                                               {why: whyPod},
	"helm upgrade lifeboat deploy/helm/lifeboat --namespace kube-system --reuse-values --set image.tag=0.2.0": {in: kube, before: []string{uninstall, installIMDS}, says: "REVISION: 2"},

	// docs/migration-from-nth.md
	"kubectl exec deploy/lifeboat -- lifeboat check":                {why: whyPod},
	"helm uninstall aws-node-termination-handler -n kube-system":    {why: "needs a release of aws-node-termination-handler, whose chart the testbed does not have"},
	"helm upgrade lifeboat … --reuse-values --set dryRun=false":     {in: kube, before: []string{uninstall, installIMDS + " --set dryRun=true"}, says: "REVISION: 2"},
	"helm install lifeboat deploy/helm/lifeboat -f nth-values.yaml": {in: kube, before: []string{uninstall}, says: "STATUS: deployed"},
	"helm install": {why: whyName},
	"helm push":    {why: whyName},
	"helm upgrade": {why: whyName},

	// docs/operations.md
	"lifeboat check --output json --queue-url … --cluster-name …": {in: aws, says: `"checks"`},

	// docs/reliability.md
	"make lint": {why: whyPrerequisite},
	"make fuzz": {why: "CI runs it after `make test` (.ci/run); it takes a minute"},
	"lifeboat run --mode imds --out-of-service-taint": {in: imdsPod, exit: 2, says: "--out-of-service-taint is refused with --mode imds"},

	// docs/replay.md
	"lifeboat replay FILE|DIR...": {in: bare, says: `"accepted":true`},

	// docs/scale-in-protection.md
	"lifeboat check --scale-in-protection": {in: queuePod, says: "autoscaling:SetInstanceProtection"},

	// docs/status.md (the testbed has no node lifeboat handles)
	"lifeboat status -o wide": {in: kube, says: "lifeboat is handling no nodes"},
	"lifeboat status -l topology.kubernetes.io/zone=us-east-1a -o name": {in: kube},
	"lifeboat status ip-10-0-1-5.ec2.internal":                          {in: kube, exit: 1, says: `lifeboat: nodes "ip-10-0-1-5.ec2.internal" not found`},
	"lifeboat status -o yaml":                                           {in: kube, says: "kind: NodeStatusList"},
	"lifeboat is handling none of the selected nodes":                   {why: "quotes lifeboat status's output; not a command"},
	"kubectl lifeboat status -o json":                                   {why: whyKubectl},
	"kubectl lifeboat status ip-10-106-148-205.ec2.internal -o wide":    {why: whyKubectl},
	"kubectl lifeboat":                                                  {why: whyName + " (how kubectl runs the plugin)"},
	"lifeboat is handling no nodes":                                     {why: "quotes lifeboat status's output; not a command"},

	// docs/testing.md
	"make test-e2e":   {why: whyInMakeTest + " (its end-to-end half)"},
	"make check-docs": {why: "this test"},
	"make helm":       {why: whyPrerequisite},
	"make deps tools": {why: whyPrerequisite + "; make deps installs Debian packages (root, apt)"},
}

// Every command of the docs has a verdict, and every verdict a command of
// the docs; a command that runs names its environment, one that does not
// says why; a placeholder is one a command to run holds.
func TestEveryDocCommandClassified(t *testing.T) {
	cmds, err := ExtractAll(testenv.RepoRoot())
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, c := range cmds {
		if _, ok := verdicts[c.Text]; !ok && !seen[c.Text] {
			t.Errorf("%s: %q is not classified: add it to verdicts in hack/checkdocs/commands_test.go, with the environment it runs in, or why it cannot run here", c.Where(), c.Text)
		}
		seen[c.Text] = true
	}
	var run, listed int
	for text, v := range verdicts {
		if !seen[text] {
			t.Errorf("verdicts holds %q, which no document has any longer: remove it", text)
		}
		switch {
		case v.in == notRun && v.why == "":
			t.Errorf("%q is not run and says not why", text)
		case v.in != notRun && v.why != "":
			t.Errorf("%q runs, yet says why it cannot: %s", text, v.why)
		case v.in == notRun:
			listed++
		default:
			run++
		}
	}
	for _, p := range placeholders {
		if !slices.ContainsFunc(cmds, func(c Command) bool { return verdicts[c.Text].in != notRun && strings.Contains(c.Text, p.doc) }) {
			t.Errorf("no command that runs holds the placeholder %q: remove it", p.doc)
		}
	}
	t.Logf("%d commands of the docs: %d run on the testbed, %d listed with the reason they cannot", run+listed, run, listed)
}

// substitute puts the testbed's values in place of a command's placeholders.
func substitute(text string) string {
	for _, p := range placeholders {
		text = strings.ReplaceAll(text, p.doc, p.testbed)
	}
	return text
}
