package obs

import (
	"context"
	"errors"
	"flag"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestOpsMux(t *testing.T) {
	h := NewHealth()
	ready := errors.New("kafka: not reachable")
	h.Add("kafka", func(context.Context) error { return ready })
	srv := httptest.NewServer(OpsMux(NewRegistry("test"), h))
	defer srv.Close()
	get := func(path string) (int, string) {
		t.Helper()
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for _, c := range []struct {
		path, want string
		status     int
	}{
		{"/healthz", `{"status":"ok"}`, 200},
		{"/readyz", `"kafka":"kafka: not reachable"`, 503},
		{"/metrics", `moraine_build_info{service="test"} 1`, 200},
		{"/debug/pprof/", "goroutine", 200},
		{"/debug/pprof/heap?debug=1", "heap profile", 200},
	} {
		status, body := get(c.path)
		if status != c.status || !strings.Contains(body, c.want) {
			t.Errorf("GET %s = %d %.200q, want %d containing %q", c.path, status, body, c.status, c.want)
		}
	}
	ready = nil
	if status, body := get("/readyz"); status != 200 || body != `{"status":"ready"}` {
		t.Errorf("GET /readyz when ready = %d %s", status, body)
	}
}

// TestOpsListenAddressAlias: --admin.listen-address, the former name, still
// sets the address, and --ops.listen-address wins over it whatever the
// order.
func TestOpsListenAddressAlias(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{name: "default", want: "127.0.0.1:9100"},
		{name: "new name", args: []string{"--ops.listen-address=:1"}, want: ":1"},
		{name: "old name", args: []string{"--admin.listen-address=:2"}, want: ":2"},
		{name: "new after old", args: []string{"--admin.listen-address=:2", "--ops.listen-address=:1"}, want: ":1"},
		{name: "old after new", args: []string{"--ops.listen-address=:1", "--admin.listen-address=:2"}, want: ":1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var c OpsConfig
			fs := flag.NewFlagSet("test", flag.ContinueOnError)
			c.RegisterFlags(fs, "127.0.0.1:9100")
			if err := fs.Parse(tc.args); err != nil {
				t.Fatal(err)
			}
			if c.ListenAddress != tc.want {
				t.Fatalf("ListenAddress %q, want %q", c.ListenAddress, tc.want)
			}
		})
	}
}
