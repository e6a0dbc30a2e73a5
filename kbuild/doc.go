// Package kbuild will own kernel trees and worktrees, .config from a base
// and fragments, the check that requested options (PREEMPT_RT, NO_HZ_FULL,
// …) are really set, make, and the artifact cache. It arrives with the
// kbuild issue.
package kbuild
