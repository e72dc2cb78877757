package window

import (
	"strings"
	"testing"
	"time"
)

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		in, want, err string
		n             int
	}{
		{in: "", n: 0},
		{in: "Sat,Sun 02:00-06:00 UTC", want: "Sat,Sun 02:00-06:00 UTC", n: 1},
		{in: "sat,sun 02:00-06:00", want: "Sat,Sun 02:00-06:00 UTC", n: 1},
		{in: "Mon-Fri 22:00-02:00 Europe/Berlin", want: "Mon,Tue,Wed,Thu,Fri 22:00-02:00 Europe/Berlin", n: 1},
		{in: "Fri-Mon 00:00-24:00", want: "Mon,Fri,Sat,Sun 00:00-00:00 UTC", n: 1},
		{in: "* 03:00-04:00; Sun 10:00-12:00", want: "Mon,Tue,Wed,Thu,Fri,Sat,Sun 03:00-04:00 UTC", n: 2},
		{in: "Sat 02:00", err: "want HH:MM-HH:MM"},
		{in: "Sat 02:00-06:00 UTC extra", err: "want DAYS HH:MM-HH:MM"},
		{in: "Caturday 02:00-06:00", err: `day "Caturday"`},
		{in: "Sat 2am-6am", err: `time "2am"`},
		{in: "Sat 25:00-26:00", err: `time "25:00"`},
		{in: "Sat 02:00-02:00", err: "empty"},
		{in: "Sat 02:00-06:00 Mars/Olympus", err: `zone "Mars/Olympus"`},
	} {
		ws, err := Parse(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("Parse(%q) = %v, %v; want an error with %q", tc.in, ws, err, tc.err)
			}
			continue
		}
		if err != nil || len(ws) != tc.n {
			t.Errorf("Parse(%q) = %v, %v; want %d windows", tc.in, ws, err, tc.n)
			continue
		}
		if tc.n > 0 && ws[0].String() != tc.want {
			t.Errorf("Parse(%q)[0] = %s, want %s", tc.in, ws[0], tc.want)
		}
	}
}

func TestDue(t *testing.T) {
	at := func(s string) time.Time {
		v, err := time.Parse(time.RFC3339, s)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	weekend, err := Parse("Sat,Sun 02:00-06:00 UTC")
	if err != nil {
		t.Fatal(err)
	}
	nights, err := Parse("Mon-Fri 22:00-02:00 Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	// 2026-03-03 is a Tuesday; 2026-03-07/08 the weekend before 2026-03-10.
	for _, tc := range []struct {
		name        string
		ws          []Window
		latest, now string
		want        string
		ok          bool
	}{
		{"no windows: at latest", nil, "2026-03-10T13:50:00Z", "2026-03-03T09:00:00Z", "2026-03-10T13:50:00Z", false},
		{"the last weekend opening before the change", weekend, "2026-03-10T13:50:00Z", "2026-03-03T09:00:00Z", "2026-03-08T02:00:00Z", true},
		{"inside that opening now: at once", weekend, "2026-03-10T13:50:00Z", "2026-03-08T03:30:00Z", "2026-03-08T03:30:00Z", true},
		{"that opening ended: at latest, as without windows", weekend, "2026-03-10T13:50:00Z", "2026-03-08T06:00:00Z", "2026-03-10T13:50:00Z", false},
		{"the change inside an opening: that opening's start", weekend, "2026-03-08T04:00:00Z", "2026-03-03T09:00:00Z", "2026-03-08T02:00:00Z", true},
		{"an opening after latest is not taken", weekend, "2026-03-08T01:59:00Z", "2026-03-03T09:00:00Z", "2026-03-07T02:00:00Z", true},
		{"past midnight, in the window's zone (CET: 21:00Z)", nights, "2026-03-05T12:00:00Z", "2026-03-02T09:00:00Z", "2026-03-04T21:00:00Z", true},
		{"past midnight: the opening that began the evening before is under way", nights, "2026-03-05T12:00:00Z", "2026-03-05T00:30:00Z", "2026-03-05T00:30:00Z", true},
		{"the later of two windows' openings", append(append([]Window{}, weekend...), nights...), "2026-03-10T13:50:00Z", "2026-03-03T09:00:00Z", "2026-03-09T21:00:00Z", true},
		{"latest already passed: at latest (now)", weekend, "2026-03-10T13:50:00Z", "2026-03-10T14:00:00Z", "2026-03-10T13:50:00Z", false},
	} {
		got, ok := Due(tc.ws, at(tc.latest), at(tc.now))
		if !got.Equal(at(tc.want)) || ok != tc.ok {
			t.Errorf("%s: Due = %s, %v; want %s, %v", tc.name, got.UTC().Format(time.RFC3339), ok, tc.want, tc.ok)
		}
	}
}

// A change months ahead: the search is bounded (maxLookBack) and finds the
// last opening before it.
func TestDueFarAhead(t *testing.T) {
	ws, err := Parse("Sun 02:00-03:00")
	if err != nil {
		t.Fatal(err)
	}
	latest := time.Date(2026, 9, 1, 12, 0, 0, 0, time.UTC) // a Tuesday
	got, ok := Due(ws, latest, time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC))
	if want := time.Date(2026, 8, 30, 2, 0, 0, 0, time.UTC); !ok || !got.Equal(want) {
		t.Errorf("Due = %s, %v; want %s", got, ok, want)
	}
}
