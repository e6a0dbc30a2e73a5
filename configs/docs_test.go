package configs

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// docRows reads the key tables of docs/job-file.md: key → its row's cells.
func docRows(t *testing.T) map[string][]string {
	t.Helper()
	data, err := os.ReadFile("../docs/job-file.md")
	if err != nil {
		t.Fatal(err)
	}
	row := regexp.MustCompile("^\\| `([A-Za-z_.]+)` \\|(.*)\\|$")
	section := regexp.MustCompile("^## `([a-z_]+)`")
	rows := map[string][]string{}
	for _, line := range strings.Split(string(data), "\n") {
		if m := section.FindStringSubmatch(line); m != nil {
			rows[m[1]] = nil
		}
		if m := row.FindStringSubmatch(line); m != nil {
			cells := strings.Split(m[2], " | ")
			for i := range cells {
				cells[i] = strings.TrimSpace(cells[i])
			}
			rows[m[1]] = cells
		}
	}
	return rows
}

// TestEveryKeyIsDocumented: each schema key has a row in docs/job-file.md,
// and each row is a schema key.
func TestEveryKeyIsDocumented(t *testing.T) {
	rows := docRows(t)
	keys := map[string]bool{}
	for _, k := range Keys() {
		keys[k] = true
		if _, ok := rows[k]; !ok {
			t.Errorf("docs/job-file.md has no row for %s", k)
		}
	}
	for k := range rows {
		if !keys[k] && strings.Contains(k, ".") {
			t.Errorf("docs/job-file.md documents %s, which is not a key", k)
		}
	}
}

// TestDocumentedDefaultsAreTheDefaults compares the default column of
// docs/job-file.md with what Load fills in for a job that sets little.
func TestDocumentedDefaultsAreTheDefaults(t *testing.T) {
	rows := docRows(t)
	checked := 0
	for _, file := range []string{"testdata/valid-minimal.yaml", "testdata/valid-qemu.yaml", "testdata/valid-command.yaml"} {
		job, err := Load(file, testOptions())
		if err != nil {
			t.Fatal(err)
		}
		out, err := job.Effective()
		if err != nil {
			t.Fatal(err)
		}
		var doc yaml.Node
		if err := yaml.Unmarshal(out, &doc); err != nil {
			t.Fatal(err)
		}
		values := map[string]string{}
		flattenValues(doc.Content[0], "", values)
		for key := range job.defaulted {
			cells, ok := rows[key]
			if !ok || len(cells) < 2 || !strings.HasPrefix(cells[1], "`") {
				continue // documented in words, not as a value
			}
			v := strings.Replace(values[key], "/nonexistent-home", "~", 1)
			if !strings.Contains(cells[1], "`"+v+"`") {
				t.Errorf("%s: %s defaults to %s, docs say %s", file, key, v, cells[1])
			}
			checked++
		}
	}
	if checked < 20 {
		t.Errorf("only %d defaults checked", checked)
	}
}

// flattenValues maps dotted keys to scalar values ("[a, b]" for lists).
func flattenValues(n *yaml.Node, prefix string, out map[string]string) {
	for i := 0; i+1 < len(n.Content); i += 2 {
		key := joinKey(prefix, n.Content[i].Value)
		v := n.Content[i+1]
		switch v.Kind {
		case yaml.MappingNode:
			flattenValues(v, key, out)
		case yaml.SequenceNode:
			var items []string
			for _, c := range v.Content {
				items = append(items, c.Value)
			}
			out[key] = "[" + strings.Join(items, ", ") + "]"
		default:
			out[key] = v.Value
		}
	}
}
