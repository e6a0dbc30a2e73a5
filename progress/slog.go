package progress

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync"
)

// LineHandler is a log/slog handler that writes each record as one line
// a person reads in a CI log: "15:04:05 message". Attributes are left to
// handlers that keep structure (slog.JSONHandler).
type LineHandler struct {
	mu *sync.Mutex
	w  io.Writer
}

// NewLineHandler writes to w.
func NewLineHandler(w io.Writer) *LineHandler { return &LineHandler{mu: &sync.Mutex{}, w: w} }

// Enabled takes every level from Info up.
func (h *LineHandler) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelInfo }

// Handle writes the record's time and message.
func (h *LineHandler) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	_, err := fmt.Fprintf(h.w, "%s %s\n", r.Time.Format("15:04:05"), r.Message)
	return err
}

// WithAttrs returns h: lines carry no attributes.
func (h *LineHandler) WithAttrs([]slog.Attr) slog.Handler { return h }

// WithGroup returns h.
func (h *LineHandler) WithGroup(string) slog.Handler { return h }
