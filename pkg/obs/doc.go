// Package obs is the observability every moraine service shares: the slog
// logger, the Prometheus registry, the readiness checks and the HTTP
// servers (the API's, with its connection limits, and the ops listener
// with /metrics, /healthz and /readyz).
//
// What stays with the caller: the service's own readiness checks and its
// metrics. Main, env-backed flags and GC tuning are package process.
package obs
