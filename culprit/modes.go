package culprit

import (
	"math"
	"slices"
)

// sided is a boot whose side is known (an endpoint's, or a commit's the
// evidence has decided), on the log scale, and the machine's drift at it.
type sided struct {
	ys    []float64
	bad   bool
	drift float64
}

// fitModes learns the two modes from boots whose side is known, by
// expectation–maximisation: which mode each boot showed, and within each
// boot which samples are spikes, against the modes' levels and shares of
// spikes, the boot spread and the shares of each side's boots that show
// the bad mode. A boot's level under a mode is where its samples pull it
// from that mode's level (a Student-t with spikes, reweighed: a spike
// does not move it), and its likelihood is taken at that level (Laplace):
// fits need the boots' modes roughly, the posterior weighs them exactly.
// It starts from m, keeps the share of good kernels' boots that show the
// bad mode at floor or more, and says how likely the boots are under the
// fit.
func fitModes(boots []sided, m Model, floor float64) (Model, float64) {
	floorBad := math.Max(floor, MinBadBoots)
	m = m.filled()
	resp := make([]float64, len(boots))
	var total float64
	lv, vars := make([][2]float64, len(boots)), make([][2]float64, len(boots))
	spikes := make([][2]float64, len(boots))
	heights := make([][2][2]float64, len(boots))
	last := math.Inf(-1)
	var w, n [2]float64 // each mode's boots and samples, by responsibility
	for iter := 0; iter < 25; iter++ {
		// Expectation: each boot under each mode, and which it showed.
		total = 0
		for j, b := range boots {
			var lf [2]float64
			for a := range 2 {
				centre, pi := m.Good, m.SpikesGood
				if a == 1 {
					centre, pi = m.Bad, m.SpikesBad
				}
				f := bootAt(b.ys, centre+b.drift, pi, m)
				lv[j][a], vars[j][a], lf[a], spikes[j][a], heights[j][a] = f.own-b.drift, f.ownVar, f.logLik, f.spikes, f.heights
			}
			p := m.BadBoots
			if b.bad {
				p = m.Shows
			}
			resp[j] = 1 / (1 + math.Exp(math.Log(1-p)+lf[0]-math.Log(p)-lf[1]))
			total += logAdd(math.Log(1-p)+lf[0], math.Log(p)+lf[1])
		}
		// Maximisation.
		var sum, k [2]float64
		w, n = [2]float64{}, [2]float64{}
		// The good mode's spikes are the good kernels': a bad kernel's
		// boot that does not show the regression measures as theirs,
		// and counted with them a regression in how often it spikes
		// would read as a good mode that spikes often and a bad level
		// some boots show.
		var kg, ng float64
		var badR, badN, goodR, goodN float64
		// The spikes' heights, drawn toward the defaults as if three
		// spikes had shown them.
		sk, sh, sh2 := 3.0, 3*defaultSpikeSize, 3*(defaultSpikeSize*defaultSpikeSize+defaultSpikeSpread*defaultSpikeSpread)
		for j, b := range boots {
			for a, wa := range [2]float64{1 - resp[j], resp[j]} {
				w[a] += wa
				sum[a] += wa * lv[j][a]
				k[a] += wa * spikes[j][a]
				n[a] += wa * float64(len(b.ys))
				sk += wa * spikes[j][a]
				sh += wa * heights[j][a][0]
				sh2 += wa * heights[j][a][1]
			}
			if !b.bad {
				kg += (1 - resp[j]) * spikes[j][0]
				ng += (1 - resp[j]) * float64(len(b.ys))
			}
			if b.bad {
				badR += resp[j]
				badN++
			} else {
				goodR += resp[j]
				goodN++
			}
		}
		if w[0] > 0.5 {
			m.Good = sum[0] / w[0]
		}
		if w[1] > 0.5 {
			m.Bad = sum[1] / w[1]
		}
		// Shares drawn toward what most machines show (a regression on
		// every boot, good boots seldom wrong), as the search's prior is.
		m.Shows = clamp((badR+1.8)/(badN+2), minShows, 1-floorBad)
		m.BadBoots = clamp((goodR+0.1)/(goodN+2), floorBad, maxBadBoot-0.05)
		if ng >= 3 {
			k[0], n[0] = kg, ng
		}
		m.SpikesGood = clamp((k[0]+0.2)/(n[0]+10), minSpikes, maxSpikes)
		m.SpikesBad = clamp((k[1]+0.2)/(n[1]+10), minSpikes, maxSpikes)
		// A spike is beyond the samples' scatter: it may not sit
		// among their tails.
		m.SpikeSize = math.Max(sh/sk, 4*m.Spread)
		m.SpikeSpread = math.Max(math.Sqrt(math.Max(sh2/sk-m.SpikeSize*m.SpikeSize, 0)), math.Max(minSpikeSpread, m.Spread))
		var ss, df float64
		for j := range boots {
			dg, db := lv[j][0]-m.Good, lv[j][1]-m.Bad
			ss += (1-resp[j])*(dg*dg-vars[j][0]) + resp[j]*(db*db-vars[j][1])
			df++
		}
		if df > 2 {
			m.BootSpread = math.Max(math.Sqrt(math.Max(ss/(df-2), 0)), minBootSpread)
		}
		if math.Abs(total-last) < 1e-3 {
			break
		}
		last = total
	}
	// The boot spread reported is robust (one boot far from its mode's
	// level does not carry it): the median distance of the boots' own
	// levels from their mode's, less what their samples leave unsure,
	// raised to an upper bound at 90 % for its few degrees of freedom.
	var byMode [2][]float64
	var dev []float64
	var noise float64
	for j := range boots {
		a := 0
		if resp[j] > 0.5 {
			a = 1
		}
		byMode[a] = append(byMode[a], lv[j][a])
		noise += vars[j][a]
	}
	for a := range byMode {
		c := median(byMode[a])
		for _, v := range byMode[a] {
			dev = append(dev, math.Abs(v-c))
		}
	}
	// The bad mode's level below the good one's by more than the boots
	// leave unsure: the labels swapped (its boots a good kernel's,
	// spiking more), which no regression is.
	se := math.Sqrt(m.BootSpread*m.BootSpread*(1/math.Max(w[0], 1)+1/math.Max(w[1], 1)) +
		m.Spread*m.Spread*(1/math.Max(n[0], 1)+1/math.Max(n[1], 1)))
	if m.Bad < m.Good-2*m.BootSpread-3*se {
		total = math.Inf(-1)
	}
	if len(dev) > 2 {
		s := 1.4826 * median(dev)
		m.BootSpread = math.Max(math.Sqrt(math.Max(0, s*s-noise/float64(len(dev)))), minBootSpread)
	}
	if n := len(boots) - 2; n > 0 {
		m.BootSpread *= inflation(n)
	}
	return m, total
}

// fitBest fits the modes from each reading of the bad side's boots and
// from m itself, and keeps the fit the boots are likeliest under: its
// level is worse; some of its boots are worse and the rest good
// (intermittent); its level is the good one's and more of its samples
// spike. Unless the spread is kept, each fit learns it again from the
// samples it does not take for spikes (spikes widen the spread they were
// first learned with), and the modes with it. The fit from m wins
// unless another is likelier by more than stay (in log): a search keeps
// its reading of the regression until its boots clearly tell another
// (two readings nearly as likely would otherwise take turns, each
// weighing the boots anew). ok is false when every reading put the bad
// mode's level below the good one's (best is then m).
// With spikyOnly, the spiky reading is the only one.
func fitBest(boots []sided, m Model, keepSpread bool, floor, stay float64, spikyOnly bool) (best Model, ok bool) {
	bestLL := math.Inf(-1)
	best = m
	starts := append(startModes(boots, m), m)
	if spikyOnly {
		starts = starts[len(starts)-2 : len(starts)-1]
		stay = 0
	}
	for i, start := range starts {
		if start.BootSpread <= 0 || math.IsNaN(start.Good) || math.IsNaN(start.Bad) {
			continue
		}
		f, ll := fitModes(boots, start, floor)
		if !keepSpread {
			// The good side's samples alone where the modes differ
			// in how often they spike and there are a few boots of
			// them: a bad kernel's that spike often, a few times the
			// spread above their level, widen a pooled spread until
			// they pass for its tail.
			g, b := inliers(boots, f)
			sp := spreadWithin(g, b)
			if len(g) >= 3 && f.spiky() {
				sp = spreadWithin(g)
			}
			if sp > 0 && math.Abs(sp-f.Spread) > 0.02*f.Spread {
				f.Spread = math.Max(sp, minSpread)
				f, ll = fitModes(boots, f, floor)
			}
		}
		if i == len(starts)-1 {
			ll += stay // m's own reading
		}
		if ll > bestLL {
			best, bestLL = f, ll
		}
	}
	return best, !math.IsInf(bestLL, -1)
}

// inliers are each side's boots without the samples that are spikes
// under the mode the boot most likely showed.
func inliers(boots []sided, m Model) (good, bad [][]float64) {
	for _, b := range boots {
		var best [2]float64
		var kept [2][]float64
		for a := range 2 {
			centre, pi := m.Good, m.SpikesGood
			if a == 1 {
				centre, pi = m.Bad, m.SpikesBad
			}
			f := bootAt(b.ys, centre+b.drift, pi, m)
			best[a] = f.logLik
			d := m.dens()
			for _, y := range b.ys {
				if (1-pi)*d.t(y, f.own) > pi*d.spike(y, f.own) {
					kept[a] = append(kept[a], y)
				}
			}
		}
		a := 0
		if best[1] > best[0] {
			a = 1
		}
		if b.bad {
			bad = append(bad, kept[a])
		} else {
			good = append(good, kept[a])
		}
	}
	return good, bad
}

// startModes are where fitModes begins, one start for each reading of
// the bad endpoint's boots: its level the median of its boots' (a worse
// level); the median of those above the good level (an intermittent
// regression); the good level, with spikes as its samples far above
// their boot's level show (a regression in how often it spikes). The
// good level is the median of the good boots' levels, each read from
// below (spikes go up).
func startModes(boots []sided, m Model) []Model {
	var goodLv, badLv, badMed []float64
	var goodFar, goodN, badFar, badN float64
	for _, b := range boots {
		c := lowCentre(b.ys, m.Spread)
		far := spikesAbove(b.ys, c, m.Spread)
		if b.bad {
			badLv = append(badLv, c-b.drift)
			badMed = append(badMed, median(b.ys)-b.drift)
			badFar += far
			badN += float64(len(b.ys))
		} else {
			goodLv = append(goodLv, c-b.drift)
			goodFar += far
			goodN += float64(len(b.ys))
		}
	}
	m.Good = median(goodLv)
	if len(goodLv) == 0 {
		m.Good = median(badLv)
	}
	m.BootSpread = math.Max(madAround(goodLv, m.Good), minBootSpread)
	m.Shows, m.BadBoots = 0.9, math.Max(m.BadBoots, MinBadBoots)
	m.SpikesGood = clamp((goodFar+0.2)/(goodN+10), minSpikes, maxSpikes)
	m.SpikesBad = m.SpikesGood
	level := m
	level.Bad = median(badMed)
	if len(badMed) == 0 {
		level.Bad = m.Good
	}
	starts := []Model{level}
	var above []float64
	for _, c := range badLv {
		if c > m.Good+3*m.Spread {
			above = append(above, c)
		}
	}
	if len(above) > 0 {
		split := m
		split.Bad, split.Shows = median(above), clamp(float64(len(above))/float64(len(badLv)), minShows, 1-MinBadBoots)
		starts = append(starts, split)
	}
	// Spikes on half a bad kernel's samples widen a spread pooled over
	// both sides: the spiky reading starts from the good side's own and
	// counts the bad side's spikes beyond it.
	spiky := m
	var goods [][]float64
	for _, b := range boots {
		if !b.bad {
			goods = append(goods, b.ys)
		}
	}
	if sg := spreadWithin(goods); sg > 0 && sg < m.Spread {
		spiky.Spread = math.Max(sg, minSpread)
		badFar = 0
		for _, b := range boots {
			if b.bad {
				badFar += spikesAbove(b.ys, lowCentre(b.ys, spiky.Spread), spiky.Spread)
			}
		}
	}
	spiky.Bad = m.Good + 0.01
	spiky.SpikesBad = clamp((badFar+0.2)/(badN+10), minSpikes, maxSpikes)
	return append(starts, spiky)
}

// lowCentre is a boot's level read from below: the median of the
// samples within four spreads of its lowest dense pair (spikes go up, and
// a median of few spiky samples may be a spike).
func lowCentre(ys []float64, spread float64) float64 {
	if len(ys) <= 2 {
		return median(ys)
	}
	s := slices.Clone(ys)
	slices.Sort(s)
	start := 0
	for i := 0; i+1 < len(s); i++ {
		if s[i+1]-s[i] <= 2*spread {
			start = i
			break
		}
	}
	var near []float64
	for _, y := range s[start:] {
		if y-s[start] <= 4*spread {
			near = append(near, y)
		}
	}
	return median(near)
}

// bootFit is a boot read under one mode: its own level (where its
// samples alone put it, reweighed against spikes and tails) and that
// level's variance, the log-likelihood of its samples with the level
// integrated against the mode's boot-to-boot scatter (Laplace's
// approximation about where mode and samples meet), how many of its
// samples are spikes, and the sums of those spikes' heights above the
// level and of their squares.
type bootFit struct {
	own, ownVar, logLik, spikes float64
	heights                     [2]float64
}

// bootAt reads a boot under a mode whose level (drift included) is
// centre and whose share of spikes is pi.
func bootAt(ys []float64, centre, pi float64, m Model) bootFit {
	s2, t2 := m.Spread*m.Spread, m.BootSpread*m.BootSpread
	d := m.dens()
	// irls is the level the samples pull to from start, the mode's prior
	// weighing in with precision prior, and the samples' precision.
	irls := func(start, prior float64) (float64, float64) {
		mu, h := start, prior
		for it := 0; it < 6; it++ {
			num, den := centre*prior, prior
			for _, y := range ys {
				z := (y - mu) / m.Spread
				in := (1 - pi) * d.t(y, mu)
				r := in / (in + pi*d.spike(y, mu)) // the chance y is not a spike
				w := r * (m.Nu + 1) / (m.Nu + z*z)
				num += w * y / s2
				den += w / s2
			}
			if den <= 0 {
				break
			}
			next := num / den
			done := math.Abs(next-mu) < 1e-4*m.Spread
			mu, h = next, den
			if done {
				break
			}
		}
		return mu, h
	}
	var f bootFit
	mu, h := irls(centre, 1/t2)
	own, hOwn := irls(mu, 0)
	f.own, f.ownVar = own, 1/math.Max(hOwn, 1e-12)
	ll := -0.5*(mu-centre)*(mu-centre)/t2 - 0.5*math.Log(2*math.Pi*t2)
	p := 1.0
	for _, y := range ys {
		v := d.at(y, mu, pi)
		p *= v
		sp := pi * d.spike(y, mu) / v
		f.spikes += sp
		f.heights[0] += sp * (y - mu)
		f.heights[1] += sp * (y - mu) * (y - mu)
	}
	f.logLik = ll + math.Log(p) + 0.5*math.Log(2*math.Pi/h)
	return f
}

// spikesAbove counts a boot's samples more than 4 spreads above its
// centre c: its spikes, as the starts of the fit count them.
func spikesAbove(ys []float64, c, spread float64) float64 {
	n := 0.0
	for _, y := range ys {
		if y-c > 4*spread {
			n++
		}
	}
	return n
}
