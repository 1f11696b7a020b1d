package process

import (
	"flag"
	"strings"
	"testing"

	"github.com/moraine-data/moraine/pkg/obs"
)

func TestParseWithEnv(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		env  map[string]string
		want string
	}{
		{name: "default", want: "def"},
		{name: "env fills an unset flag", env: map[string]string{"MORAINE_TESTONLY_BROKERS": "env:9092"}, want: "env:9092"},
		{name: "command line beats env", args: []string{"--testonly.brokers=cli:9092"}, env: map[string]string{"MORAINE_TESTONLY_BROKERS": "env:9092"}, want: "cli:9092"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			fs := flag.NewFlagSet("x", flag.ContinueOnError)
			v := fs.String("testonly.brokers", "def", "")
			if err := ParseWithEnv(fs, tc.args, "MORAINE"); err != nil {
				t.Fatal(err)
			}
			if *v != tc.want {
				t.Fatalf("got %q want %q", *v, tc.want)
			}
		})
	}
	if got := EnvName("MORAINE", "ops.listen-address"); got != "MORAINE_OPS_LISTEN_ADDRESS" {
		t.Fatalf("EnvName = %s", got)
	}
}

func TestParseWithEnvRejectsBadValue(t *testing.T) {
	t.Setenv("MORAINE_N", "notanumber")
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	fs.Int("n", 1, "")
	if err := ParseWithEnv(fs, nil, "MORAINE"); err == nil {
		t.Fatal("want an error naming MORAINE_N")
	}
}

// TestDeprecatedOpsVariable: MORAINE_ADMIN_LISTEN_ADDRESS, the former
// name's variable, still applies, but never over --ops.listen-address.
func TestDeprecatedOpsVariable(t *testing.T) {
	t.Setenv("MORAINE_ADMIN_LISTEN_ADDRESS", ":2")
	for args, want := range map[string]string{"": ":2", "--ops.listen-address=:1": ":1"} {
		var c obs.OpsConfig
		fs := flag.NewFlagSet("test", flag.ContinueOnError)
		c.RegisterFlags(fs, "127.0.0.1:9100")
		if err := ParseWithEnv(fs, strings.Fields(args), "MORAINE"); err != nil {
			t.Fatal(err)
		}
		if c.ListenAddress != want {
			t.Errorf("args %q: ListenAddress %q, want %q", args, c.ListenAddress, want)
		}
	}
}
