//go:build !unix

package message

import "time"

// processCPUTime is unknown on this platform.
func processCPUTime() time.Duration { return 0 }
