//go:build tools

// Package tools pins kwok, the kubelet simulator of the testbed.
package tools

import _ "sigs.k8s.io/kwok/cmd/kwok"
