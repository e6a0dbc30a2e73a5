// Package wrap folds prose to a width, for reports pasted into mail (72
// columns, as kernel mailing lists read them). It imports no kbisect
// package.
package wrap

import "strings"

// Width is the width reports keep to.
const Width = 72

// Lines folds s at spaces so that no line passes width, where it can: a
// word longer than the room stays whole. The first line starts with first,
// the others with rest.
func Lines(s string, width int, first, rest string) string {
	var b strings.Builder
	line := first
	fresh := true
	for _, word := range strings.Fields(s) {
		switch {
		case fresh:
			line += word
			fresh = false
		case len([]rune(line))+1+len([]rune(word)) > width:
			b.WriteString(line + "\n")
			line = rest + word
		default:
			line += " " + word
		}
	}
	b.WriteString(line)
	return b.String()
}
