package process

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
// falls back to its environment variable when that is set. -help lists each
// flag with its variable.
func ParseWithEnv(fs *flag.FlagSet, args []string, prefix string) error {
	fs.Usage = func() { usageWithEnv(fs, prefix) }
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

// usageWithEnv prints every flag with its environment variable and default.
func usageWithEnv(fs *flag.FlagSet, prefix string) {
	out := fs.Output()
	fmt.Fprintf(out, "Usage of %s (flags fall back to %s_* environment variables):\n", fs.Name(), prefix)
	fs.VisitAll(func(f *flag.Flag) {
		name, usage := flag.UnquoteUsage(f)
		fmt.Fprintf(out, "  --%s", f.Name)
		if name != "" {
			fmt.Fprintf(out, " %s", name)
		}
		fmt.Fprintf(out, "\n    \t%s (env %s", usage, EnvName(prefix, f.Name))
		if f.DefValue != "" {
			fmt.Fprintf(out, ", default %q", f.DefValue)
		}
		fmt.Fprintln(out, ")")
	})
}

// SplitList reads a comma-separated list flag (--kafka.brokers,
// --clickhouse.addr, ...): its items with surrounding spaces trimmed, empty
// ones dropped, so "a, b," and "a,b" mean the same.
func SplitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}
