# lifeboat: see README.md. build, build-imds, lint and test-unit need only Go
# and the Go module proxy. demo, test, test-e2e and check-docs also need root, cgroups
# for the real node (v1: the cpu, cpuacct, cpuset, memory and freezer
# hierarchies; v2: the cpu, cpuset, memory and pids controllers),
# apt (Debian or Ubuntu: `make deps` installs DEBIAN_PACKAGES),
# moto_server (moto 5) and ~13 GiB of disk; `make preflight` (run first by
# those targets) checks all of it and names the command that fixes each gap.

SHELL := /bin/bash
BIN := $(CURDIR)/bin
GO ?= go
# Versions of the testbed tools are pinned in hack/tools/*/go.mod; the
# Kubernetes version below must match hack/tools/k8s/go.mod.
K8S_VERSION := v1.34.4
K8S_LDFLAGS := -s -w \
	-X k8s.io/component-base/version.gitVersion=$(K8S_VERSION) \
	-X k8s.io/component-base/version.gitMajor=1 \
	-X k8s.io/component-base/version.gitMinor=34 \
	-X k8s.io/client-go/pkg/version.gitVersion=$(K8S_VERSION) \
	-X k8s.io/client-go/pkg/version.gitMajor=1 \
	-X k8s.io/client-go/pkg/version.gitMinor=34
TOOLS := kube-apiserver kube-controller-manager kube-scheduler kubelet etcd kwok ec2-metadata-mock

.PHONY: all build build-imds tools helm lint test test-unit test-e2e docs check-docs fuzz clean demo deps preflight

# Debian packages the tests and the demo need (installed by `make deps`, which
# `make test` and `make demo` run): the real node's container runtime and CNI
# plugins, the browser that checks the demo page, and Prometheus (with
# promtool) for test/prom and test/monitoring, and the CA bundle lifeboat's
# image carries (hack/imagebuild).
DEBIAN_PACKAGES := containerd runc containernetworking-plugins iptables iproute2 chromium prometheus ca-certificates
all: build build-imds

VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
# The same flags as the Dockerfile's build stage.
LDFLAGS := -s -w -X main.version=$(VERSION)

build:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN)/lifeboat ./cmd/lifeboat

# build-imds builds lifeboat-imds, the IMDS-mode-only build of the same
# command for the DaemonSet (no AWS service clients: docs/benchmarks.md).
build-imds:
	CGO_ENABLED=0 $(GO) build -tags imdsonly -trimpath -ldflags '$(LDFLAGS)' -o $(BIN)/lifeboat-imds ./cmd/lifeboat

# image builds the container image for PLATFORMS with no container engine
# (hack/imagebuild, go-containerregistry): both binaries cross-compiled with
# the build lines above, on a base with distroless/static:nonroot's
# properties, with an SPDX SBOM; written as an OCI layout in out/image (the
# SBOM beside it, out/image.spdx.json). image-push also pushes it to IMAGE
# with the credentials of `docker login` / `crane auth login` (no engine
# needed). The real-node tests run this image, built by the same code for
# the machine's platform. image-docker builds the same with the Dockerfile
# and docker buildx, for those who prefer it (test/deploy checks that its
# build lines are the Makefile's).
IMAGE ?= lifeboat:$(VERSION)
PLATFORMS ?= linux/amd64,linux/arm64
CREATED ?= $(shell git log -1 --format=%cI 2>/dev/null)
IMAGE_FLAGS ?=
.PHONY: image image-push image-docker chart
image:
	$(GO) run ./hack/imagebuild/build -version $(VERSION) -image $(IMAGE) -platforms $(PLATFORMS) -created "$(CREATED)" -out out/image

image-push:
	$(GO) run ./hack/imagebuild/build -version $(VERSION) -image $(IMAGE) -platforms $(PLATFORMS) -created "$(CREATED)" -out out/image -push

image-docker:
	docker buildx build --platform $(PLATFORMS) --build-arg VERSION=$(VERSION) -t $(IMAGE) $(IMAGE_FLAGS) .

# chart packages the Helm chart as the release artifact,
# dist/lifeboat-<version>.tgz: version and appVersion from VERSION (the tag;
# appVersion is the image tag). Push it with
# `helm push dist/lifeboat-<version>.tgz oci://<registry>/charts`.
chart:
	$(GO) run ./hack/chartpkg/package -version $(VERSION) -out dist

# demo plays a Spot interruption (on a real node: a kubelet with its own
# containerd, so it runs as root), a scale-in and a warm-pool launch against
# the embedded testbed with the real lifeboat binary, prints a live timeline
# and writes out/demo-timeline.html (docs/demo.md). DEMO_FLAGS go to the
# program (e.g. -keep, -pod-shutdown 20s).
DEMO_FLAGS ?=
demo: preflight deps tools build
	$(GO) build -o $(BIN)/demo ./hack/demo
	$(BIN)/demo -lifeboat $(BIN)/lifeboat $(DEMO_FLAGS)

# test runs every test: unit tests and the end-to-end tests on the testbed
# (real kube-apiserver, etcd, kwok, moto, the Auto Scaling simulator).
# The testbed suites run in two lanes side by side, one package at a time
# in each (hack/testlanes.sh says which and why).
test: preflight deps tools helm lint
	$(GO) test -count=1 -timeout 10m ./internal/... ./cmd/...
	GO=$(GO) bash hack/testlanes.sh

# lint checks gofmt and that go.mod and go.sum are tidy (go mod tidy -diff),
# runs go vet, hack/testdates (no test fixes a date and hands the code the
# wall clock: such a test fails once the day moves on) and staticcheck,
# pinned in hack/tools/lint (built into bin/ from the module proxy). The unused-code check (U1000) is left out for
# the test packages under test/ only. govulncheck is not run: it needs the
# online vulnerability database (see docs/reliability.md).
lint: $(BIN)/staticcheck
	@unformatted=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$unformatted" ]; then echo "gofmt would change: $$unformatted"; exit 1; fi
	@$(GO) mod tidy -diff || { echo "go.mod/go.sum are not tidy: run go mod tidy"; exit 1; }
	$(GO) vet ./...
	$(GO) run ./hack/testdates ./internal ./cmd ./test ./hack
	$(BIN)/staticcheck ./internal/... ./cmd/... ./hack/...
	$(BIN)/staticcheck -checks inherit,-U1000 ./test/...

$(BIN)/staticcheck: hack/tools/lint/go.mod hack/tools/lint/go.sum
	@echo "building staticcheck"
	cd hack/tools/lint && $(GO) build -trimpath -o $@ honnef.co/go/tools/cmd/staticcheck

test-unit:
	$(GO) test -count=1 ./internal/... ./cmd/...

# check-docs runs the shell commands of README.md, docs/*.md and the chart's
# README that invoke lifeboat, make or helm, each that can run on the
# testbed; hack/checkdocs lists the others with the reason (docs/testing.md).
# `make test` runs it too (./hack/...).
check-docs: preflight deps tools helm
	$(GO) test -count=1 -timeout 20m ./hack/checkdocs

test-e2e: preflight deps tools
	$(GO) test -count=1 -timeout 30m -p 1 ./test/...

# fuzz runs the fuzz targets of the SQS message parser and of the IMDS
# response parser, each for a bounded number of inputs (~20 s and ~40 s on
# the 2-core machine). The budget is a count, not a duration: Go 1.26's
# fuzz coordinator can report its own -fuzztime deadline as a failure
# ("context deadline exceeded", no failing input) when a starved worker
# misses it (go.dev/issue/75804, fixed in Go 1.27); a count sets no
# deadline. hack/docdrift TestFuzzBudgetIsACount keeps it so.
FUZZTIME ?= 200000x
fuzz:
	@case "$(FUZZTIME)" in *[0-9]x) ;; *) echo "make fuzz: FUZZTIME=$(FUZZTIME) is not a count of inputs (like 200000x); a duration can fail on Go 1.26's own deadline" >&2; exit 2;; esac
	$(GO) test -run '^$$' -fuzz FuzzParse -fuzztime $(FUZZTIME) ./internal/message
	$(GO) test -run '^$$' -fuzz FuzzParse -fuzztime $(FUZZTIME) ./internal/source/imds

docs:
	$(GO) run ./hack/gendocs

# tools builds the pinned testbed binaries into bin/. Each binary depends on
# its module's go.mod/go.sum, so a warm run does nothing.
tools: $(addprefix $(BIN)/,$(TOOLS))

$(BIN)/kube-%: hack/tools/k8s/go.mod hack/tools/k8s/go.sum
	@echo "building $(notdir $@) $(K8S_VERSION) (cold: ~2 min each)"
	cd hack/tools/k8s && $(GO) build -trimpath -ldflags '$(K8S_LDFLAGS)' -o $@ k8s.io/kubernetes/cmd/$(notdir $@)

# The kubelet of the real node (test/testenv/realnode.go), from the same
# pinned module as the control plane.
$(BIN)/kubelet: hack/tools/k8s/go.mod hack/tools/k8s/go.sum
	@echo "building kubelet $(K8S_VERSION)"
	cd hack/tools/k8s && $(GO) build -trimpath -ldflags '$(K8S_LDFLAGS)' -o $@ k8s.io/kubernetes/cmd/kubelet

$(BIN)/etcd: hack/tools/etcd/go.mod hack/tools/etcd/go.sum
	@echo "building etcd"
	cd hack/tools/etcd && $(GO) build -trimpath -ldflags '-s -w' -o $@ go.etcd.io/etcd/server/v3

$(BIN)/kwok: hack/tools/kwok/go.mod hack/tools/kwok/go.sum
	@echo "building kwok"
	cd hack/tools/kwok && $(GO) build -trimpath -ldflags '-s -w' -o $@ sigs.k8s.io/kwok/cmd/kwok

$(BIN)/ec2-metadata-mock: hack/tools/imds/go.mod hack/tools/imds/go.sum
	@echo "building ec2-metadata-mock"
	cd hack/tools/imds && $(GO) build -trimpath -ldflags '-s -w' -o $@ github.com/aws/amazon-ec2-metadata-mock/cmd

# helm builds bin/helm, which runs the docs' helm lines (check-docs, part of
# test; the demo does not need it), at the version of helm.sh/helm/v3 that
# go.mod pins for the chart tests, with helm's own go.mod from the module
# proxy (cold: ~5 min on 2 cores).
helm: $(BIN)/helm
$(BIN)/helm: go.mod
	@v=$$($(GO) list -m -f '{{.Version}}' helm.sh/helm/v3) && echo "building helm $$v" && \
	GOBIN=$(BIN) $(GO) install -trimpath -ldflags "-s -w -X helm.sh/helm/v3/internal/version.version=$$v" helm.sh/helm/v3/cmd/helm@$$v

clean:
	rm -rf $(BIN)

deps:
	@hack/debian-deps.sh $(DEBIAN_PACKAGES)

# preflight checks, before demo, test and test-e2e start anything, what they
# need of the machine (hack/preflight): root, cgroups, moto, free disk, and
# the Debian packages, which a root run with apt-get lets deps install next
# (they are a failure only without root or apt). One message lists all that
# is missing, each with its fix; exit 1. The targets list it first and make
# runs prerequisites in order (.NOTPARALLEL keeps it so under -j; before GNU
# make 4.4 it makes a -j run wholly serial).
preflight:
	@$(GO) run ./hack/preflight -target $(firstword $(filter demo test test-e2e check-docs,$(MAKECMDGOALS)) preflight) -packages "$(DEBIAN_PACKAGES)"
.NOTPARALLEL: demo test test-e2e check-docs
