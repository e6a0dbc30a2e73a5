package culprit

import (
	"math"
)

// posterior is the belief over which commit is the first bad one, plus
// "none": no commit of the range is bad, the bad endpoint included. A
// commit x is bad under culprit c when c is x or an ancestor of it, so
// evidence λ (log "like bad" over "like good") measured at x adds λ to
// the score of every ancestor-or-self of x.
type posterior struct {
	d     *DAG
	score []float64 // log prior + evidence, per culprit
	none  float64
}

func newPosterior(d *DAG, prior []float64, none float64) *posterior {
	p := &posterior{d: d, score: make([]float64, d.Len()), none: math.Log(none)}
	total := 0.0
	for i := range p.score {
		w := 1.0
		if prior != nil {
			w = prior[i]
		}
		total += w
	}
	for i := range p.score {
		w := 1.0
		if prior != nil {
			w = prior[i]
		}
		p.score[i] = math.Log((1 - none) * w / total)
	}
	return p
}

// add takes evidence λ measured at commit x.
func (p *posterior) add(x int, l float64) {
	p.d.eachAncestor(x, func(c int) { p.score[c] += l })
}

// addReverted takes evidence λ measured on the bad endpoint with commit r
// reverted: that kernel is bad under every culprit but r (and none).
func (p *posterior) addReverted(r int, l float64) {
	for c := range p.score {
		if c != r {
			p.score[c] += l
		}
	}
}

// probs normalises the scores: each culprit's probability, and none's.
func (p *posterior) probs() ([]float64, float64) {
	top := p.none
	for _, s := range p.score {
		top = math.Max(top, s)
	}
	out := make([]float64, len(p.score))
	sum := math.Exp(p.none - top)
	for i, s := range p.score {
		out[i] = math.Exp(s - top)
		sum += out[i]
	}
	for i := range out {
		out[i] /= sum
	}
	return out, math.Exp(p.none-top) / sum
}

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
