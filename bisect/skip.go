package bisect

// prnModulo is git's PRN_MODULO.
const prnModulo = 32768

// prn is git's get_prn: the rand(3) step seeded with the number of
// candidates, so the choice is deterministic for a given state.
func prn(count uint32) int32 {
	count = count*1103515245 + 12345
	return int32((count / 65536) % prnModulo)
}

// sqrti is git's integer square root, computed in float32 as git does.
func sqrti(val int32) int32 {
	if val == 0 {
		return 0
	}
	x := float32(val)
	for {
		y := (x + float32(val)/x) / 2
		d := y - x
		if y <= x {
			d = x - y
		}
		x = y
		if d < 0.5 {
			break
		}
	}
	return int32(x)
}

// skipAwayIndex is the index git's skip_away picks among count untested
// candidates sorted best first: biased towards the best, but away from the
// skipped commits' neighbourhood.
func skipAwayIndex(count int) int {
	p := prn(uint32(count))
	// int32 arithmetic, as git's int expression, wrapping the same way.
	return int((int32(count) * p / prnModulo) * sqrti(p) / sqrti(prnModulo))
}

// managedSkipped is git's managed_skipped over the sorted candidate list:
// the best candidate when it is not skipped; otherwise one chosen by
// skipAwayIndex among the others, never the bad commit when another is
// left. tried lists the skipped candidates that were passed over.
func managedSkipped(order []int32, skipped func(int32) bool, bad int32) (choice int32, tried []int32, ok bool) {
	if len(order) == 0 {
		return -1, nil, false
	}
	if !skipped(order[0]) {
		return order[0], nil, true
	}
	var rest []int32
	for _, id := range order {
		if skipped(id) {
			tried = append(tried, id)
		} else {
			rest = append(rest, id)
		}
	}
	if len(rest) == 0 {
		return -1, tried, false
	}
	index := skipAwayIndex(len(rest))
	for i, id := range rest {
		if i == index {
			if id != bad {
				return id, tried, true
			}
			if i > 0 {
				return rest[i-1], tried, true
			}
			return rest[0], tried, true
		}
	}
	return rest[0], tried, true
}
