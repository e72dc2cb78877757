//go:build imdsonly

package main

// The IMDS-only build (go build -tags imdsonly, the DaemonSet's
// lifeboat-imds): IMDS mode, replay and version, without queue mode and
// check, so that the AWS service clients (EC2, SQS, EventBridge, Auto
// Scaling, STS) are neither linked nor initialised. The node's memory is
// what this saves: docs/benchmarks.md.

import (
	"context"
	"errors"
	"io"

	"golang.org/x/sync/errgroup"
)

var errIMDSOnly = errors.New("this build of lifeboat (lifeboat-imds) runs only --mode imds; queue mode and check are in the lifeboat binary of the same image")

func (a *app) startQueue(context.Context, *errgroup.Group) error {
	return usageError{errIMDSOnly, "lifeboat run --help"}
}

func checkCommand(context.Context, []string, func(string) string, io.Writer, io.Writer) error {
	return usageError{errIMDSOnly, "lifeboat --help"}
}
