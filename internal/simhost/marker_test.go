package simhost

import (
	"testing"
	"time"
)

func TestTheNoiseLevelIsFoundWhereverTheStreamIsCut(t *testing.T) {
	image := []byte("\x7fELF....\x00" + NoiseMarker + "\x00KBISECT_SIM" + "\x00" + NoiseMarker + "1234\x00tail")
	for cut := 1; cut <= len(image); cut++ {
		var s levelScanner
		for i := 0; i < len(image); i += cut {
			_, _ = s.Write(image[i:min(i+cut, len(image))])
		}
		if l, ok := s.level(); !ok || l != 1234*time.Microsecond {
			t.Errorf("pieces of %d bytes: %v %v", cut, l, ok)
		}
	}
	var s levelScanner
	_, _ = s.Write([]byte("ends with " + NoiseMarker + "7"))
	if l, ok := s.level(); !ok || l != 7*time.Microsecond {
		t.Errorf("a number at the end of the stream: %v %v", l, ok)
	}
	var none levelScanner
	_, _ = none.Write([]byte("an image without a level " + NoiseMarker))
	if l, ok := none.level(); ok {
		t.Errorf("found %v in an image without one", l)
	}
}
