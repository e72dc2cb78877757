// Package clocktest gives tests a clock that runs at the wall clock's pace
// but starts at a fixed instant, so that deadlines computed from a fixed
// event time (a fixture's "time": "2026-11-25T12:00:00Z") mean the same on
// every day the test runs. k8s.io/utils/clock/testing's FakeClock stands
// still until stepped; the controller tests wait on real timers, so they
// need one that moves.
package clocktest

import (
	"time"

	"k8s.io/utils/clock"
)

// Epoch is the instant the fixtures of lifeboat's unit tests are dated at.
var Epoch = time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)

// Shifted is a clock.WithTicker whose Now starts at a chosen instant and
// then advances with the wall clock. Timers, tickers and sleeps are the real
// clock's: only what the clock reads as "now" is shifted.
type Shifted struct {
	clock.RealClock
	offset time.Duration
}

var _ clock.WithTicker = Shifted{}

// StartingAt returns a clock that reads start now.
func StartingAt(start time.Time) Shifted {
	return Shifted{offset: time.Until(start)}
}

// AtEpoch returns a clock that reads Epoch now.
func AtEpoch() Shifted { return StartingAt(Epoch) }

// Now returns the wall clock's time shifted to this clock.
func (s Shifted) Now() time.Time { return time.Now().Add(s.offset) }

// Since returns how long ago t was on this clock.
func (s Shifted) Since(t time.Time) time.Duration { return s.Now().Sub(t) }
