package textlist

import "testing"

type name string

func (n name) String() string { return string(n) }

func TestJoin(t *testing.T) {
	abc := []name{"a", "b", "c"}
	for _, tc := range []struct {
		name string
		xs   []name
		most int
		sep  string
		want string
	}{
		{name: "none", xs: nil, most: 5, sep: "; ", want: ""},
		{name: "fewer than most", xs: abc, most: 5, sep: "; ", want: "a; b; c"},
		{name: "exactly most", xs: abc, most: 3, sep: "; ", want: "a; b; c"},
		{name: "more than most", xs: abc, most: 2, sep: "; ", want: "a; b; and 1 more"},
		{name: "one and the rest", xs: abc, most: 1, sep: ", ", want: "a, and 2 more"},
		{name: "most zero: only the count", xs: abc, most: 0, sep: ", ", want: "and 3 more"},
		{name: "most negative: every item", xs: abc, most: -1, sep: ", ", want: "a, b, c"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Join(tc.xs, tc.most, tc.sep); got != tc.want {
				t.Errorf("Join(%v, %d, %q) = %q, want %q", tc.xs, tc.most, tc.sep, got, tc.want)
			}
		})
	}
}
