package shell

import (
	"bytes"
	"fmt"
	"sync"
)

// MaxOutput is the most a script may print on each of its standard output
// and standard error. Runners keep what a script prints in memory: a
// script that prints without end must not take the controller's memory
// with it, and none of kbisect's scripts (nor a benchmark whose results
// are read from its output) prints anywhere near this much.
const MaxOutput = 64 << 20

// OutputError is a script stopped because it printed more than Limit
// bytes on Stream ("stdout" or "stderr").
type OutputError struct {
	Stream string
	Limit  int
}

func (e *OutputError) Error() string {
	return fmt.Sprintf("the script printed more than %s on its %s and was stopped", sizeText(e.Limit), e.Stream)
}

// sizeText says a limit in MiB when it is whole ones, else in bytes.
func sizeText(n int) string {
	if n >= 1<<20 && n%(1<<20) == 0 {
		return fmt.Sprintf("%d MiB", n>>20)
	}
	return fmt.Sprintf("%d bytes", n)
}

// Capture keeps what a stream of a command printed, up to a limit: the
// first limit bytes are kept, the rest is read and dropped (so the
// command never blocks on a full pipe), and full is called once, when
// the limit is first passed, to stop the command. The copies of a command
// may still write into it after the command returned, hence the lock.
type Capture struct {
	mu     sync.Mutex
	buf    bytes.Buffer
	limit  int
	over   bool
	full   func()
	stream string
}

// NewCapture captures the stream named stream ("stdout", "stderr").
func NewCapture(stream string, limit int, full func()) *Capture {
	return &Capture{stream: stream, limit: limit, full: full}
}

func (c *Capture) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if room := c.limit - c.buf.Len(); len(p) > room {
		c.buf.Write(p[:max(room, 0)])
		if !c.over && c.full != nil {
			c.full()
		}
		c.over = true
		return len(p), nil
	}
	return c.buf.Write(p)
}

// Bytes returns a copy of what was kept so far.
func (c *Capture) Bytes() []byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]byte(nil), c.buf.Bytes()...)
}

// String is what was kept so far.
func (c *Capture) String() string { return string(c.Bytes()) }

// Overflow is the OutputError of the first of the captures that passed
// its limit (nil when none did).
func Overflow(cs ...*Capture) error {
	for _, c := range cs {
		c.mu.Lock()
		over := c.over
		c.mu.Unlock()
		if over {
			return &OutputError{Stream: c.stream, Limit: c.limit}
		}
	}
	return nil
}
