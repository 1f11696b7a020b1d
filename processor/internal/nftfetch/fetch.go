package nftfetch

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/moraine-data/moraine/pkg/guard"
	"github.com/moraine-data/moraine/pkg/iox"
	"github.com/moraine-data/moraine/pkg/nftmeta"
)

// UserAgent is sent with every fetch.
const UserAgent = "moraine-nft-metadata/1"

// Config bounds the fetcher.
type Config struct {
	// MaxBytes bounds a document (decompressed).
	MaxBytes int
	// Timeout bounds one fetch: connecting, every redirect, headers and body.
	Timeout time.Duration
	// PerHost is the number of concurrent fetches per host; MaxInFlight in all.
	PerHost     int
	MaxInFlight int
	// HostQueueTimeout is how long a fetch waits for a slot of its host
	// before it is deferred (Result.Deferred).
	HostQueueTimeout time.Duration
	// MaxRedirects bounds the redirects followed.
	MaxRedirects int
	// IPFSGateway is the gateway ipfs:// URIs are fetched from (a URL
	// ending in /ipfs/ or another prefix to which CID/path is appended).
	IPFSGateway string
	// AllowPrivateTargets lets fetches reach the addresses package guard
	// refuses (development and tests).
	AllowPrivateTargets bool
}

// RegisterFlags adds the fetcher's --nft.* flags.
func (c *Config) RegisterFlags(fs *flag.FlagSet) {
	fs.IntVar(&c.MaxBytes, "nft.max-document-bytes", 1<<20, "largest NFT metadata document fetched (larger: METADATA_CONTENT_TOO_LARGE)")
	fs.DurationVar(&c.Timeout, "nft.fetch-timeout", 10*time.Second, "deadline of one metadata fetch (connect, redirects, headers, body)")
	fs.IntVar(&c.PerHost, "nft.max-per-host", 4, "concurrent metadata fetches per host (the IPFS gateway is one host)")
	fs.IntVar(&c.MaxInFlight, "nft.max-in-flight", 64, "concurrent metadata fetches in all")
	fs.DurationVar(&c.HostQueueTimeout, "nft.host-queue-timeout", 5*time.Second,
		"how long a fetch waits for a slot of its busy host before it is parked on the first retry level (no attempt spent)")
	fs.IntVar(&c.MaxRedirects, "nft.max-redirects", 5, "HTTP redirects followed per metadata fetch (each hop under the SSRF policy)")
	fs.StringVar(&c.IPFSGateway, "nft.ipfs-gateway", "https://ipfs.io/ipfs/", "IPFS gateway that ipfs://CID/path token URIs are fetched from (CID/path is appended); trusted: dialled without the SSRF policy for those URIs (it may be a node on a private address)")
	fs.BoolVar(&c.AllowPrivateTargets, "nft.allow-private-targets", false,
		"let metadata fetches reach loopback, private, link-local (cloud metadata), CGNAT and other internal addresses, as --delivery.allow-private-targets does for webhooks (development only)")
}

// Validate checks the values.
func (c Config) Validate() error {
	var errs []error
	if c.MaxBytes <= 0 || c.Timeout <= 0 || c.PerHost <= 0 || c.MaxInFlight <= 0 || c.HostQueueTimeout <= 0 || c.MaxRedirects < 0 {
		errs = append(errs, errors.New("nftfetch: --nft.max-document-bytes, --nft.fetch-timeout, --nft.max-per-host, --nft.max-in-flight and --nft.host-queue-timeout must be positive, --nft.max-redirects not negative"))
	}
	if u, err := url.Parse(c.IPFSGateway); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		errs = append(errs, fmt.Errorf("nftfetch: --nft.ipfs-gateway %q must be an http(s) URL", c.IPFSGateway))
	}
	return errors.Join(errs...)
}

// Result is the outcome of one fetch.
type Result struct {
	// Status is one of the nftmeta.Status* values this package sets.
	Status string
	// Doc holds the document's fields when Status is INDEXED.
	Doc Document
	// Retry marks a transient failure (THROTTLED_TOKEN_URI, and
	// UNREACHABLE_TOKEN_URI without an answer or with a 5xx/408).
	Retry bool
	// Deferred: the host was busy beyond HostQueueTimeout and nothing was
	// fetched; Status is empty.
	Deferred bool
	// Scheme is http, https, ipfs, data or other (a bounded metric label).
	Scheme string
	// HTTPStatus is the last answer's status (0: none).
	HTTPStatus int
	// Detail says what happened, for operators (URLs without query or
	// userinfo); empty on success.
	Detail string
}

// Fetcher fetches metadata documents. It is safe for concurrent use.
type Fetcher struct {
	cfg     Config
	gateway *url.URL
	// client fetches http(s) token URIs, every connection under the
	// policy; gatewayClient fetches ipfs:// ones, dialling the gateway
	// itself without it (and anything it redirects to with it).
	client, gatewayClient *http.Client
	lim                   *limiter
	policy                guard.Policy
}

// New returns a fetcher; resolver, when set, replaces the system's for the
// policy's checks of host names (tests).
func New(cfg Config, resolver guard.Resolver) (*Fetcher, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	gw, _ := url.Parse(cfg.IPFSGateway)
	if !strings.HasSuffix(gw.Path, "/") {
		gw.Path += "/"
	}
	f := &Fetcher{cfg: cfg, gateway: gw, lim: newLimiter(cfg.MaxInFlight, cfg.PerHost),
		policy: guard.Policy{AllowPrivate: cfg.AllowPrivateTargets, Resolver: resolver}}
	guarded := guard.Dialer(cfg.AllowPrivateTargets, cfg.Timeout)
	trusted := (&net.Dialer{Timeout: cfg.Timeout, KeepAlive: 30 * time.Second}).DialContext
	gwAddr := hostPort(gw)
	transport := func(dial func(ctx context.Context, network, addr string) (net.Conn, error)) *http.Transport {
		return &http.Transport{
			// Never a proxy from the environment: it would connect to the
			// target on our behalf, past the guard.
			Proxy:                 nil,
			DialContext:           dial,
			ForceAttemptHTTP2:     true,
			MaxIdleConns:          1024,
			MaxIdleConnsPerHost:   cfg.PerHost,
			IdleConnTimeout:       90 * time.Second,
			TLSHandshakeTimeout:   cfg.Timeout,
			ResponseHeaderTimeout: cfg.Timeout,
		}
	}
	f.client = &http.Client{Transport: transport(guarded), CheckRedirect: f.checkRedirect(false)}
	f.gatewayClient = &http.Client{Transport: transport(func(ctx context.Context, network, addr string) (net.Conn, error) {
		if addr == gwAddr {
			return trusted(ctx, network, addr)
		}
		return guarded(ctx, network, addr)
	}), CheckRedirect: f.checkRedirect(true)}
	return f, nil
}

// Close releases idle connections.
func (f *Fetcher) Close() {
	f.client.CloseIdleConnections()
	f.gatewayClient.CloseIdleConnections()
}

// hostPort is u's host:port with the scheme's default port, as the
// transport dials it.
func hostPort(u *url.URL) string {
	port := u.Port()
	if port == "" {
		port = "80"
		if strings.EqualFold(u.Scheme, "https") {
			port = "443"
		}
	}
	return net.JoinHostPort(u.Hostname(), port)
}

// errRefused wraps a policy refusal found before dialling.
type errRefused struct{ msg string }

func (e *errRefused) Error() string { return e.msg }

// errRedirect is a redirect not followed (too many, or not to http(s)).
type errRedirect struct{ msg string }

func (e *errRedirect) Error() string { return e.msg }

// checkRedirect is the redirect policy of the client for http(s) URIs
// (gateway false) or of the one for ipfs:// URIs, whose gateway may
// redirect to itself.
func (f *Fetcher) checkRedirect(gateway bool) func(req *http.Request, via []*http.Request) error {
	return func(req *http.Request, via []*http.Request) error {
		if len(via) > f.cfg.MaxRedirects {
			return &errRedirect{fmt.Sprintf("more than %d redirects", f.cfg.MaxRedirects)}
		}
		if s := req.URL.Scheme; s != "http" && s != "https" {
			return &errRedirect{fmt.Sprintf("redirect to a %s: URL", s)}
		}
		return f.check(req.Context(), req.URL, gateway)
	}
}

// check applies the policy's accept-time checks (names, resolution) to a
// host, unless it is the gateway an ipfs:// URI is fetched from.
func (f *Fetcher) check(ctx context.Context, u *url.URL, gateway bool) error {
	if f.cfg.AllowPrivateTargets || gateway && hostPort(u) == hostPort(f.gateway) {
		return nil
	}
	if err := guard.CheckURL(ctx, u.String(), f.policy); err != nil {
		var ue *guard.URLError
		if errors.As(err, &ue) && !ue.Temporary && !strings.Contains(ue.Message, "does not resolve") {
			return &errRefused{strings.Replace(ue.Message, "webhook URLs", "metadata URLs", 1)}
		}
		return err
	}
	return nil
}

// Fetch resolves uri (ERC-1155 {id} substituted with id when standard is
// 1155 or 0) and fetches its document.
func (f *Fetcher) Fetch(ctx context.Context, uri string, id *big.Int, standard uint16) Result {
	if standard != 721 {
		uri = SubstituteID(uri, id)
	}
	loc, fail := f.resolve(uri)
	if fail != nil {
		return Result{Status: fail.status, Detail: fail.detail, Scheme: "other"}
	}
	if loc.inline != nil || loc.url == nil {
		doc, status, detail := parseDocument(loc.inline)
		return Result{Status: status, Doc: doc, Detail: detail, Scheme: loc.scheme}
	}
	res := f.get(ctx, loc.url, loc.scheme == "ipfs")
	res.Scheme = loc.scheme
	return res
}

func (f *Fetcher) get(ctx context.Context, u *url.URL, gateway bool) Result {
	release, err := f.lim.acquire(ctx, hostPort(u), f.cfg.HostQueueTimeout)
	if errors.Is(err, errBusy) {
		return Result{Deferred: true, Detail: "host " + u.Host + " busy"}
	}
	if err != nil {
		return Result{Status: nftmeta.StatusUnreachableTokenURI, Retry: true, Detail: err.Error()}
	}
	defer release()
	ctx, cancel := context.WithTimeout(ctx, f.cfg.Timeout)
	defer cancel()
	unreachable := func(retry bool, status int, format string, args ...any) Result {
		return Result{Status: nftmeta.StatusUnreachableTokenURI, Retry: retry, HTTPStatus: status, Detail: fmt.Sprintf(format, args...)}
	}
	if err := f.check(ctx, u, gateway); err != nil {
		var refused *errRefused
		if errors.As(err, &refused) {
			return unreachable(false, 0, "refused target: %s", refused.msg)
		}
		return unreachable(true, 0, "%s: %s", redact(u), err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return Result{Status: nftmeta.StatusInvalidTokenURI, Detail: err.Error()}
	}
	req.Header.Set("User-Agent", UserAgent)
	req.Header.Set("Accept", "application/json, */*;q=0.5")
	client := f.client
	if gateway {
		client = f.gatewayClient
	}
	resp, err := client.Do(req)
	if err != nil {
		var (
			refused      *errRefused
			guardRefused *guard.RefusedError
			redirect     *errRedirect
		)
		switch {
		case errors.As(err, &refused):
			return unreachable(false, 0, "redirect to a refused target: %s", refused.msg)
		case errors.As(err, &guardRefused):
			return unreachable(false, 0, "refused target: %s", guardRefused)
		case errors.As(err, &redirect):
			return unreachable(false, 0, "%s: %s", redact(u), redirect.msg)
		}
		return unreachable(true, 0, "%s: %s", redact(u), redactErr(err))
	}
	defer resp.Body.Close()
	switch code := resp.StatusCode; {
	case code == http.StatusTooManyRequests:
		return Result{Status: nftmeta.StatusThrottledTokenURI, Retry: true, HTTPStatus: code, Detail: "HTTP 429 from " + redact(resp.Request.URL)}
	case code >= 500 || code == http.StatusRequestTimeout:
		return unreachable(true, code, "HTTP %d from %s", code, redact(resp.Request.URL))
	case code < 200 || code > 299:
		return unreachable(false, code, "HTTP %d from %s", code, redact(resp.Request.URL))
	}
	if resp.ContentLength > int64(f.cfg.MaxBytes) {
		return Result{Status: nftmeta.StatusMetadataContentTooLarge, HTTPStatus: resp.StatusCode,
			Detail: fmt.Sprintf("Content-Length %d over %d", resp.ContentLength, f.cfg.MaxBytes)}
	}
	body, err := iox.ReadAll(resp.Body, int(max(resp.ContentLength, 0)), f.cfg.MaxBytes)
	switch {
	case errors.Is(err, iox.ErrTooLarge):
		return Result{Status: nftmeta.StatusMetadataContentTooLarge, HTTPStatus: resp.StatusCode, Detail: fmt.Sprintf("document over %d bytes", f.cfg.MaxBytes)}
	case err != nil:
		return unreachable(true, resp.StatusCode, "reading the document from %s: %s", redact(resp.Request.URL), redactErr(err))
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4<<10))
	doc, status, detail := parseDocument(body)
	return Result{Status: status, Doc: doc, HTTPStatus: resp.StatusCode, Detail: detail}
}

// redact keeps scheme, host and path: queries and userinfo may carry keys.
func redact(u *url.URL) string {
	c := *u
	c.User, c.RawQuery, c.Fragment = nil, "", ""
	return c.String()
}

// redactErr keeps the cause of a client error without its URL.
func redactErr(err error) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err.Error()
	}
	return err.Error()
}
