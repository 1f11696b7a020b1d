package obs

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// NewRegistry returns a registry with the Go and process collectors and a
// moraine_build_info gauge for service.
func NewRegistry(service string) *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Namespace: Namespace, Name: "build_info", Help: "Always 1; labels name the service.",
			ConstLabels: prometheus.Labels{"service": service},
		}, func() float64 { return 1 }),
	)
	return reg
}

// ReadyCheck reports nil when one dependency of the service is usable and
// caught up, or an error saying why not.
type ReadyCheck func(ctx context.Context) error

// Health tracks the named readiness checks of a service.
type Health struct {
	mu     sync.Mutex
	checks map[string]ReadyCheck
	order  []string
}

// NewHealth returns an empty set of checks: a service without checks is ready.
func NewHealth() *Health { return &Health{checks: map[string]ReadyCheck{}} }

// Add registers a readiness check under name.
func (h *Health) Add(name string, c ReadyCheck) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, ok := h.checks[name]; !ok {
		h.order = append(h.order, name)
	}
	h.checks[name] = c
}

// Check runs every check and returns the failures by name.
func (h *Health) Check(ctx context.Context) map[string]string {
	h.mu.Lock()
	names := append([]string(nil), h.order...)
	checks := make([]ReadyCheck, len(names))
	for i, n := range names {
		checks[i] = h.checks[n]
	}
	h.mu.Unlock()
	failed := map[string]string{}
	for i, c := range checks {
		if err := c(ctx); err != nil {
			failed[names[i]] = err.Error()
		}
	}
	return failed
}

// OpsConfig is the listen address of the ops server: /metrics, /healthz,
// /readyz and /debug/pprof/, for Prometheus, probes and operators. (The
// accounts administration of moraine-admin is something else.)
type OpsConfig struct {
	ListenAddress string
	// set: --ops.listen-address was given, so the deprecated name yields.
	set bool
}

// RegisterFlags adds --ops.listen-address with the service's default, and
// --admin.listen-address, its former name, as a deprecated alias that
// --ops.listen-address (or its environment variable) overrides.
func (c *OpsConfig) RegisterFlags(fs *flag.FlagSet, def string) {
	c.ListenAddress = def
	name, former := opsAddrFlag{c: c}, opsAddrFlag{c: c, deprecated: true}
	fs.Var(name, "ops.listen-address", "address of the ops server: /metrics, /healthz, /readyz and /debug/pprof/")
	fs.Var(former, "admin.listen-address", "deprecated: use --ops.listen-address")
}

// opsAddrFlag sets OpsConfig.ListenAddress under its name or the
// deprecated one.
type opsAddrFlag struct {
	c          *OpsConfig
	deprecated bool
}

func (f opsAddrFlag) String() string {
	if f.c == nil {
		return ""
	}
	return f.c.ListenAddress
}

func (f opsAddrFlag) Set(v string) error {
	if f.deprecated && f.c.set {
		return nil
	}
	f.c.ListenAddress, f.c.set = v, f.c.set || !f.deprecated
	return nil
}

// OpsMux returns a mux with /metrics, /healthz (alive), /readyz (every
// check passes; 503 with the failures otherwise) and the Go profiler under
// /debug/pprof/ (the ops address is loopback unless an operator says
// otherwise; profiles are how throughput work starts).
func OpsMux(reg *prometheus.Registry, h *Health) *http.ServeMux {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /debug/pprof/", pprof.Index)
	mux.HandleFunc("GET /debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("GET /debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("GET /debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("GET /debug/pprof/trace", pprof.Trace)
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"status":"ok"}`))
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), 3*time.Second)
		defer cancel()
		failed := h.Check(ctx)
		w.Header().Set("Content-Type", "application/json")
		if len(failed) > 0 {
			w.WriteHeader(http.StatusServiceUnavailable)
			_ = json.NewEncoder(w).Encode(map[string]any{"status": "not ready", "failed": failed})
			return
		}
		_, _ = w.Write([]byte(`{"status":"ready"}`))
	})
	return mux
}

// Server is an HTTP server that stops gracefully when its context ends.
type Server struct {
	srv    *http.Server
	ln     net.Listener
	logger *slog.Logger
}

// Listen binds addr (":0" picks a free port; see Addr).
func Listen(addr string, h http.Handler, logger *slog.Logger) (*Server, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	return &Server{
		srv:    &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second},
		ln:     ln,
		logger: logger,
	}, nil
}

// Addr is the bound address; "" on a nil Server, so that an address can be
// read before its server exists.
func (s *Server) Addr() string {
	if s == nil {
		return ""
	}
	return s.ln.Addr().String()
}

// Serve serves until ctx ends, then lets in-flight requests finish for up to
// shutdownTimeout.
func (s *Server) Serve(ctx context.Context, shutdownTimeout time.Duration) error {
	errc := make(chan error, 1)
	go func() { errc <- s.srv.Serve(s.ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownTimeout)
	defer cancel()
	err := s.srv.Shutdown(sctx)
	if e := <-errc; !errors.Is(e, http.ErrServerClosed) && err == nil {
		err = e
	}
	return err
}
