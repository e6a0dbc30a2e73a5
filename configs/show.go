package configs

import (
	"bytes"
	"fmt"
	"path/filepath"
	"strings"

	"go.yaml.in/yaml/v3"
)

// MarshalYAML writes the set as a cpulist.
func (c CPUs) MarshalYAML() (any, error) { return c.String(), nil }

// Effective renders the job as kbisect uses it, after includes and
// defaults, as YAML with a comment on every value that came from an
// included file or from kbisect's defaults. Commands are shown as written,
// so ${NAME} secrets stay unexpanded.
func (j *Job) Effective() ([]byte, error) {
	// The includes are merged in already; paths are absolute: the output
	// loads as it is from anywhere.
	c := *j
	c.Include = nil
	var doc yaml.Node
	if err := doc.Encode(&c); err != nil {
		return nil, err
	}
	j.annotate(&doc, "")
	var b bytes.Buffer
	fmt.Fprintf(&b, "# %s as kbisect uses it: defaults filled in", j.File)
	if len(j.Include) > 0 {
		fmt.Fprintf(&b, ", %s merged", strings.Join(j.Include, ", "))
	}
	b.WriteString(".\n")
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(&doc); err != nil {
		return nil, err
	}
	if err := enc.Close(); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// annotate adds provenance comments to the values of mapping n at key.
func (j *Job) annotate(n *yaml.Node, key string) {
	if n.Kind == yaml.DocumentNode {
		for _, c := range n.Content {
			j.annotate(c, key)
		}
		return
	}
	if n.Kind != yaml.MappingNode {
		return
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		full := joinKey(key, k.Value)
		var notes []string
		if j.defaulted[full] {
			notes = append(notes, "default")
			if full == "verdict.samples.min" && j.Verdict.Search == SearchPosterior {
				notes = append(notes, "a bisection's boot starts with 1 where calibration finds one sample decisive")
			}
		} else if p, ok := j.pos[full]; ok && p.File != j.File && v.Kind != yaml.MappingNode {
			notes = append(notes, "from "+filepath.Base(p.File))
		}
		if refs := j.envKeys()[full]; len(refs) > 0 {
			notes = append(notes, "${"+strings.Join(refs, "}, ${")+"} from the environment")
		}
		if len(notes) > 0 {
			k.LineComment = strings.Join(notes, "; ")
		}
		if v.Kind == yaml.MappingNode {
			j.annotate(v, full)
		}
	}
}
