package obs

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestAdminMux(t *testing.T) {
	h := NewHealth()
	ready := errors.New("kafka: not reachable")
	h.Add("kafka", func(context.Context) error { return ready })
	srv := httptest.NewServer(AdminMux(NewRegistry("test"), h))
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
