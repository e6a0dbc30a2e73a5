package main

import (
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/urfave/cli/v2"
)

// TestEveryHelpFileIsShownByItsCommand: a file in help/ that no command
// shows would be edited in vain.
func TestEveryHelpFileIsShownByItsCommand(t *testing.T) {
	app := newApp(io.Discard, io.Discard)
	shown := map[string]bool{app.Description: true}
	var walk func([]*cli.Command)
	walk = func(cmds []*cli.Command) {
		for _, c := range cmds {
			shown[c.Description] = true
			walk(c.Subcommands)
		}
	}
	walk(app.Commands)
	files, err := filepath.Glob(filepath.Join("help", "*.txt"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no help files: %v", err)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if !shown[helpText(string(b))] {
			t.Errorf("%s is no command's help (embed it in help.go and give it to its command)", f)
		}
	}
}
