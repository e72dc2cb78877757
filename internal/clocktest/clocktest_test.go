package clocktest

import (
	"testing"
	"time"
)

func TestStartingAtReadsStartAndMoves(t *testing.T) {
	start := time.Date(2001, 2, 3, 4, 5, 6, 0, time.UTC)
	c := StartingAt(start)
	if d := c.Now().Sub(start); d < 0 || d > time.Second {
		t.Fatalf("Now() = %v, want within a second after %v", c.Now(), start)
	}
	first := c.Now()
	<-c.After(20 * time.Millisecond)
	if moved := c.Since(first); moved < 20*time.Millisecond {
		t.Errorf("clock moved %v across a 20 ms timer, want ≥ 20 ms", moved)
	}
}
