// Package configs owns the job file: one strict, versioned YAML file per
// lab machine (apiVersion kbisect/v1, kind Job), the shared defaults files
// it includes (kind Defaults), kbisect's defaults, and the validation that
// reports every problem with its file:line:col. The example job files and
// config fragments that ship with kbisect live in this directory too;
// docs/job-file.md documents every key.
//
// Load is the one entry point: it reads a file and its includes, decodes
// them strictly over the node tree of go.yaml.in/yaml/v3 (so that every
// value keeps its position, and one pass finds every error), fills
// defaults, then validates values against each other.
//
// It imports no other kbisect package: everything else reads jobs from it.
package configs
