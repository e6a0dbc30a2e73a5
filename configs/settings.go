package configs

import (
	"fmt"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Setting is one value of the job as kbisect uses it.
type Setting struct {
	// Value is the value as YAML writes it (a list element has its own
	// key, as build.fragments[0]).
	Value string
	// Default tells a value kbisect filled in, not one a file set.
	Default bool
}

// Settings flattens the job as kbisect uses it, includes merged and
// defaults filled in, to one value per key ("verdict.threshold",
// "build.fragments[0]"): what config show prints, for comparing two jobs
// key by key. Commands are as written, ${NAME} secrets unexpanded.
func (j *Job) Settings() (map[string]Setting, error) {
	c := *j
	c.Include = nil
	var doc yaml.Node
	if err := doc.Encode(&c); err != nil {
		return nil, err
	}
	out := map[string]Setting{}
	j.flatten(&doc, "", "", out)
	return out, nil
}

// flatten adds n's scalars to out under key; section is the mapping key
// that says whether a value is a default (a list's elements share their
// list's).
func (j *Job) flatten(n *yaml.Node, key, section string, out map[string]Setting) {
	switch n.Kind {
	case yaml.DocumentNode:
		for _, c := range n.Content {
			j.flatten(c, key, section, out)
		}
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := joinKey(key, n.Content[i].Value)
			j.flatten(n.Content[i+1], k, joinKey(section, n.Content[i].Value), out)
		}
	case yaml.SequenceNode:
		for i, c := range n.Content {
			j.flatten(c, fmt.Sprintf("%s[%d]", key, i), section, out)
		}
	case yaml.ScalarNode:
		out[key] = Setting{Value: n.Value, Default: j.defaulted[section]}
	default:
		b, _ := yaml.Marshal(n)
		out[key] = Setting{Value: strings.TrimSpace(string(b)), Default: j.defaulted[section]}
	}
}
