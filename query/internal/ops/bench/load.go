package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// LoadConfig is one load run.
type LoadConfig struct {
	// BaseURL of the query service, e.g. http://127.0.0.1:8080.
	BaseURL string
	// Paths are requested round-robin. "{rand:LO:HI}" in a path is replaced
	// by a uniform random integer in [LO, HI] per request (HI may be
	// "head", the newest block of HeadChain, a chain being written to),
	// "{addr:LO:HI}" and "{txhash:LO:HI}" by the seeded history's address or
	// transaction hash with such an id (SeedHistory).
	Paths []string
	// HeadChain is the chain whose newest block "{rand:LO:head}" reads: the
	// load asks the service for it every second (GET
	// /v1/chains/{HeadChain}/blocks?pageSize=1) and starts once it is known.
	HeadChain string
	// Report, when positive, writes a line of the statistics of each
	// interval of that length to ReportTo while the load runs.
	Report   time.Duration
	ReportTo io.Writer
	// Rate is the request rate (per second), held open-loop: requests are
	// scheduled by the clock, not by the previous answer, so latency is
	// not hidden by back-pressure (coordinated omission).
	Rate float64
	// Duration of the run.
	Duration time.Duration
	// Concurrency caps the requests in flight; a request whose slot is
	// not free at its scheduled time counts as dropped.
	Concurrency int
	// Timeout per request.
	Timeout time.Duration
	// AllowRemote permits a non-loopback target.
	AllowRemote bool
	// Header is sent with every request (an API key, say).
	Header http.Header
}

// Stats summarises the requests of one path (or of all).
type Stats struct {
	Path               string
	Count, Errors      int
	Codes              map[int]int
	P50, P90, P99, Max time.Duration
	latencies          []time.Duration
}

// Result is a whole run.
type Result struct {
	Elapsed  time.Duration
	Sent     int
	Dropped  int
	Total    Stats
	PerPath  []Stats
	Achieved float64 // completed requests per second
}

// randParam is "{rand:LO:HI}" (a random integer; HI may be "head"),
// "{addr:LO:HI}" (the seeded history's address with a random id, AddressID)
// or "{txhash:LO:HI}" (a random seeded transaction's hash, TxHashID).
var randParam = regexp.MustCompile(`\{(rand|addr|txhash):(\d+):(\d+|head)\}`)

// expand fills the placeholders of p; head is the newest block number.
func expand(p string, r *rand.Rand, head uint64) string {
	return randParam.ReplaceAllStringFunc(p, func(m string) string {
		g := randParam.FindStringSubmatch(m)
		lo, _ := strconv.ParseUint(g[2], 10, 64)
		hi := head
		if g[3] != "head" {
			hi, _ = strconv.ParseUint(g[3], 10, 64)
		}
		if hi < lo {
			lo, hi = hi, lo
		}
		v := lo + r.Uint64N(hi-lo+1)
		switch g[1] {
		case "addr":
			return AddressID(v)
		case "txhash":
			return TxHashID(v)
		}
		return strconv.FormatUint(v, 10)
	})
}

func checkTarget(base string, allowRemote bool) error {
	u, err := url.Parse(base)
	if err != nil || u.Host == "" {
		return fmt.Errorf("bench: bad url %q", base)
	}
	if allowRemote {
		return nil
	}
	host := u.Hostname()
	if host == "localhost" {
		return nil
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return nil
	}
	return fmt.Errorf("bench: %s is not a loopback address; pass -allow-remote to load a remote deployment", host)
}

// Load runs the load and returns the statistics; it stops at Duration or
// when ctx ends.
func Load(ctx context.Context, c LoadConfig) (Result, error) {
	if len(c.Paths) == 0 || c.Rate <= 0 || c.Duration <= 0 {
		return Result{}, errors.New("bench: need paths, a positive rate and a positive duration")
	}
	if err := checkTarget(c.BaseURL, c.AllowRemote); err != nil {
		return Result{}, err
	}
	for _, p := range c.Paths {
		if strings.Contains(p, ":head}") && c.HeadChain == "" {
			return Result{}, fmt.Errorf("bench: %s reads the head: set the head chain", p)
		}
	}
	if c.Concurrency <= 0 {
		c.Concurrency = 64
	}
	if c.Timeout <= 0 {
		c.Timeout = 10 * time.Second
	}
	base := strings.TrimRight(c.BaseURL, "/")
	client := &http.Client{
		Timeout:   c.Timeout,
		Transport: &http.Transport{MaxIdleConns: c.Concurrency, MaxIdleConnsPerHost: c.Concurrency},
	}
	var (
		mu      sync.Mutex
		samples []sample
		wg      sync.WaitGroup
	)
	var head atomic.Uint64
	// dropped counts the requests not sent for want of a free slot, for the
	// interval reports: an interval that served fewer than offered says so.
	var dropped atomic.Int64
	if c.HeadChain != "" {
		hctx, stopHead := context.WithCancel(ctx)
		defer stopHead()
		if err := followHead(hctx, client, base, c.HeadChain, &head); err != nil {
			return Result{}, err
		}
	}
	if c.Report > 0 && c.ReportTo != nil {
		stopReport := make(chan struct{})
		reportDone := make(chan struct{})
		go func() {
			defer close(reportDone)
			reportIntervals(c.Report, c.ReportTo, &mu, &samples, &dropped, stopReport)
		}()
		defer func() { close(stopReport); <-reportDone }()
	}
	slots := make(chan struct{}, c.Concurrency)
	rng := rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))
	interval := time.Duration(float64(time.Second) / c.Rate)
	ctx, cancel := context.WithTimeout(ctx, c.Duration)
	defer cancel()
	start := time.Now()
	res := Result{}
	for i := 0; ; i++ {
		at := start.Add(time.Duration(i) * interval)
		if wait := time.Until(at); wait > 0 {
			select {
			case <-ctx.Done():
			case <-time.After(wait):
			}
		}
		if ctx.Err() != nil {
			break
		}
		pi := i % len(c.Paths)
		target := base + expand(c.Paths[pi], rng, head.Load())
		select {
		case slots <- struct{}{}:
		default:
			res.Dropped++
			dropped.Add(1)
			continue
		}
		res.Sent++
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-slots }()
			t0 := time.Now()
			req, err := http.NewRequestWithContext(context.WithoutCancel(ctx), http.MethodGet, target, nil)
			var resp *http.Response
			if err == nil {
				for k, vs := range c.Header {
					req.Header[k] = vs
				}
				resp, err = client.Do(req)
			}
			s := sample{path: pi, at: t0}
			if err == nil {
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				s.code = resp.StatusCode
				s.err = resp.StatusCode >= 400
			} else {
				s.err = true
			}
			s.d = time.Since(t0)
			s.done = t0.Add(s.d)
			mu.Lock()
			samples = append(samples, s)
			mu.Unlock()
		}()
	}
	wg.Wait()
	res.Elapsed = time.Since(start)
	per := make([]Stats, len(c.Paths))
	for i, p := range c.Paths {
		per[i] = Stats{Path: p, Codes: map[int]int{}}
	}
	res.Total = Stats{Path: "all", Codes: map[int]int{}}
	for _, s := range samples {
		for _, st := range []*Stats{&per[s.path], &res.Total} {
			st.Count++
			st.Codes[s.code]++
			if s.err {
				st.Errors++
			}
			st.latencies = append(st.latencies, s.d)
		}
	}
	for _, st := range append([]*Stats{&res.Total}, ptrs(per)...) {
		st.finish()
	}
	res.PerPath = per
	res.Achieved = float64(res.Total.Count) / res.Elapsed.Seconds()
	return res, nil
}

func ptrs(s []Stats) []*Stats {
	out := make([]*Stats, len(s))
	for i := range s {
		out[i] = &s[i]
	}
	return out
}

func (s *Stats) finish() {
	if len(s.latencies) == 0 {
		return
	}
	slices.Sort(s.latencies)
	q := func(p float64) time.Duration { return s.latencies[int(p*float64(len(s.latencies)-1))] }
	s.P50, s.P90, s.P99, s.Max = q(.50), q(.90), q(.99), s.latencies[len(s.latencies)-1]
	s.latencies = nil
}

// String is the human report.
func (r Result) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "elapsed %s, sent %d, dropped %d (no free slot), completed %.1f req/s\n",
		r.Elapsed.Round(time.Millisecond), r.Sent, r.Dropped, r.Achieved)
	line := func(s Stats) {
		codes := make([]string, 0, len(s.Codes))
		for c, n := range s.Codes {
			name := strconv.Itoa(c)
			if c == 0 {
				name = "transport-error"
			}
			codes = append(codes, fmt.Sprintf("%s:%d", name, n))
		}
		slices.Sort(codes)
		fmt.Fprintf(&b, "%-60s n=%-7d err=%-5d p50=%-10s p90=%-10s p99=%-10s max=%-10s %s\n", s.Path, s.Count, s.Errors,
			s.P50.Round(10*time.Microsecond), s.P90.Round(10*time.Microsecond), s.P99.Round(10*time.Microsecond),
			s.Max.Round(10*time.Microsecond), strings.Join(codes, " "))
	}
	for _, s := range r.PerPath {
		line(s)
	}
	line(r.Total)
	return b.String()
}

// sample is one request's outcome.
type sample struct {
	path     int
	code     int
	d        time.Duration
	err      bool
	at, done time.Time
}

// followHead keeps head at the newest block number of chain, asking every
// second until ctx ends; it returns once the first answer came (or ctx
// ended: the chain may still be empty when the load is started).
func followHead(ctx context.Context, client *http.Client, base, chain string, head *atomic.Uint64) error {
	url := base + "/v1/chains/" + chain + "/blocks?pageSize=1"
	ask := func() bool {
		rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		req, _ := http.NewRequestWithContext(rctx, http.MethodGet, url, nil)
		resp, err := client.Do(req)
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		var out struct {
			Blocks []struct {
				BlockNumber string `json:"blockNumber"`
			} `json:"blocks"`
		}
		if resp.StatusCode != http.StatusOK || json.NewDecoder(resp.Body).Decode(&out) != nil || len(out.Blocks) == 0 {
			return false
		}
		n, err := strconv.ParseUint(out.Blocks[0].BlockNumber, 10, 64)
		if err != nil {
			return false
		}
		head.Store(n)
		return true
	}
	for !ask() {
		select {
		case <-ctx.Done():
			return fmt.Errorf("bench: the newest block of chain %s never became known: %w", chain, ctx.Err())
		case <-time.After(time.Second):
		}
	}
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case <-time.After(time.Second):
				ask()
			}
		}
	}()
	return nil
}

// reportIntervals writes, every interval until stop, the statistics of the
// requests that completed in it and how many were dropped (not sent: no free
// slot) in it.
func reportIntervals(interval time.Duration, w io.Writer, mu *sync.Mutex, samples *[]sample, dropped *atomic.Int64, stop <-chan struct{}) {
	t := time.NewTicker(interval)
	defer t.Stop()
	from := time.Now()
	seen := 0
	var droppedBefore int64
	for {
		select {
		case <-stop:
			return
		case now := <-t.C:
			mu.Lock()
			all := *samples
			var st Stats
			st.Path, st.Codes = "interval", map[int]int{}
			for _, s := range all[seen:] {
				st.Count++
				st.Codes[s.code]++
				if s.err {
					st.Errors++
				}
				st.latencies = append(st.latencies, s.d)
			}
			seen = len(all)
			mu.Unlock()
			st.finish()
			d := dropped.Load()
			fmt.Fprintf(w, "interval %s..%s n=%d err=%d dropped=%d p50=%s p90=%s p99=%s max=%s\n",
				from.Format("15:04:05"), now.Format("15:04:05"), st.Count, st.Errors, d-droppedBefore,
				st.P50.Round(10*time.Microsecond), st.P90.Round(10*time.Microsecond), st.P99.Round(10*time.Microsecond), st.Max.Round(10*time.Microsecond))
			from, droppedBefore = now, d
		}
	}
}

// PageToken follows a list's nextPageToken from its first page, pages
// times, and returns the token of the page after them (for loading a deep
// page). The path is given without pageToken.
func PageToken(ctx context.Context, base, path string, pages int) (string, error) {
	if err := checkTarget(base, true); err != nil {
		return "", err
	}
	client := &http.Client{Timeout: 30 * time.Second}
	token := ""
	for i := range pages {
		u := strings.TrimRight(base, "/") + path
		if token != "" {
			sep := "?"
			if strings.Contains(path, "?") {
				sep = "&"
			}
			u += sep + "pageToken=" + url.QueryEscape(token)
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
		if err != nil {
			return "", err
		}
		resp, err := client.Do(req)
		if err != nil {
			return "", err
		}
		var body struct {
			NextPageToken string `json:"nextPageToken"`
		}
		err = json.NewDecoder(resp.Body).Decode(&body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK {
			return "", fmt.Errorf("bench: page %d of %s: HTTP %d: %v", i+1, path, resp.StatusCode, err)
		}
		if body.NextPageToken == "" {
			return "", fmt.Errorf("bench: %s has only %d pages", path, i+1)
		}
		token = body.NextPageToken
	}
	return token, nil
}
