package culprit

import "math"

// drift is how far the machine's level has moved at each of the run's
// boots, relative to its mean over the boots that measured it: a level
// that moves with a slope over the boots' order (a night's thermal or
// firmware drift grows steadily, and may stop), learned from the boots
// whose mode is known, with its uncertainty at each boot.
type drift struct {
	// moving says the machine was found to drift: else every boot's
	// drift is 0.
	moving bool
	// step is the variance per boot of the slope's changes.
	step float64
	mean []float64 // at each boot of the run, 0 … len−1
	vari []float64
	// last is the state at the run's last boot (level, slope) and its
	// covariance, to walk on from past it.
	last    [2]float64
	lastCov [2][2]float64
}

// driftObs is one boot that measured the machine: its boot's place in
// the run, how far its level sat from its mode's, and that measure's
// variance.
type driftObs struct {
	at        int
	off, vari float64
}

// slopeSpread is the prior spread of the drift's slope, per boot: a
// level that moves by up to a few percent a boot.
const slopeSpread = 0.02

// slopeSteps are the changes of the slope tried, in variance per boot:
// a steady drift, and one that turns (grows, then stops).
var slopeSteps = [...]float64{0, 1e-7, 1e-6, 1e-5}

// driftGain is how much more likely, in log, the boots must be under a
// drifting machine before it is believed to drift: the slope is one
// more thing to learn.
const driftGain = 3

// fitDrift smooths the observations over boots 0 … boots−1: a level that
// does not move, or one with a slope (which may change), whichever the
// boots are likeliest under by at least driftGain. Boots far from their
// mode's level (on the wrong side, stray) are given less weight, as a
// Student-t would.
func fitDrift(obs []driftObs, boots int) drift {
	flat := drift{mean: make([]float64, boots), vari: make([]float64, boots)}
	if len(obs) < 4 || boots == 0 {
		return flat
	}
	_, still := smooth(obs, boots, 0, 0)
	best, bestLL := flat, still+driftGain
	for _, q := range slopeSteps {
		if d, ll := smooth(obs, boots, slopeSpread, q); ll > bestLL {
			best, bestLL = d, ll
			best.moving = true
		}
	}
	return best
}

// smooth is the Kalman filter and Rauch–Tung–Striebel smoother of a
// level with a slope (of prior spread slopeSD, changing by variance q a
// boot; 0 and 0: a level that does not move), reweighed three times
// against outliers; ll is the observations' log-likelihood under it, the
// first one's (whose level is unknown) left out.
func smooth(obs []driftObs, boots int, slopeSD, q float64) (drift, float64) {
	at := make([][]int, boots)
	for i, o := range obs {
		if o.at >= 0 && o.at < boots {
			at[o.at] = append(at[o.at], i)
		}
	}
	weight := make([]float64, len(obs))
	for i := range weight {
		weight[i] = 1
	}
	type state struct {
		s [2]float64
		p [2][2]float64
	}
	predict := func(x state) state {
		// F = [[1 1] [0 1]], Q = diag(0, q).
		s := [2]float64{x.s[0] + x.s[1], x.s[1]}
		p := [2][2]float64{
			{x.p[0][0] + 2*x.p[0][1] + x.p[1][1], x.p[0][1] + x.p[1][1]},
			{x.p[0][1] + x.p[1][1], x.p[1][1] + q},
		}
		return state{s, p}
	}
	var d drift
	var ll float64
	for pass := 0; pass < 3; pass++ {
		filt, pred := make([]state, boots), make([]state, boots)
		x := state{p: [2][2]float64{{1e6, 0}, {0, slopeSD * slopeSD}}}
		ll = 0
		first := true
		for t := 0; t < boots; t++ {
			if t > 0 {
				x = predict(x)
			}
			pred[t] = x
			for _, i := range at[t] {
				o := obs[i]
				r := o.vari / weight[i]
				s := x.p[0][0] + r
				e := o.off - x.s[0]
				if !first {
					ll += -0.5*math.Log(2*math.Pi*s) - 0.5*e*e/s
				}
				first = false
				k0, k1 := x.p[0][0]/s, x.p[1][0]/s
				x.s = [2]float64{x.s[0] + k0*e, x.s[1] + k1*e}
				p00, p01, p11 := x.p[0][0], x.p[0][1], x.p[1][1]
				x.p = [2][2]float64{{p00 - k0*p00, p01 - k0*p01}, {p01 - k0*p01, p11 - k1*p01}}
			}
			filt[t] = x
		}
		sm := make([]state, boots)
		sm[boots-1] = filt[boots-1]
		for t := boots - 2; t >= 0; t-- {
			f, pn := filt[t], pred[t+1]
			// G = P_f Fᵀ P_pred⁻¹.
			pf := [2][2]float64{{f.p[0][0] + f.p[0][1], f.p[0][1]}, {f.p[1][0] + f.p[1][1], f.p[1][1]}} // P_f Fᵀ
			det := pn.p[0][0]*pn.p[1][1] - pn.p[0][1]*pn.p[1][0]
			if math.Abs(det) < 1e-300 {
				sm[t] = f
				continue
			}
			inv := [2][2]float64{{pn.p[1][1] / det, -pn.p[0][1] / det}, {-pn.p[1][0] / det, pn.p[0][0] / det}}
			var g [2][2]float64
			for i := range 2 {
				for j := range 2 {
					g[i][j] = pf[i][0]*inv[0][j] + pf[i][1]*inv[1][j]
				}
			}
			ds := [2]float64{sm[t+1].s[0] - pn.s[0], sm[t+1].s[1] - pn.s[1]}
			var dp [2][2]float64
			for i := range 2 {
				for j := range 2 {
					dp[i][j] = sm[t+1].p[i][j] - pn.p[i][j]
				}
			}
			var out state
			out.s = [2]float64{f.s[0] + g[0][0]*ds[0] + g[0][1]*ds[1], f.s[1] + g[1][0]*ds[0] + g[1][1]*ds[1]}
			for i := range 2 {
				for j := range 2 {
					v := f.p[i][j]
					for k := range 2 {
						for l := range 2 {
							v += g[i][k] * dp[k][l] * g[j][l]
						}
					}
					out.p[i][j] = v
				}
			}
			sm[t] = out
		}
		d = drift{step: q, mean: make([]float64, boots), vari: make([]float64, boots), last: sm[boots-1].s, lastCov: sm[boots-1].p}
		for t := range sm {
			d.mean[t], d.vari[t] = sm[t].s[0], math.Max(sm[t].p[0][0], 0)
		}
		for i, o := range obs {
			e := o.off - d.mean[o.at]
			z2 := e * e / (o.vari + d.vari[o.at])
			weight[i] = (defaultNu + 1) / (defaultNu + z2)
		}
	}
	// The drift is relative to the level the boots share: its mean over
	// them, and its variance beyond that of a level that does not move.
	mean, info := 0.0, 0.0
	for i, o := range obs {
		w := weight[i] / o.vari
		mean += w * d.mean[o.at]
		info += w
	}
	mean /= info
	for t := range d.mean {
		d.mean[t] -= mean
		d.vari[t] = math.Max(0, d.vari[t]-1/info)
	}
	d.last[0] -= mean
	return d, ll
}

// at is the drift and its variance at boot t: past the last boot it
// goes on along its slope, less sure with every boot.
func (d drift) at(t int) (mean, vari float64) {
	n := len(d.mean)
	switch {
	case n == 0 || !d.moving:
		return 0, 0
	case t < n:
		return d.mean[t], d.vari[t]
	}
	k := float64(t - n + 1)
	p := d.lastCov
	return d.last[0] + k*d.last[1], math.Max(0, d.vari[n-1]+2*k*p[0][1]+k*k*p[1][1]+k*k*k*d.step/3)
}

// drifting says whether the machine was found to drift.
func (d drift) drifting() bool { return d.moving }
