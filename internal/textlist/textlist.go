// Package textlist joins a list for a message or a log line: the first
// few items, then how many more there are ("a; b; and 3 more"). It uses
// the standard library only: packages of the IMDS-only build (lbdrain) use
// it as well as the drain's.
package textlist

import (
	"fmt"
	"strings"
)

// Join joins the first most items of xs with sep, then "and N more" when
// there are more (most of zero: only that; negative: every item).
func Join[T fmt.Stringer](xs []T, most int, sep string) string {
	var parts []string
	for i, x := range xs {
		if i == most {
			parts = append(parts, fmt.Sprintf("and %d more", len(xs)-most))
			break
		}
		parts = append(parts, x.String())
	}
	return strings.Join(parts, sep)
}
