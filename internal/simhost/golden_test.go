package simhost_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"testing"
	"time"

	"kbisect/internal/simhost"
)

// TestWithoutAModelTheTracesAreTheSameAsEver pins the traces of a host
// without a noise model: a quiet kernel's two measurements, on isolated
// and housekeeping CPUs, then a storm's (the floor raised to the seed's
// bad level). A change to the model must leave these bytes alone; a
// NoiseModel with levels but a zero model is no model.
func TestWithoutAModelTheTracesAreTheSameAsEver(t *testing.T) {
	sim, opt := lab(t, 42)
	if err := sim.SetNoiseModel(simhost.NoiseModel{Good: 3 * time.Microsecond, Bad: 17 * time.Microsecond}); err != nil {
		t.Fatal(err)
	}
	h := dial(t, opt)
	w := seedWorkload(t, "0-3,17,33-35")
	w.Duration = 5 * time.Second
	sum := sha256.New()
	for i := 0; i < 3; i++ {
		if i == 2 {
			sim.SetFloor(17 * time.Microsecond)
		}
		_, raw, err := w.Measure(context.Background(), h)
		if err != nil {
			t.Fatal(err)
		}
		sum.Write(raw.Stdout)
	}
	if got := hex.EncodeToString(sum.Sum(nil)); got != goldenTraces {
		t.Errorf("traces hash to %s, want %s", got, goldenTraces)
	}
}

const goldenTraces = "84e1abd2aca8fe2e550c576b142bc7b565be6025f758177af7438efd252923bc"
