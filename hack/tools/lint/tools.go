//go:build tools

// Package tools pins the linters `make lint` runs: staticcheck
// (honnef.co/go/tools). `go vet` comes with Go. govulncheck is not here: it
// needs the online vulnerability database, which CI cannot reach (see
// docs/reliability.md).
package tools

import (
	_ "honnef.co/go/tools/cmd/staticcheck"
)
