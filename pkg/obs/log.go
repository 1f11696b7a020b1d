package obs

import (
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strings"
)

// LogConfig selects the log level and format.
type LogConfig struct {
	Level  string
	Format string
}

// RegisterFlags adds --log.level and --log.format.
func (c *LogConfig) RegisterFlags(fs *flag.FlagSet) {
	fs.StringVar(&c.Level, "log.level", "info", "log level: debug, info, warn, error")
	fs.StringVar(&c.Format, "log.format", "text", "log format: text (local) or json (clusters)")
}

// NewLogger builds the service's one logger.
func NewLogger(c LogConfig, w io.Writer, service string) (*slog.Logger, error) {
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(c.Level)); err != nil {
		return nil, fmt.Errorf("--log.level %q: %w", c.Level, err)
	}
	opts := &slog.HandlerOptions{Level: lvl}
	var h slog.Handler
	switch strings.ToLower(c.Format) {
	case "text", "":
		h = slog.NewTextHandler(w, opts)
	case "json":
		h = slog.NewJSONHandler(w, opts)
	default:
		return nil, fmt.Errorf("--log.format %q: want text or json", c.Format)
	}
	return slog.New(h).With("service", service), nil
}
