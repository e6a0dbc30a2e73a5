package cpulist

import "testing"

func TestFormatWritesRangesAsTheKernelDoes(t *testing.T) {
	for _, c := range []struct {
		cpus []int
		want string
	}{
		{nil, ""},
		{[]int{3}, "3"},
		{[]int{1, 2, 3, 5, 7, 8}, "1-3,5,7-8"},
		{[]int{0, 1, 2, 3, 32, 33, 34}, "0-3,32-34"},
	} {
		if got := Format(c.cpus); got != c.want {
			t.Errorf("Format(%v) = %q, want %q", c.cpus, got, c.want)
		}
	}
}
