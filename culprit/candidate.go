package culprit

// Candidate is a commit and the probability that it is the first bad one.
type Candidate struct {
	Commit      int     `json:"commit"`
	Probability float64 `json:"probability"`
}

// leading lists the most probable culprits, most probable first, until
// they hold mass of the probability or k of them are listed.
func leading(pc []float64, mass float64, k int) []Candidate {
	var out []Candidate
	taken := map[int]bool{}
	sum := 0.0
	for len(out) < k && (len(out) == 0 || sum < mass) && len(out) < len(pc) {
		best := -1
		for i, v := range pc {
			if !taken[i] && (best < 0 || v > pc[best]) {
				best = i
			}
		}
		taken[best] = true
		out = append(out, Candidate{Commit: best, Probability: pc[best]})
		sum += pc[best]
	}
	return out
}
