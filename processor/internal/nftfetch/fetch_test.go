package nftfetch

import (
	"context"
	"encoding/base64"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/moraine-data/moraine/pkg/nftmeta"
)

// metadataServer serves the documents of the tests by path.
func metadataServer(t *testing.T) (*httptest.Server, *atomic.Int32) {
	t.Helper()
	var hits atomic.Int32
	mux := http.NewServeMux()
	doc := `{"name":"Punk #7","description":"a punk","image":"ipfs://img/7.png","animation_url":"https://x.example/7.mp4",
	 "external_url":"https://x.example/7","background_color":"ffffff","attributes":[ {"trait_type": "eyes", "value": "blue"} ],
	 "properties":{"rarity":"rare"},"decimals":0,"symbol":"PUNK"}`
	mux.HandleFunc("/good.json", func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte(doc)) })
	mux.HandleFunc("/ipfs/bafycid/7.json", func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte(`{"name":"ipfs 7"}`)) })
	mux.HandleFunc("/ipfs/bafymoved/7.json", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/ipfs/bafycid/7.json", http.StatusMovedPermanently)
	})
	mux.HandleFunc("/erc1155/", func(w http.ResponseWriter, r *http.Request) {
		_, _ = fmt.Fprintf(w, `{"name":%q}`, strings.TrimPrefix(r.URL.Path, "/erc1155/"))
	})
	mux.HandleFunc("/throttled.json", func(w http.ResponseWriter, r *http.Request) { http.Error(w, "slow down", http.StatusTooManyRequests) })
	mux.HandleFunc("/error.json", func(w http.ResponseWriter, r *http.Request) { http.Error(w, "oops", http.StatusServiceUnavailable) })
	mux.HandleFunc("/large-declared.json", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "5000")
		_, _ = w.Write([]byte(strings.Repeat(" ", 5000)))
	})
	mux.HandleFunc("/large-chunked.json", func(w http.ResponseWriter, r *http.Request) {
		for range 10 {
			_, _ = w.Write([]byte(strings.Repeat(" ", 500)))
			w.(http.Flusher).Flush()
		}
	})
	mux.HandleFunc("/invalid.json", func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte(`{"name": "x",`)) })
	mux.HandleFunc("/array.json", func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte(`[1,2,3]`)) })
	mux.HandleFunc("/not-metadata.json", func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte(`{"error":"no such token","code":7}`))
	})
	mux.HandleFunc("/redirect", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/good.json", http.StatusFound) })
	mux.HandleFunc("/loop", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/loop", http.StatusFound) })
	mux.HandleFunc("/to-ftp", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "ftp://x.example/a", http.StatusFound)
	})
	mux.HandleFunc("/slow.json", func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-time.After(2 * time.Second):
		case <-r.Context().Done():
		}
		_, _ = w.Write([]byte(`{"name":"slow"}`))
	})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		mux.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv, &hits
}

func testConfig(gateway string) Config {
	return Config{MaxBytes: 1000, Timeout: 3 * time.Second, PerHost: 4, MaxInFlight: 16, HostQueueTimeout: time.Second,
		MaxRedirects: 3, IPFSGateway: gateway, AllowPrivateTargets: true}
}

func TestFetchStatuses(t *testing.T) {
	srv, _ := metadataServer(t)
	f, err := New(testConfig(srv.URL+"/ipfs/"), nil)
	require.NoError(t, err)
	defer f.Close()
	b64 := func(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }
	for _, tc := range []struct {
		name     string
		uri      string
		standard uint16
		status   string
		retry    bool
		scheme   string
		docName  string
	}{
		{"http document", srv.URL + "/good.json", 721, nftmeta.StatusIndexed, false, "http", "Punk #7"},
		{"redirect followed", srv.URL + "/redirect", 721, nftmeta.StatusIndexed, false, "http", "Punk #7"},
		{"ipfs through the gateway", "ipfs://bafycid/7.json", 721, nftmeta.StatusIndexed, false, "ipfs", "ipfs 7"},
		{"ipfs://ipfs/ form", "ipfs://ipfs/bafycid/7.json", 721, nftmeta.StatusIndexed, false, "ipfs", "ipfs 7"},
		{"erc-1155 {id}", srv.URL + "/erc1155/{id}.json", 1155, nftmeta.StatusIndexed, false, "http",
			"000000000000000000000000000000000000000000000000000000000000002a.json"},
		{"erc-721 keeps {id}", srv.URL + "/erc1155/{id}.json", 721, nftmeta.StatusIndexed, false, "http", "{id}.json"},
		{"data base64", "data:application/json;base64," + b64(`{"name":"on chain"}`), 721, nftmeta.StatusIndexed, false, "data", "on chain"},
		{"data plain", `data:application/json,{"name":"plain 100%"}`, 721, nftmeta.StatusIndexed, false, "data", "plain 100%"},
		{"data percent-encoded", "data:application/json," + url.PathEscape(`{"name":"esc aped"}`), 721, nftmeta.StatusIndexed, false, "data", "esc aped"},
		{"data utf8 parameter", `data:application/json;utf8,{"description":"d"}`, 721, nftmeta.StatusIndexed, false, "data", ""},
		{"data invalid base64", "data:application/json;base64,@@@", 721, nftmeta.StatusInvalidTokenURI, false, "other", ""},
		{"data without comma", "data:application/json", 721, nftmeta.StatusInvalidTokenURI, false, "other", ""},
		{"data too large", "data:application/json;base64," + b64(`{"name":"`+strings.Repeat("x", 2000)+`"}`), 721, nftmeta.StatusMetadataContentTooLarge, false, "other", ""},
		{"data not json", "data:text/plain,hello", 721, nftmeta.StatusInvalidMetadataJSON, false, "data", ""},
		{"empty", "", 721, nftmeta.StatusInvalidTokenURI, false, "other", ""},
		{"spaces", "https://x.example/a b.json", 721, nftmeta.StatusInvalidTokenURI, false, "other", ""},
		{"not utf-8", "https://x.example/\xff.json", 721, nftmeta.StatusInvalidTokenURI, false, "other", ""},
		{"relative", "QmYwAPJzv5CZsnA625s3Xf2nemtYgPpHdWEz79ojWnPbdG", 721, nftmeta.StatusInvalidTokenURI, false, "other", ""},
		{"ipfs without cid", "ipfs://", 721, nftmeta.StatusInvalidTokenURI, false, "other", ""},
		{"ftp", "ftp://x.example/1.json", 721, nftmeta.StatusInvalidTokenURIScheme, false, "other", ""},
		{"arweave", "ar://abc/1.json", 721, nftmeta.StatusInvalidTokenURIScheme, false, "other", ""},
		{"file", "file:///etc/passwd", 721, nftmeta.StatusInvalidTokenURIScheme, false, "other", ""},
		{"429", srv.URL + "/throttled.json", 721, nftmeta.StatusThrottledTokenURI, true, "http", ""},
		{"503", srv.URL + "/error.json", 721, nftmeta.StatusUnreachableTokenURI, true, "http", ""},
		{"404", srv.URL + "/missing.json", 721, nftmeta.StatusUnreachableTokenURI, false, "http", ""},
		{"redirect loop", srv.URL + "/loop", 721, nftmeta.StatusUnreachableTokenURI, false, "http", ""},
		{"redirect to ftp", srv.URL + "/to-ftp", 721, nftmeta.StatusUnreachableTokenURI, false, "http", ""},
		{"closed port", "http://127.0.0.1:1/x.json", 721, nftmeta.StatusUnreachableTokenURI, true, "http", ""},
		{"too large (Content-Length)", srv.URL + "/large-declared.json", 721, nftmeta.StatusMetadataContentTooLarge, false, "http", ""},
		{"too large (streamed)", srv.URL + "/large-chunked.json", 721, nftmeta.StatusMetadataContentTooLarge, false, "http", ""},
		{"invalid json", srv.URL + "/invalid.json", 721, nftmeta.StatusInvalidMetadataJSON, false, "http", ""},
		{"json array", srv.URL + "/array.json", 721, nftmeta.StatusInvalidMetadata, false, "http", ""},
		{"json without metadata", srv.URL + "/not-metadata.json", 721, nftmeta.StatusInvalidMetadata, false, "http", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := f.Fetch(t.Context(), tc.uri, big.NewInt(42), tc.standard)
			require.Equal(t, tc.status, res.Status, res.Detail)
			require.Equal(t, tc.retry, res.Retry, res.Detail)
			require.Equal(t, tc.scheme, res.Scheme)
			require.Equal(t, tc.docName, res.Doc.Name)
			if tc.status != nftmeta.StatusIndexed {
				require.NotEmpty(t, res.Detail)
			}
		})
	}
	res := f.Fetch(t.Context(), srv.URL+"/good.json", big.NewInt(7), 721)
	three := 0
	require.Equal(t, Document{Name: "Punk #7", Symbol: "PUNK", Description: "a punk", ImageURI: "ipfs://img/7.png",
		AnimationURI: "https://x.example/7.mp4", ExternalURL: "https://x.example/7", Background: "ffffff",
		Attributes: `[{"trait_type":"eyes","value":"blue"}]`, Properties: `{"rarity":"rare"}`, Decimals: &three}, res.Doc)
}

func TestFetchTimeoutIsRetried(t *testing.T) {
	srv, _ := metadataServer(t)
	cfg := testConfig(srv.URL + "/ipfs/")
	cfg.Timeout = 200 * time.Millisecond
	f, err := New(cfg, nil)
	require.NoError(t, err)
	res := f.Fetch(t.Context(), srv.URL+"/slow.json", big.NewInt(1), 721)
	require.Equal(t, nftmeta.StatusUnreachableTokenURI, res.Status)
	require.True(t, res.Retry)
}

// TestBusyHostDefers: with one slot per host taken by a slow fetch, the
// next fetch of that host is deferred after HostQueueTimeout while another
// host is fetched at once.
func TestBusyHostDefers(t *testing.T) {
	srv, _ := metadataServer(t)
	other, _ := metadataServer(t)
	cfg := testConfig(srv.URL + "/ipfs/")
	cfg.PerHost, cfg.HostQueueTimeout = 1, 100*time.Millisecond
	f, err := New(cfg, nil)
	require.NoError(t, err)
	done := make(chan Result)
	go func() { done <- f.Fetch(context.Background(), srv.URL+"/slow.json", big.NewInt(1), 721) }()
	time.Sleep(100 * time.Millisecond)
	res := f.Fetch(t.Context(), srv.URL+"/good.json", big.NewInt(1), 721)
	require.True(t, res.Deferred)
	require.Empty(t, res.Status)
	res = f.Fetch(t.Context(), other.URL+"/good.json", big.NewInt(1), 721)
	require.Equal(t, nftmeta.StatusIndexed, res.Status)
	require.Equal(t, nftmeta.StatusIndexed, (<-done).Status)
}

// resolver answers the test's names; anything else does not resolve.
type resolver map[string]string

func (r resolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	if a, ok := r[host]; ok {
		return []netip.Addr{netip.MustParseAddr(a)}, nil
	}
	return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
}

// TestSSRFRefused: in production mode (private targets refused) a token
// URI that leads into internal networks is never fetched, whether it names
// loopback or the cloud metadata service, a name that resolves inside, or
// gets there by a redirect; the trusted IPFS gateway is still reached on
// loopback.
func TestSSRFRefused(t *testing.T) {
	srv, hits := metadataServer(t)
	gateway, _ := metadataServer(t)
	cfg := testConfig(gateway.URL + "/ipfs/")
	cfg.AllowPrivateTargets = false
	f, err := New(cfg, resolver{"inside.example.com": "10.1.2.3", "meta.example.com": "169.254.169.254"})
	require.NoError(t, err)
	for _, uri := range []string{
		srv.URL + "/good.json",
		"http://169.254.169.254/latest/meta-data/iam/security-credentials/",
		"http://[::1]:" + strings.Split(srv.URL, ":")[2] + "/good.json",
		"http://2130706433/good.json",
		"http://localhost/good.json",
		"http://metadata.google.internal/computeMetadata/v1/",
		"http://inside.example.com/good.json",
		"http://meta.example.com/latest/meta-data/",
	} {
		before := hits.Load()
		res := f.Fetch(t.Context(), uri, big.NewInt(1), 721)
		require.Equal(t, nftmeta.StatusUnreachableTokenURI, res.Status, uri)
		require.False(t, res.Retry, "a refused target is final: %s", uri)
		require.Contains(t, res.Detail, "refused", uri)
		require.Equal(t, before, hits.Load(), "nothing reached the server for %s", uri)
	}
	// The gateway is trusted for ipfs:// URIs: they reach it on loopback;
	// an http:// URI naming the gateway's host is refused like any other.
	res := f.Fetch(t.Context(), "ipfs://bafycid/7.json", big.NewInt(1), 721)
	require.Equal(t, nftmeta.StatusIndexed, res.Status, res.Detail)
	res = f.Fetch(t.Context(), "ipfs://bafymoved/7.json", big.NewInt(1), 721)
	require.Equal(t, nftmeta.StatusIndexed, res.Status, "the gateway may redirect to itself: %s", res.Detail)
	res = f.Fetch(t.Context(), gateway.URL+"/ipfs/bafycid/7.json", big.NewInt(1), 721)
	require.Equal(t, nftmeta.StatusUnreachableTokenURI, res.Status, res.Detail)
	require.False(t, res.Retry)
	// But an http:// URI elsewhere on loopback is refused at dial time too
	// (the dial check runs on the address actually dialled).
	_, err = f.client.Get("http://127.0.0.2:1/x")
	require.ErrorContains(t, err, "refused target")
}

func TestSubstituteID(t *testing.T) {
	// EIP-1155's example: id 314592 (0x4CCE0).
	require.Equal(t, "https://x/000000000000000000000000000000000000000000000000000000000004cce0.json",
		SubstituteID("https://x/{id}.json", big.NewInt(314592)))
	require.Equal(t, "https://x/"+strings.Repeat("0", 63)+"1/"+strings.Repeat("0", 63)+"1", SubstituteID("https://x/{id}/{id}", big.NewInt(1)))
	require.Equal(t, "https://x/1", SubstituteID("https://x/1", big.NewInt(1)))
}

func TestConfigValidate(t *testing.T) {
	require.NoError(t, testConfig("https://ipfs.io/ipfs/").Validate())
	bad := testConfig("ipfs.io")
	require.Error(t, bad.Validate())
	bad = testConfig("https://ipfs.io/ipfs/")
	bad.MaxBytes = 0
	require.Error(t, bad.Validate())
}
