# syntax=docker/dockerfile:1
#
# lifeboat's image: one static binary on distroless, running as a non-root
# user, needing nothing writable (the chart sets readOnlyRootFilesystem).
#
#   docker buildx build --platform linux/amd64,linux/arm64 \
#     --build-arg VERSION=$(git describe --tags --always) -t REPO/lifeboat:TAG --push .
#
# or `make image-docker` (`make image` builds the same binaries with no
# container engine: hack/imagebuild). The go build lines have exactly the flags of the
# Makefile's `build` and `build-imds` targets; test/deploy checks that they
# match, and builds the binary it tests with the first.

ARG GO_VERSION=1.26

# The build runs on the builder's platform and cross-compiles (no emulation).
FROM --platform=$BUILDPLATFORM golang:${GO_VERSION} AS build
ARG TARGETOS
ARG TARGETARCH
ARG VERSION=dev
WORKDIR /src
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY cmd/ cmd/
COPY internal/ internal/
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 GOOS=${TARGETOS} GOARCH=${TARGETARCH} go build -trimpath -ldflags "-s -w -X main.version=${VERSION}" -o /out/lifeboat ./cmd/lifeboat
# lifeboat-imds: the same command built for IMDS mode only (no AWS service
# clients), the chart's DaemonSet command (docs/benchmarks.md).
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 GOOS=${TARGETOS} GOARCH=${TARGETARCH} go build -tags imdsonly -trimpath -ldflags "-s -w -X main.version=${VERSION}" -o /out/lifeboat-imds ./cmd/lifeboat

# distroless/static: CA certificates, tzdata, /etc/passwd with nonroot
# (65532); no shell, no package manager. The binary is on PATH, so that
# `kubectl exec deploy/lifeboat -- lifeboat check` works.
FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/lifeboat /out/lifeboat-imds /usr/local/bin/
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/lifeboat"]
CMD ["run"]
