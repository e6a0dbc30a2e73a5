// Package layers holds no code: its test reads the module's import graph
// (go list -deps) and fails on an arrow the house forbids, the table of
// DESIGN.md's packages ("must not know about"), kept in layers_test.go and
// in docs/architecture.md.
package layers
