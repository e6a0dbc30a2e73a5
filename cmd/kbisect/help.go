package main

import (
	_ "embed"
	"strings"
)

// The commands' long help (the DESCRIPTION of --help) is prose, kept in
// help/<command>.txt where it reads and diffs as prose.
var (
	//go:embed help/kbisect.txt
	kbisectHelp string
	//go:embed help/simulate.txt
	simulateHelp string
	//go:embed help/run.txt
	runHelp string
	//go:embed help/nightly.txt
	nightlyHelp string
	//go:embed help/history.txt
	historyHelp string
	//go:embed help/ab.txt
	abHelp string
	//go:embed help/lab-image.txt
	labImageHelp string
	//go:embed help/report.txt
	reportHelp string
	//go:embed help/validate.txt
	validateHelp string
	//go:embed help/config-show.txt
	configShowHelp string
	//go:embed help/parse.txt
	parseHelp string
	//go:embed help/measure.txt
	measureHelp string
	//go:embed help/host-check.txt
	hostCheckHelp string
	//go:embed help/boot.txt
	bootHelp string
	//go:embed help/build.txt
	buildHelp string
	//go:embed help/demo.txt
	demoHelp string
)

// helpText is a help file as the command shows it: without the file's
// final newline.
func helpText(file string) string { return strings.TrimSuffix(file, "\n") }
