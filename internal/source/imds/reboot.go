package imds

import (
	"bufio"
	"bytes"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// ParseBootTime returns the boot time in the contents of /proc/stat (the
// btime line, seconds since the epoch).
func ParseBootTime(procStat []byte) (time.Time, error) {
	sc := bufio.NewScanner(bytes.NewReader(procStat))
	for sc.Scan() {
		v, ok := strings.CutPrefix(sc.Text(), "btime ")
		if !ok {
			continue
		}
		sec, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		if err != nil || sec <= 0 {
			return time.Time{}, fmt.Errorf("reading boot time: btime %q", v)
		}
		return time.Unix(sec, 0).UTC(), nil
	}
	return time.Time{}, fmt.Errorf("reading boot time: no btime line")
}
