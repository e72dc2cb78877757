// Package docdrift holds the tests that keep the documentation, the chart
// and the CloudFormation template true to the code, both ways: every
// Kubernetes Event reason lifeboat records (docs/events.md,
// docs/operations.md), every AWS action it calls (deploy/aws's policy,
// docs/aws.md), every RBAC rule the chart grants (docs/install.md), and
// every aws-node-termination-handler value the chart refuses
// (docs/migration-from-nth.md).
//
// The tests are plain unit tests: they read the Go source (type-checked
// with golang.org/x/tools/go/packages), render the chart with the Helm SDK
// (test/testenv.RenderChart, no cluster) and parse the Markdown. They live
// under hack/, beside the documentation tools (gendocs), rather than under
// test/, whose packages start a testbed; `make test` runs them with
// ./hack/....
package docdrift
