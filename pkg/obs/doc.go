// Package obs is the observability every moraine service shares: the slog
// logger, the Prometheus registry and the one way to declare series on it
// (Metrics, which names them moraine_<subsystem>_<name>), the readiness
// checks and the HTTP servers (the API's, with its connection limits, and
// the ops listener with /metrics, /healthz and /readyz).
//
// What stays with the caller: the service's own readiness checks and which
// series it declares. Main, env-backed flags and GC tuning are package
// process.
package obs
