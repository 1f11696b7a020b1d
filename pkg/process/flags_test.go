package process

import (
	"flag"
	"testing"
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
	if got := EnvName("MORAINE", "admin.listen-address"); got != "MORAINE_ADMIN_LISTEN_ADDRESS" {
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
