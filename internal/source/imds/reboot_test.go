package imds

import (
	"testing"
	"time"
)

func TestParseBootTime(t *testing.T) {
	stat := []byte("cpu  1 2 3\nintr 5\nctxt 7\nbtime 1893456000\nprocesses 9\n")
	got, err := ParseBootTime(stat)
	if err != nil || !got.Equal(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)) {
		t.Errorf("ParseBootTime = %v, %v", got, err)
	}
	for _, bad := range []string{"cpu 1\n", "btime x\n", "btime 0\n"} {
		if _, err := ParseBootTime([]byte(bad)); err == nil {
			t.Errorf("ParseBootTime(%q): no error", bad)
		}
	}
}
