//go:build unix

package message

import (
	"syscall"
	"time"
)

// processCPUTime returns the CPU time (user + system) this process has used,
// all threads included (the garbage collector's too), or 0 if unknown.
func processCPUTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
