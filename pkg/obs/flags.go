// Package obs is the plumbing every moraine service shares: flags with an
// environment fallback, the slog logger, the Prometheus registry and the
// admin HTTP server with /metrics, /healthz and /readyz.
//
// What stays with the caller: the service's own flags, its readiness checks
// and its metrics.
package obs

import (
	"flag"
	"fmt"
	"os"
	"strings"
)

// EnvName is the environment variable that backs a flag: MORAINE_ + the flag
// name upper-cased with "." and "-" turned into "_" (kafka.brokers ->
// MORAINE_KAFKA_BROKERS).
func EnvName(prefix, flagName string) string {
	r := strings.NewReplacer(".", "_", "-", "_")
	return prefix + "_" + strings.ToUpper(r.Replace(flagName))
}

// ParseWithEnv parses args into fs; every flag not given on the command line
// falls back to its environment variable when that is set.
func ParseWithEnv(fs *flag.FlagSet, args []string, prefix string) error {
	if err := fs.Parse(args); err != nil {
		return err
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	var err error
	fs.VisitAll(func(f *flag.Flag) {
		if set[f.Name] || err != nil {
			return
		}
		if v, ok := os.LookupEnv(EnvName(prefix, f.Name)); ok {
			if e := fs.Set(f.Name, v); e != nil {
				err = fmt.Errorf("%s=%q: %w", EnvName(prefix, f.Name), v, e)
			}
		}
	})
	return err
}
