package obs

import (
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"syscall"
	"time"
)

// HTTPConfig bounds what one client can hold of a public HTTP server: how
// long it may take to send a request, to read the answer, and to keep an
// idle connection, and how many connections the server holds at once.
// Without them a client that announces a body and never sends it, or opens
// connections and stays silent, keeps a goroutine and a file descriptor for
// ever; a few hundred such sockets exhaust the process.
type HTTPConfig struct {
	// ReadHeaderTimeout: the request line and headers.
	ReadHeaderTimeout time.Duration
	// ReadTimeout: the whole request, body included, from the first byte.
	// A body that has not arrived by then is cut off: the handler's read
	// fails (webhooks answer 408), and an unread body is no longer waited
	// for before the answer is written (net/http drains it first).
	ReadTimeout time.Duration
	// WriteTimeout: from the end of the request headers to the end of the
	// answer (handler time included).
	WriteTimeout time.Duration
	// IdleTimeout: a keep-alive connection waiting for its next request.
	IdleTimeout time.Duration
	// MaxHeaderBytes caps the request line and headers (431 beyond).
	MaxHeaderBytes int
	// MaxConnections caps open connections (0: no cap). Beyond it new
	// connections wait in the kernel's accept queue: keep it under the
	// process's open-file limit so a flood of sockets cannot starve the
	// server's own connections (ClickHouse, Kafka).
	MaxConnections int
	// ErrorBody, when set (not a flag: the service sets it), renders the
	// answers net/http writes by itself, below every handler, in the
	// service's error shape instead of Go's plain text (protocolErrors):
	// 431 when the request line and headers exceed MaxHeaderBytes, 414 when
	// the request line alone does, 400 for a malformed request, 501 and
	// 505. message is a sentence saying what was wrong.
	ErrorBody func(status int, message string) (contentType string, body []byte)
}

// DefaultHTTPConfig mirrors the flag defaults.
func DefaultHTTPConfig() HTTPConfig {
	return HTTPConfig{
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      60 * time.Second,
		IdleTimeout:       60 * time.Second,
		MaxHeaderBytes:    64 << 10,
		MaxConnections:    8192,
	}
}

// RegisterFlags adds the --http.* limits.
func (c *HTTPConfig) RegisterFlags(fs *flag.FlagSet) {
	d := DefaultHTTPConfig()
	fs.DurationVar(&c.ReadHeaderTimeout, "http.read-header-timeout", d.ReadHeaderTimeout, "longest time a client may take to send a request's line and headers")
	fs.DurationVar(&c.ReadTimeout, "http.read-timeout", d.ReadTimeout, "longest time a client may take to send a whole request, body included (a body not received by then is cut off: 408 on the webhook routes)")
	fs.DurationVar(&c.WriteTimeout, "http.write-timeout", d.WriteTimeout, "longest time from the end of a request's headers to the end of its answer")
	fs.DurationVar(&c.IdleTimeout, "http.idle-timeout", d.IdleTimeout, "how long an idle keep-alive connection stays open")
	fs.IntVar(&c.MaxHeaderBytes, "http.max-header-bytes", d.MaxHeaderBytes, "largest request line and headers (431 beyond)")
	fs.IntVar(&c.MaxConnections, "http.max-connections", d.MaxConnections, "most open client connections; further ones wait to be accepted (0: no cap; keep it under the open-file limit)")
}

// Validate checks the values.
func (c HTTPConfig) Validate() error {
	var errs []error
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"read-header-timeout", c.ReadHeaderTimeout}, {"read-timeout", c.ReadTimeout}, {"write-timeout", c.WriteTimeout}, {"idle-timeout", c.IdleTimeout}} {
		if d.v <= 0 {
			errs = append(errs, fmt.Errorf("obs: --http.%s must be positive", d.name))
		}
	}
	if c.ReadHeaderTimeout > c.ReadTimeout {
		errs = append(errs, errors.New("obs: --http.read-header-timeout must not exceed --http.read-timeout"))
	}
	if c.MaxHeaderBytes < 4096 {
		errs = append(errs, errors.New("obs: --http.max-header-bytes must be at least 4096"))
	}
	if c.MaxConnections < 0 {
		errs = append(errs, errors.New("obs: --http.max-connections must not be negative"))
	}
	return errors.Join(errs...)
}

// ListenHTTP binds addr for a public server with the limits of cfg (":0"
// picks a free port; see Addr). Listen is the ops servers' variant.
func ListenHTTP(addr string, h http.Handler, logger *slog.Logger, cfg HTTPConfig) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	if cfg.MaxConnections > 0 {
		var lim syscall.Rlimit
		if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err == nil && lim.Cur < uint64(cfg.MaxConnections)+256 {
			logger.Warn("--http.max-connections is close to or above the open-file limit: a flood of connections can leave none for ClickHouse and Kafka",
				"max_connections", cfg.MaxConnections, "open_file_limit", lim.Cur)
		}
		ln = limitListener(ln, cfg.MaxConnections)
	}
	if cfg.ErrorBody != nil {
		ln = protocolErrors(ln, cfg.MaxHeaderBytes, cfg.ErrorBody)
	}
	return &Server{
		srv: &http.Server{
			Handler:           h,
			ReadHeaderTimeout: cfg.ReadHeaderTimeout,
			ReadTimeout:       cfg.ReadTimeout,
			WriteTimeout:      cfg.WriteTimeout,
			IdleTimeout:       cfg.IdleTimeout,
			MaxHeaderBytes:    cfg.MaxHeaderBytes,
		},
		ln:     ln,
		logger: logger,
	}, nil
}

// limitListener accepts at most n connections at once; Accept waits for a
// slot. (golang.org/x/net/netutil.LimitListener does the same; it is not a
// dependency of every service that imports this package, and this is all
// of it that is needed.)
func limitListener(ln net.Listener, n int) net.Listener {
	return &limitedListener{Listener: ln, slots: make(chan struct{}, n), done: make(chan struct{})}
}

type limitedListener struct {
	net.Listener
	slots     chan struct{}
	done      chan struct{}
	closeOnce sync.Once
}

func (l *limitedListener) Accept() (net.Conn, error) {
	select {
	case l.slots <- struct{}{}:
	case <-l.done:
		return nil, net.ErrClosed
	}
	c, err := l.Listener.Accept()
	if err != nil {
		<-l.slots
		return nil, err
	}
	return &limitedConn{Conn: c, release: func() { <-l.slots }}, nil
}

func (l *limitedListener) Close() error {
	l.closeOnce.Do(func() { close(l.done) })
	return l.Listener.Close()
}

type limitedConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *limitedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}
