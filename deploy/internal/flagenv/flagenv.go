// Package flagenv fills command-line flags that were not given on the command
// line from environment variables.
//
// A flag named "rpc.listen-address" is read from MORAINE_RPC_LISTEN_ADDRESS
// (prefix + upper-case name, with '.' and '-' replaced by '_').
package flagenv

import (
	"flag"
	"fmt"
	"os"
	"strings"
)

// Prefix is the prefix of every moraine environment variable.
const Prefix = "MORAINE_"

// EnvName returns the environment variable that backs the flag name.
func EnvName(prefix, name string) string {
	return prefix + strings.NewReplacer(".", "_", "-", "_").Replace(strings.ToUpper(name))
}

// Apply sets every flag of fs that was not set on the command line (fs must be
// parsed already) from its environment variable, if that variable is set.
func Apply(fs *flag.FlagSet, prefix string) error {
	return apply(fs, prefix, os.LookupEnv)
}

func apply(fs *flag.FlagSet, prefix string, lookup func(string) (string, bool)) error {
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	var err error
	fs.VisitAll(func(f *flag.Flag) {
		if err != nil || given[f.Name] {
			return
		}
		env := EnvName(prefix, f.Name)
		if v, ok := lookup(env); ok {
			if e := fs.Set(f.Name, v); e != nil {
				err = fmt.Errorf("environment variable %s: %w", env, e)
			}
		}
	})
	return err
}

// Parse parses args into fs and then applies the environment (see Apply).
func Parse(fs *flag.FlagSet, args []string, prefix string) error {
	if err := fs.Parse(args); err != nil {
		return err
	}
	return Apply(fs, prefix)
}

// Usage adds the environment variable names to fs's usage text.
func Usage(fs *flag.FlagSet, prefix string) {
	fs.Usage = func() {
		out := fs.Output()
		fmt.Fprintf(out, "Usage of %s:\n", fs.Name())
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
}
