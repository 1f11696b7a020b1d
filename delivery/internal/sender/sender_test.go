package sender

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/moraine-data/moraine/delivery/internal/sign"
	"github.com/moraine-data/moraine/pkg/accountdb"
)

func TestSendClassifiesResponses(t *testing.T) {
	var (
		mu        sync.Mutex
		gotHeader http.Header
		gotBody   string
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		gotHeader, gotBody = r.Header.Clone(), string(b)
		mu.Unlock()
		switch r.URL.Path {
		case "/hang":
			<-r.Context().Done()
			return
		case "/redirect":
			http.Redirect(w, r, "http://169.254.169.254/latest/meta-data", http.StatusFound)
			return
		}
		var code int
		for _, c := range strings.TrimPrefix(r.URL.Path, "/") {
			code = code*10 + int(c-'0')
		}
		w.WriteHeader(code)
		_, _ = w.Write([]byte("  upstream\n says   no  "))
	}))
	defer srv.Close()
	s := New(Config{Timeout: 300 * time.Millisecond, AllowPrivateTargets: true})
	defer s.Close()
	hdr := sign.Headers{Signature: "c2ln", WebhookID: "m-1", WebhookTimestamp: "1700000000", WebhookSignature: "v1,c2ln", Sequence: "12", MessageKind: "retraction", StreamSignature: "v1,c3Ry"}
	for _, tc := range []struct {
		name    string
		path    string
		outcome string
		status  int
		errHas  string
	}{
		{name: "200", path: "/200", outcome: accountdb.ResultSuccess, status: 200},
		{name: "201", path: "/201", outcome: accountdb.ResultSuccess, status: 201},
		{name: "204", path: "/204", outcome: accountdb.ResultSuccess, status: 204},
		{name: "299 is still 2xx", path: "/299", outcome: accountdb.ResultSuccess, status: 299},
		{name: "a redirect is not followed and fails", path: "/redirect", outcome: accountdb.ResultHTTPError, status: 302, errHas: "HTTP 302"},
		{name: "4xx", path: "/404", outcome: accountdb.ResultHTTPError, status: 404, errHas: "HTTP 404: upstream says no"},
		{name: "429", path: "/429", outcome: accountdb.ResultHTTPError, status: 429},
		{name: "5xx", path: "/503", outcome: accountdb.ResultHTTPError, status: 503, errHas: "HTTP 503"},
		{name: "timeout", path: "/hang", outcome: accountdb.ResultTimeout, errHas: "attempt timeout"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u, _ := url.Parse(srv.URL + tc.path + "?token=secret-token")
			u.User = url.UserPassword("user", "pw")
			start := time.Now()
			res := s.Send(context.Background(), Request{URL: u, Body: []byte(`{"a":1}`), Headers: hdr})
			require.Equal(t, tc.outcome, res.Outcome, "err %v", res.Err)
			require.Equal(t, tc.status, res.Status)
			if tc.errHas != "" {
				require.ErrorContains(t, res.Err, tc.errHas)
			}
			if res.Err != nil {
				require.NotContains(t, res.Err.Error(), "secret-token")
				require.NotContains(t, res.Err.Error(), "pw@")
			}
			require.Less(t, time.Since(start), 2*time.Second)
			mu.Lock()
			defer mu.Unlock()
			require.Equal(t, `{"a":1}`, gotBody)
			require.Equal(t, "application/json", gotHeader.Get("Content-Type"))
			require.Equal(t, "c2ln", gotHeader.Get("x-signature"))
			require.Equal(t, "m-1", gotHeader.Get("webhook-id"))
			require.Equal(t, "1700000000", gotHeader.Get("webhook-timestamp"))
			require.Equal(t, "v1,c2ln", gotHeader.Get("webhook-signature"))
			require.Equal(t, "12", gotHeader.Get("moraine-sequence"))
			require.Equal(t, "retraction", gotHeader.Get("moraine-message-kind"))
			require.Equal(t, "v1,c3Ry", gotHeader.Get("moraine-signature"))
			require.Empty(t, gotHeader.Values("moraine-replay"), "no replay header on a live message")
		})
	}
}

// TestSendRefusesPrivateTargets: without the operator's flag, a loopback
// URL is refused before any connection (the guard runs at dial time).
func TestSendRefusesPrivateTargets(t *testing.T) {
	hit := false
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { hit = true }))
	defer srv.Close()
	for _, raw := range []string{srv.URL, strings.Replace(srv.URL, "127.0.0.1", "localhost", 1)} {
		u, _ := url.Parse(raw)
		res := New(Config{Timeout: time.Second}).Send(context.Background(), Request{URL: u, Body: []byte("{}")})
		require.Equal(t, accountdb.ResultRefusedTarget, res.Outcome, "%s: %v", raw, res.Err)
	}
	require.False(t, hit)
	u, _ := url.Parse(srv.URL)
	res := New(Config{Timeout: time.Second, AllowPrivateTargets: true}).Send(context.Background(), Request{URL: u, Body: []byte("{}")})
	require.Equal(t, accountdb.ResultSuccess, res.Outcome)
	require.True(t, hit)
}

func TestSendCanceledIsNotAFailure(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) { <-r.Context().Done() }))
	defer srv.Close()
	u, _ := url.Parse(srv.URL)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	res := New(Config{Timeout: 5 * time.Second, AllowPrivateTargets: true}).Send(ctx, Request{URL: u})
	require.Equal(t, Canceled, res.Outcome)
}

func TestRedact(t *testing.T) {
	u, _ := url.Parse("https://user:pw@example.com:8443/hook/abc?token=x#frag")
	require.Equal(t, "https://example.com:8443/hook/abc", Redact(u))
}
