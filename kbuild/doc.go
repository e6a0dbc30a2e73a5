// Package kbuild owns the kernel builds: trees and worktrees, the .config
// from a base and fragments, the check that every requested option (the
// PREEMPT_RT that olddefconfig drops without a word when EXPERT is
// missing) is really set, make, and the artifact cache.
//
// What exists today: reading .config files and fragments, the request of
// a job merged as scripts/kconfig/merge_config.sh merges it, and its
// verification against the final .config, with the reason read from the
// tree's Kconfig files ("depends on EXPERT && ARCH_SUPPORTS_RT, and
// CONFIG_EXPERT is not set"). Builds, slots and the cache come next.
package kbuild
