package culprit

import "math"

// keepReading is how much likelier (in log) the boots must be under
// another reading of the regression than under the search's own before
// a refit takes it.
const keepReading = 4

// How often, in boots, the drift and the levels' nodes are learned again
// (refreshEvery, of the run's boots) and the spreads (refitEvery, of the
// search's).
const (
	refreshEvery = 4
	refitEvery   = 8
)

// refresh learns the machine's drift again from the boots whose mode is
// known, lays the levels' nodes where the boots now put the levels, and
// takes the model's best guesses from them.
func (s *Search) refresh() {
	s.fitDrift()
	s.w.relay()
	s.guesses()
}

// guesses sets the model's levels and shares to what the posterior
// believes now.
func (s *Search) guesses() {
	b := s.w.levels()
	post := s.w.posterior()
	s.m.Good, s.m.Bad = b.mean[0], b.mean[1]
	s.m.Shows, s.m.BadBoots = post.shows, post.wrong
	s.m.Drift, _ = s.drift.at(s.runBoots)
}

// fitDrift learns the drift from every boot: how far its level sits from
// the level of the mode it shows (weighed by how sure that is: a boot
// whose kernel may be either is as telling of the machine as an
// endpoint's, once it clearly shows one mode), the good endpoint's boots
// anchoring it. Every boot is then weighed at its drift.
func (s *Search) fitDrift() {
	pc, _ := s.Probabilities()
	q := s.d.badness(pc)
	var obs []driftObs
	for _, b := range s.w.boots {
		if b.r.empty() {
			continue
		}
		pBad := pBadOf(b.kernel, pc, q)
		p := pBad*s.m.Shows + (1-pBad)*s.m.BadBoots
		fg := b.r.at(0, s.m.Good+b.drift, s.m.BootSpread)
		fb := b.r.at(1, s.m.Bad+b.drift, s.m.BootSpread)
		rho := 1 / (1 + math.Exp(math.Log(1-p)+fg-math.Log(p)-fb))
		vari := s.m.BootSpread*s.m.BootSpread + medianNoise(len(b.r.ys))*s.m.Spread*s.m.Spread
		// A boot far from where the machine was (more than 4 of a
		// boot's spreads off the drift so far) is a spike, or a boot
		// on neither side, not the machine: a lone sample's centre is
		// the sample, spike or not.
		now, _ := s.drift.at(b.at)
		far := 4 * math.Sqrt(vari)
		if off := b.r.centre(0) - s.m.Good; 1-rho > 0.05 && math.Abs(off-now) <= far {
			obs = append(obs, driftObs{at: b.at, off: off, vari: vari / (1 - rho)})
		}
		if off := b.r.centre(1) - s.m.Bad; rho > 0.05 && math.Abs(off-now) <= far {
			obs = append(obs, driftObs{at: b.at, off: off, vari: vari / rho})
		}
	}
	d := fitDrift(obs, s.runBoots)
	if !d.drifting() && !s.drift.drifting() {
		return
	}
	s.drift = d
	for _, b := range s.w.boots {
		dr, dv := d.at(b.at)
		b.drift, b.scatter = dr, math.Sqrt(s.m.BootSpread*s.m.BootSpread+dv)
	}
	s.w.reweigh()
}

// refit learns the spreads and each mode's spikes again from the
// endpoints' boots and every boot whose kernel the evidence has all but
// decided (bad or good at 0.999), then weighs every boot again under
// them. The endpoints' few boots are a thin base for the boot-to-boot
// spread; the search's own boots thicken it as they come. Replayed in
// the same order, the log refits at the same boots, so a resumed search
// is the one it was.
func (s *Search) refit() {
	pc, _ := s.Probabilities()
	q := s.d.badness(pc)
	var boots, ends []sided
	goods, bads := 0, 0
	for _, b := range s.w.boots {
		if b.r.empty() {
			continue
		}
		pBad := pBadOf(b.kernel, pc, q)
		if pBad > 0.001 && pBad < 0.999 {
			continue
		}
		boots = append(boots, sided{ys: b.r.ys, bad: pBad >= 0.999, drift: b.drift})
		if b.kernel.commit == goodEndpoint || (b.kernel.commit == s.d.Len()-1 && !b.kernel.reverted) {
			ends = append(ends, boots[len(boots)-1])
		}
		if pBad >= 0.999 {
			bads++
		} else {
			goods++
		}
	}
	if goods == 0 || bads == 0 {
		return
	}
	// The reading of the regression (its levels, each mode's spikes, how
	// often a bad kernel's boot shows it) is the endpoints' alone: the
	// sides of the search's boots were decided under the reading they
	// would then confirm. Boots that started with one sample gave a
	// second only when the first was unclear: the spread within a boot
	// stays calibration's then.
	keep := s.opt.MinSamples < 3
	r, ok := fitBest(ends, s.m, keep, 0, keepReading, false)
	if !ok || (r.spiky() != s.m.spiky() && !reproducedBy(ends, r)) {
		// The endpoints read upside down for now, or as another kind
		// of regression under which the bad endpoint is not worse
		// than the good one: keep the last reading.
		r = s.m
	}
	// The spreads are learned from every boot whose side is known.
	m, _ := fitModes(boots, r, 0)
	m.SpikesGood, m.SpikesBad, m.SpikeSize, m.SpikeSpread = r.SpikesGood, r.SpikesBad, r.SpikeSize, r.SpikeSpread
	if keep {
		m.Spread = s.m.Spread
	}
	// Where these boots put the levels anchors the quadrature: each
	// level known to its boots' spread over the root of their number
	// (twice that: the fit's boots are a few).
	se := func(n float64) float64 {
		return 2 * math.Sqrt(m.BootSpread*m.BootSpread+m.Spread*m.Spread/3) / math.Sqrt(math.Max(n, 1))
	}
	s.w.anchorAt(m.Good, m.Bad, se(float64(goods)*(1-m.BadBoots)), se(float64(bads)*m.Shows))
	// The levels and shares are the posterior's, not this fit's: it
	// keeps only what it learned of the spreads and the spikes.
	m.Good, m.Bad, m.Shows, m.BadBoots, m.Crossings, m.Drift = s.m.Good, s.m.Bad, s.m.Shows, s.m.BadBoots, s.m.Crossings, s.m.Drift
	if m.Validate() != nil {
		return
	}
	s.m = m
	for _, b := range s.w.boots {
		_, dv := s.drift.at(b.at)
		b.scatter = math.Sqrt(s.m.BootSpread*s.m.BootSpread + dv)
	}
	s.w.reweigh()
	s.w.relay()
	s.guesses()
	s.gain = newGainTable(s.m, s.opt.MinSamples)
	if s.budget {
		s.opt.MaxBoots = max(s.opt.MaxBoots, Budget(s.d.Len(), s.gain))
	}
}

// reproducedBy says whether, under reading m, the endpoints' boots make
// the bad endpoint worse than the good one (Reproduced at even odds).
func reproducedBy(ends []sided, m Model) bool {
	var good, bad [][]float64
	for _, b := range ends {
		raw := make([]float64, len(b.ys))
		for i, y := range b.ys {
			raw[i] = math.Exp(y - b.drift)
		}
		if b.bad {
			bad = append(bad, raw)
		} else {
			good = append(good, raw)
		}
	}
	return len(good) > 0 && len(bad) > 0 && Reproduced(good, bad, m) >= reproducedAt
}

// pBadOf is the probability that kernel k is bad, from each commit's
// probability of being the culprit (pc) and of being bad (q): the good
// endpoint never is, the bad endpoint with c reverted is unless c is
// the culprit.
func pBadOf(k kernel, pc, q []float64) float64 {
	switch {
	case k.commit == goodEndpoint:
		return 0
	case k.reverted:
		return 1 - pc[k.commit]
	}
	return q[k.commit]
}
