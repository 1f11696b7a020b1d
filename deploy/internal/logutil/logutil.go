// Package logutil builds the slog logger of the deploy binaries.
package logutil

import (
	"fmt"
	"io"
	"log/slog"
	"strings"
)

// ParseLevel parses debug, info, warn or error.
func ParseLevel(s string) (slog.Level, error) {
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(s)); err != nil {
		return 0, fmt.Errorf("--log.level %q: want debug, info, warn or error", s)
	}
	return lvl, nil
}

// NewHandler returns a text or json handler writing to w at level.
func NewHandler(w io.Writer, level slog.Level, format string) (slog.Handler, error) {
	opts := &slog.HandlerOptions{Level: level}
	switch strings.ToLower(format) {
	case "", "text":
		return slog.NewTextHandler(w, opts), nil
	case "json":
		return slog.NewJSONHandler(w, opts), nil
	}
	return nil, fmt.Errorf("--log.format %q: want text or json", format)
}

// New returns the logger of a service: level and format as given on the
// command line, every line tagged with service.
func New(w io.Writer, level, format, service string) (*slog.Logger, error) {
	lvl, err := ParseLevel(level)
	if err != nil {
		return nil, err
	}
	h, err := NewHandler(w, lvl, format)
	if err != nil {
		return nil, err
	}
	return slog.New(h).With("service", service), nil
}
