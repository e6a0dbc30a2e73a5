// Package configs will own the job file: one strict, versioned YAML file per
// lab machine (apiVersion kbisect/v1, kind Job), its defaults, validation
// with file:line:col errors, and the examples in configs/. It arrives with
// the job-file issue; until then `kbisect run` works with --exec only.
package configs
