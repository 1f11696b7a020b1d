// Package sender makes one delivery attempt: a POST of the message's bytes
// with its signature headers, under a per-attempt timeout, classified into
// the delivery log's results (Alertmanager's notify/webhook and Retrier
// shape, with the hosted service's rule that any non-2xx fails).
//
//	success         any 2xx
//	http_error      any other status (3xx included: redirects are never followed)
//	timeout         no complete response within the attempt timeout
//	refused_target  the URL's address is loopback, private, link-local, ... (package guard)
//	network         DNS, connect, TLS or protocol failure
//
// Error texts never carry the URL's userinfo or query (they end up in the
// delivery log that the account reads, and in logs).
package sender

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/moraine-data/moraine/delivery/internal/sign"
	"github.com/moraine-data/moraine/pkg/accountdb"
	"github.com/moraine-data/moraine/pkg/guard"
)

// UserAgent is sent with every attempt.
const UserAgent = "moraine-webhooks/1"

// Config tunes the HTTP client.
type Config struct {
	// Timeout bounds one attempt, from dialling to the end of the response
	// headers and the drained body.
	Timeout time.Duration
	// AllowPrivateTargets lets attempts reach the ranges package guard
	// refuses (development and tests).
	AllowPrivateTargets bool
	// MaxIdlePerHost keeps this many idle connections per host.
	MaxIdlePerHost int
}

// Request is one attempt.
type Request struct {
	URL     *url.URL
	Body    []byte
	Headers sign.Headers
}

// Result is the outcome of an attempt.
type Result struct {
	// Outcome is one of the accountdb.Result* values, or Canceled.
	Outcome string
	// Status is the HTTP status, 0 without a response.
	Status  int
	Latency time.Duration
	// Err describes a failure, URLs redacted; nil on success.
	Err error
}

// Canceled is the Outcome of an attempt cut short because the caller's
// context ended (shutdown, lost partition): not a failure of the endpoint,
// and not recorded.
const Canceled = "canceled"

// OK reports whether the attempt succeeded.
func (r Result) OK() bool { return r.Outcome == accountdb.ResultSuccess }

// Sender sends attempts.
type Sender struct {
	cfg    Config
	client *http.Client
}

var errAttemptTimeout = errors.New("attempt timed out")

// New returns a sender.
func New(cfg Config) *Sender {
	if cfg.MaxIdlePerHost <= 0 {
		cfg.MaxIdlePerHost = 16
	}
	tr := &http.Transport{
		// Never a proxy from the environment: it would connect to the
		// target on our behalf, past the guard.
		Proxy:                 nil,
		DialContext:           guard.Dialer(cfg.AllowPrivateTargets, cfg.Timeout),
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          4096,
		MaxIdleConnsPerHost:   cfg.MaxIdlePerHost,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   cfg.Timeout,
		ExpectContinueTimeout: 0,
	}
	return &Sender{cfg: cfg, client: &http.Client{
		Transport: tr,
		// A redirect is a failed attempt: following it could lead
		// anywhere, and the hosted service expects a 2xx from the URL.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}}
}

// Close releases idle connections.
func (s *Sender) Close() { s.client.CloseIdleConnections() }

// Send makes one attempt.
func (s *Sender) Send(ctx context.Context, r Request) Result {
	start := time.Now()
	res := s.send(ctx, r)
	res.Latency = time.Since(start)
	return res
}

func (s *Sender) send(ctx context.Context, r Request) Result {
	if r.URL == nil {
		return Result{Outcome: accountdb.ResultNetwork, Err: errors.New("webhook url is not an absolute http(s) url")}
	}
	actx, cancel := context.WithTimeoutCause(ctx, s.cfg.Timeout, errAttemptTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(actx, http.MethodPost, r.URL.String(), bytes.NewReader(r.Body))
	if err != nil {
		return Result{Outcome: accountdb.ResultNetwork, Err: fmt.Errorf("build request for %s: %s", Redact(r.URL), redactErr(err, r.URL))}
	}
	h := req.Header
	h.Set("Content-Type", "application/json")
	h.Set("User-Agent", UserAgent)
	if r.Headers.Signature != "" {
		h.Set(sign.HeaderSignature, r.Headers.Signature)
	}
	h.Set(sign.HeaderWebhookID, r.Headers.WebhookID)
	h.Set(sign.HeaderWebhookTimestamp, r.Headers.WebhookTimestamp)
	if r.Headers.WebhookSignature != "" {
		h.Set(sign.HeaderWebhookSignature, r.Headers.WebhookSignature)
	}
	for name, v := range map[string]string{
		sign.HeaderSequence: r.Headers.Sequence, sign.HeaderMessageKind: r.Headers.MessageKind,
		sign.HeaderReplay: r.Headers.Replay, sign.HeaderStreamSignature: r.Headers.StreamSignature,
	} {
		if v != "" {
			h.Set(name, v)
		}
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return classify(ctx, actx, err, r.URL)
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		// Drain a little so the connection can be reused.
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
		return Result{Outcome: accountdb.ResultSuccess, Status: resp.StatusCode}
	}
	snippet, _ := io.ReadAll(io.LimitReader(resp.Body, 256))
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	msg := fmt.Sprintf("HTTP %d", resp.StatusCode)
	if s := cleanSnippet(snippet); s != "" {
		msg += ": " + s
	}
	if ctx.Err() != nil {
		return Result{Outcome: Canceled, Status: resp.StatusCode, Err: ctx.Err()}
	}
	return Result{Outcome: accountdb.ResultHTTPError, Status: resp.StatusCode, Err: errors.New(msg)}
}

func classify(parent, actx context.Context, err error, u *url.URL) Result {
	var refused *guard.RefusedError
	switch {
	case errors.As(err, &refused):
		return Result{Outcome: accountdb.ResultRefusedTarget, Err: refused}
	case parent.Err() != nil:
		return Result{Outcome: Canceled, Err: parent.Err()}
	case errors.Is(context.Cause(actx), errAttemptTimeout), isTimeout(err):
		return Result{Outcome: accountdb.ResultTimeout, Err: fmt.Errorf("no response within the attempt timeout: %s", redactErr(err, u))}
	}
	return Result{Outcome: accountdb.ResultNetwork, Err: errors.New(redactErr(err, u))}
}

func isTimeout(err error) bool {
	var t interface{ Timeout() bool }
	return errors.As(err, &t) && t.Timeout()
}

// Redact returns u without userinfo, query and fragment.
func Redact(u *url.URL) string {
	if u == nil {
		return ""
	}
	c := *u
	c.User, c.RawQuery, c.Fragment, c.RawFragment, c.ForceQuery = nil, "", "", "", false
	return c.String()
}

// redactErr is err's text with the request URL (as net/http prints it in a
// *url.Error) replaced by its redacted form.
func redactErr(err error, u *url.URL) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	text := err.Error()
	if u != nil {
		text = strings.ReplaceAll(text, u.String(), Redact(u))
		if u.RawQuery != "" {
			text = strings.ReplaceAll(text, u.RawQuery, "…")
		}
	}
	return text
}

// cleanSnippet keeps a response body excerpt printable and short.
func cleanSnippet(b []byte) string {
	if !utf8.Valid(b) {
		return ""
	}
	s := strings.Join(strings.Fields(string(b)), " ")
	if len(s) > 200 {
		n := 200
		for n > 0 && !utf8.RuneStart(s[n]) {
			n--
		}
		s = s[:n] + "…"
	}
	return s
}
