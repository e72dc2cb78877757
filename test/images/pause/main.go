// Command pause is the sandbox ("pause") image of the testbed's real node:
// it holds a pod's namespaces and does nothing else. It is built from source
// because the testbed reaches no registry. It exits on SIGTERM or SIGINT, as
// the upstream pause does.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	<-sig
}
