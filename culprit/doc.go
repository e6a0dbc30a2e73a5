// Package culprit finds the first bad commit when measurements are noisy:
// boots are the unit of evidence (a model with a per-boot level, boots on
// the wrong side and spiky samples, learned from the endpoints), a
// posterior over which commit of the range is the culprit (DAG-aware,
// skips kept as candidates), the next measurement chosen for the most
// information per second (a new commit, or another boot of one measured),
// and a stop only when one commit reaches the confidence and fresh boots
// of it, its parents and the bad endpoint without it agree — else the
// leading candidates with their probabilities.
//
// It knows nothing of kernels, git or labs: commits are indexes of a
// DAG, boots are slices of samples. It imports no kbisect package.
package culprit
