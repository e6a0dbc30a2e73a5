package configs

import (
	"fmt"
	"strings"
)

// misindented finds the first line of a block-style YAML file whose
// indentation cannot be right, for a syntax error that YAML places
// elsewhere (a key one column off is "did not find expected key" at the
// line where its mapping began). It knows what job files use: block
// mappings, "- " lists, block scalars (| and >) and one-line flow
// collections; anything else it does not judge. It returns the 1-based
// line and column and what is wrong, or ok false.
func misindented(lines []string) (line, col int, msg string, ok bool) {
	// levels are the indentations open at this point, innermost last: a
	// line must be at one of them, or deeper only after a line that opens
	// a block.
	levels := []int{0}
	// scalar is the indentation of a block scalar's key, text that of its
	// first line of text.
	opens, scalar, text := false, -1, -1
	for i, l := range lines {
		body := strings.TrimLeft(l, " ")
		ind := len(l) - len(body)
		if body == "" || strings.HasPrefix(body, "#") || strings.HasPrefix(body, "---") {
			continue
		}
		if strings.HasPrefix(body, "\t") {
			return 0, 0, "", false // tabs are reported on their own
		}
		if scalar >= 0 {
			switch {
			case ind > scalar && text < 0:
				text = ind
				continue
			case ind >= text:
				continue // the block scalar's text
			case ind > scalar:
				return i + 1, ind + 1, fmt.Sprintf("this line is indented to column %d, less than the first line of the text it continues (column %d)", ind+1, text+1), true
			}
			scalar, text = -1, -1
		}
		top := levels[len(levels)-1]
		switch {
		case ind > top && opens:
			levels = append(levels, ind)
		case ind > top:
			return i + 1, ind + 1, fmt.Sprintf("this line is indented to column %d, under a line that holds a value: nothing can be nested there (its siblings are at column %d)", ind+1, top+1), true
		default:
			above := top
			for len(levels) > 1 && levels[len(levels)-1] > ind {
				above = levels[len(levels)-1]
				levels = levels[:len(levels)-1]
			}
			if at := levels[len(levels)-1]; at != ind {
				return i + 1, ind + 1, fmt.Sprintf("this line is indented to column %d, between the columns of the keys around it (%d and %d): indent it as its siblings are", ind+1, at+1, above+1), true
			}
		}
		content := stripComment(body)
		// A list item's mapping is indented past its "- ".
		for strings.HasPrefix(content, "- ") {
			rest := strings.TrimLeft(content[2:], " ")
			ind += len(content) - len(rest)
			levels = append(levels, ind)
			content = rest
		}
		if strings.Count(content, "[") != strings.Count(content, "]") || strings.Count(content, "{") != strings.Count(content, "}") ||
			strings.HasPrefix(content, `"`) && !strings.HasSuffix(content, `"`) {
			return 0, 0, "", false // a flow collection or a string over lines: not judged
		}
		opens = content == "-" || strings.HasSuffix(content, ":")
		if k := strings.Index(content, ": "); k >= 0 {
			v := strings.TrimSpace(content[k+2:])
			if strings.HasPrefix(v, "|") || strings.HasPrefix(v, ">") {
				scalar = ind
			}
			if strings.HasPrefix(v, "&") && !strings.Contains(v, " ") {
				opens = true // an anchored mapping
			}
		}
	}
	return 0, 0, "", false
}

// stripComment drops a trailing " # comment" outside quotes.
func stripComment(s string) string {
	quote := byte(0)
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case quote != 0:
			if c == quote {
				quote = 0
			}
		case c == '"' || c == '\'':
			quote = c
		case c == '#' && i > 0 && s[i-1] == ' ':
			return strings.TrimRight(s[:i], " ")
		}
	}
	return strings.TrimRight(s, " ")
}
