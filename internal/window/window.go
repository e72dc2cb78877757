// Package window reads an operator's maintenance windows and finds when,
// before a scheduled change, a node is drained in one of them rather than
// just before the change. It is pure: the caller passes every time.
package window

import (
	"fmt"
	"strings"
	"time"
	// The zone database, embedded: the image carries no tzdata
	// (hack/imagebuild), and windows are named by IANA zone.
	_ "time/tzdata"
)

// Window is a weekly maintenance window: on each of its days, from Start
// after midnight in Loc, for Length (it may run past midnight).
type Window struct {
	Days   [7]bool // by time.Weekday
	Start  time.Duration
	Length time.Duration
	Loc    *time.Location
}

// maxLookBack bounds how far before a change the windows are searched.
const maxLookBack = 62 * 24 * time.Hour

var dayNames = map[string]time.Weekday{"sun": time.Sunday, "mon": time.Monday, "tue": time.Tuesday,
	"wed": time.Wednesday, "thu": time.Thursday, "fri": time.Friday, "sat": time.Saturday}

// Parse reads windows separated by ";", each "DAYS HH:MM-HH:MM [ZONE]":
// DAYS is a comma-separated list of Mon..Sun, a range such as Mon-Fri, or
// *; ZONE an IANA name (default UTC). "Sat,Sun 02:00-06:00 UTC" and
// "Mon-Fri 22:00-02:00 Europe/Berlin" (past midnight) are windows. Empty
// is none.
func Parse(s string) ([]Window, error) {
	var out []Window
	for _, part := range strings.Split(s, ";") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		w, err := parseOne(part)
		if err != nil {
			return nil, fmt.Errorf("maintenance window %q: %w", part, err)
		}
		out = append(out, w)
	}
	return out, nil
}

func parseOne(s string) (Window, error) {
	f := strings.Fields(s)
	if len(f) != 2 && len(f) != 3 {
		return Window{}, fmt.Errorf("want DAYS HH:MM-HH:MM [ZONE], e.g. Sat,Sun 02:00-06:00 UTC")
	}
	var w Window
	if err := parseDays(f[0], &w.Days); err != nil {
		return Window{}, err
	}
	from, to, ok := strings.Cut(f[1], "-")
	if !ok {
		return Window{}, fmt.Errorf("times %q: want HH:MM-HH:MM", f[1])
	}
	start, err := clock(from)
	if err != nil {
		return Window{}, err
	}
	end, err := clock(to)
	if err != nil {
		return Window{}, err
	}
	if end == start {
		return Window{}, fmt.Errorf("times %q: the window is empty", f[1])
	}
	if end < start {
		end += 24 * time.Hour // past midnight
	}
	w.Start, w.Length = start, end-start
	w.Loc = time.UTC
	if len(f) == 3 {
		loc, err := time.LoadLocation(f[2])
		if err != nil {
			return Window{}, fmt.Errorf("zone %q: %w", f[2], err)
		}
		w.Loc = loc
	}
	return w, nil
}

func parseDays(s string, days *[7]bool) error {
	if s == "*" {
		for i := range days {
			days[i] = true
		}
		return nil
	}
	for _, d := range strings.Split(s, ",") {
		from, to, isRange := strings.Cut(strings.ToLower(d), "-")
		a, ok := dayNames[from]
		if !ok {
			return fmt.Errorf("day %q: want Mon, Tue, Wed, Thu, Fri, Sat, Sun, a range (Mon-Fri) or *", d)
		}
		b := a
		if isRange {
			if b, ok = dayNames[to]; !ok {
				return fmt.Errorf("day %q: want Mon, Tue, Wed, Thu, Fri, Sat, Sun, a range (Mon-Fri) or *", d)
			}
		}
		for i := a; ; i = (i + 1) % 7 {
			days[i] = true
			if i == b {
				break
			}
		}
	}
	return nil
}

// clock reads HH:MM (00:00 to 24:00).
func clock(s string) (time.Duration, error) {
	t, err := time.Parse("15:04", s)
	if s == "24:00" {
		return 24 * time.Hour, nil
	}
	if err != nil {
		return 0, fmt.Errorf("time %q: want HH:MM", s)
	}
	return time.Duration(t.Hour())*time.Hour + time.Duration(t.Minute())*time.Minute, nil
}

// Due is when lifeboat acts on a scheduled change it would otherwise act
// on at latest (the change's start less the lead), at now: the start of
// the last window opening that begins at or before latest and has not
// ended by now (now itself when that opening is under way), so that the
// node leaves in the operator's window, as late as the windows allow.
// ok is false when no window opens in time (none configured, or the last
// opening before latest has ended): then latest, as without windows.
func Due(ws []Window, latest, now time.Time) (t time.Time, ok bool) {
	var best time.Time
	for _, w := range ws {
		if s, found := w.lastOpening(latest, now); found && s.After(best) {
			best = s
		}
	}
	if best.IsZero() {
		return latest, false
	}
	if best.Before(now) {
		return now, true
	}
	return best, true
}

// lastOpening is the start of w's last opening that begins at or before
// latest and ends after now.
func (w Window) lastOpening(latest, now time.Time) (time.Time, bool) {
	day := latest.In(w.Loc)
	day = time.Date(day.Year(), day.Month(), day.Day(), 0, 0, 0, 0, w.Loc)
	for back := 0; back*24 <= int(maxLookBack/time.Hour)+48; back++ {
		d := day.AddDate(0, 0, -back)
		if !w.Days[d.Weekday()] {
			continue
		}
		start := time.Date(d.Year(), d.Month(), d.Day(), 0, 0, 0, 0, w.Loc).Add(w.Start)
		if start.After(latest) {
			continue
		}
		if !start.Add(w.Length).After(now) {
			return time.Time{}, false // the openings before this one ended too
		}
		return start, true
	}
	return time.Time{}, false
}

// String is the window as Parse reads it.
func (w Window) String() string {
	var days []string
	for _, d := range []time.Weekday{time.Monday, time.Tuesday, time.Wednesday, time.Thursday, time.Friday, time.Saturday, time.Sunday} {
		if w.Days[d] {
			days = append(days, d.String()[:3])
		}
	}
	end := (w.Start + w.Length) % (24 * time.Hour)
	return fmt.Sprintf("%s %s-%s %s", strings.Join(days, ","), hhmm(w.Start), hhmm(end), w.Loc)
}

func hhmm(d time.Duration) string {
	return fmt.Sprintf("%02d:%02d", int(d/time.Hour), int(d%time.Hour/time.Minute))
}
