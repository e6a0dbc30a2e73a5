// Package configs owns the job file: one strict, versioned YAML file per
// lab machine (apiVersion kbisect/v1, kind Job), the shared defaults files
// it includes (kind Defaults), kbisect's defaults, and the validation that
// reports every problem with its file:line:col. It also owns the job
// file's vocabulary that other packages read with it: CPU lists, kernel
// boot parameters and the isolation they give, config option lines,
// durations, sizes, thresholds, commands with their ${NAME} variables, the
// workload tools and their metrics. The example job files and config
// fragments that ship with kbisect live in this directory too;
// docs/job-file.md documents every key.
//
// Load reads a job: a file and its includes, decoded strictly over the
// node tree of go.yaml.in/yaml/v3 (so that every value keeps its
// position, and one pass finds every error), defaults filled, then values
// validated against each other. Open is Load for a command that goes on
// to use the job: its problems are a usage error.
//
// It may import internal/usage (the class of usage errors) and
// internal/cpulist, no other kbisect package: everything else reads jobs
// from it.
package configs
