package guard

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestCheckRefusesEveryRange(t *testing.T) {
	for _, tc := range []struct {
		addr   string
		reason string // "" allowed
	}{
		{"0.0.0.0", "unspecified"},
		{"::", "unspecified"},
		{"127.0.0.1", "loopback"},
		{"127.255.0.9", "loopback"},
		{"::1", "loopback"},
		{"10.1.2.3", "private"},
		{"172.16.0.1", "private"},
		{"172.31.255.254", "private"},
		{"192.168.1.1", "private"},
		{"fd12:3456::1", "private"},
		{"169.254.169.254", "link-local"}, // cloud metadata
		{"169.254.1.1", "link-local"},
		{"fe80::1", "link-local"},
		{"100.64.0.1", "cgnat"},
		{"100.127.255.254", "cgnat"},
		{"224.0.0.1", "multicast"},
		{"239.255.255.250", "multicast"},
		{"ff02::1", "multicast"},
		{"255.255.255.255", "reserved"},
		{"::ffff:10.0.0.1", "private"},           // IPv4-mapped
		{"::ffff:169.254.169.254", "link-local"}, // IPv4-mapped metadata
		{"64:ff9b::a00:1", "embedded-ipv4"},
		// Public addresses pass, including the neighbours of refused ranges.
		{"8.8.8.8", ""},
		{"172.32.0.1", ""},
		{"100.128.0.1", ""},
		{"11.0.0.1", ""},
		{"2606:4700:4700::1111", ""},
	} {
		t.Run(tc.addr, func(t *testing.T) {
			err := Check(netip.MustParseAddr(tc.addr))
			if tc.reason == "" {
				require.NoError(t, err)
				return
			}
			var re *RefusedError
			require.ErrorAs(t, err, &re)
			require.Equal(t, tc.reason, re.Reason)
		})
	}
}

// TestDialerRefusesLoopbackUnlessAllowed dials a real loopback server: the
// guard stops the connection before it is made, and the operator flag lets
// it through.
func TestDialerRefusesLoopbackUnlessAllowed(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {}))
	defer srv.Close()
	for _, allow := range []bool{false, true} {
		cl := &http.Client{Transport: &http.Transport{DialContext: Dialer(allow, time.Second)}}
		resp, err := cl.Get(srv.URL)
		if allow {
			require.NoError(t, err)
			resp.Body.Close()
			continue
		}
		var re *RefusedError
		require.True(t, errors.As(err, &re), "got %v", err)
		require.Equal(t, "loopback", re.Reason)
	}
	// A hostname is checked after resolution: localhost resolves to loopback.
	_, err := Dialer(false, time.Second)(context.Background(), "tcp", net.JoinHostPort("localhost", "1"))
	var re *RefusedError
	require.ErrorAs(t, err, &re)
}

// fakeResolver answers from a map; a missing name does not exist, and
// "flaky.example" fails like a resolver that cannot be reached.
type fakeResolver map[string][]string

func (f fakeResolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	if host == "flaky.example" {
		return nil, &net.DNSError{Err: "server misbehaving", Name: host, IsTemporary: true}
	}
	list, ok := f[host]
	if !ok {
		return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}
	out := make([]netip.Addr, len(list))
	for i, s := range list {
		out[i] = netip.MustParseAddr(s)
	}
	return out, nil
}

var testResolver = fakeResolver{
	"example.com":         {"93.184.215.14", "2606:2800:21f:cb07:6820:80da:af6b:8b2c"},
	"hooks.example.org":   {"203.0.114.7"},
	"rebind.example":      {"93.184.215.14", "10.1.2.3"},
	"metadata-alias.test": {"169.254.169.254"},
	"v6-loop.example":     {"::1"},
}

// TestCheckURL is the audit's list of spellings (issue 16), each refused
// with a message naming the reason, and the URLs that pass.
func TestCheckURL(t *testing.T) {
	for _, tc := range []struct {
		url  string
		want string // substring of the message; "" accepted
		// allowed: the result with private targets allowed ("" accepted,
		// "same" as want).
		allowed string
	}{
		{"https://example.com/hook", "", ""},
		{"http://example.com:8080/x?y=1", "", ""},
		{"https://hooks.example.org./x", "", ""}, // trailing dot
		{"https://93.184.215.14/x", "", ""},
		{"https://[2606:4700:4700::1111]/x", "", ""},

		// The metadata service, by address and by name.
		{"http://169.254.169.254/latest/meta-data", "169.254.169.254 is a link-local address (this includes the cloud metadata service)", ""},
		{"http://metadata.google.internal/computeMetadata/v1/", "metadata.google.internal is an internal name", "does not resolve"},
		{"http://metadata.goog/", "metadata.goog is an internal name", "does not resolve"},
		{"http://metadata/", "single-label name", "does not resolve"},
		{"http://metadata-alias.test/", "resolves to 169.254.169.254, a link-local address", ""},
		// Loopback in every spelling.
		{"http://127.0.0.1/", "127.0.0.1 is a loopback address", ""},
		{"http://localhost:8080/", "localhost is an internal name", "does not resolve"},
		{"http://LOCALHOST./", "localhost. is an internal name", "does not resolve"},
		{"http://api.localhost/", "api.localhost is an internal name", "does not resolve"},
		{"http://[::1]/", "::1 is a loopback address", ""},
		{"http://[::ffff:127.0.0.1]/", "::ffff:127.0.0.1 (127.0.0.1) is a loopback address", ""},
		{"http://[::ffff:7f00:1]/", "(127.0.0.1) is a loopback address", ""},
		{"http://[::127.0.0.1]/", "embedding an IPv4 one", ""},
		{"http://2130706433/", "2130706433 (127.0.0.1) is a loopback address", "non-standard form; write it as 127.0.0.1"},
		{"http://0x7f000001/", "0x7f000001 (127.0.0.1) is a loopback address", "non-standard form"},
		{"http://127.1/", "127.1 (127.0.0.1) is a loopback address", "non-standard form"},
		{"http://0177.0.0.1/", "0177.0.0.1 (127.0.0.1) is a loopback address", "non-standard form"},
		{"http://0x7f.0.0.1/", "(127.0.0.1) is a loopback address", "non-standard form"},
		{"http://0.0.0.0/", "0.0.0.0 is an unspecified", ""},
		{"http://0/", "0 (0.0.0.0) is an unspecified", "non-standard form"},
		{"http://[::]/", ":: is an unspecified", ""},
		{"http://v6-loop.example/", "resolves to ::1, a loopback address", ""},
		// Private and shared ranges.
		{"http://10.0.0.1/", "10.0.0.1 is a private network address", ""},
		{"http://172.16.0.1/", "172.16.0.1 is a private network address", ""},
		{"http://192.168.1.1/", "192.168.1.1 is a private network address", ""},
		{"http://100.64.0.1/", "100.64.0.1 is a shared (carrier-grade NAT) address", ""},
		{"http://[fd00::1]/", "fd00::1 is a private network address", ""},
		{"http://rebind.example/", "resolves to 10.1.2.3, a private network address", ""},
		// Link-local IPv6, with and without a zone.
		{"http://[fe80::1]/", "fe80::1 is a link-local address", ""},
		{"http://[fe80::1%25eth0]/", "carries an IPv6 zone", "same"},
		{"http://host.local/", "host.local is an internal name", "does not resolve"},
		// Ports.
		{"https://example.com:99999/", "url port 99999 is outside 1-65535", "same"},
		{"https://example.com:0/", "url port 0 is outside 1-65535", "same"},
		{"https://example.com:65535/", "", ""},
		// Names that do not resolve, now or right now.
		{"https://does-not-exist.example/", "does-not-exist.example does not resolve", "same"},
		{"https://flaky.example/", "could not be resolved right now", "same"},
		// Not IPv4 after all, or not valid.
		{"http://1.2.3.4.5/", "1.2.3.4.5 is not a valid IPv4 address", "same"},
		{"http://256.0.0.1/", "256.0.0.1 is not a valid IPv4 address", "same"},
		{"http://1.2.3.0x100/", "not a valid IPv4 address", "same"},
		// Schemes.
		{"ftp://example.com/", "absolute http or https URL", "same"},
		{"javascript:alert(1)", "absolute http or https URL", "same"},
		{"/relative", "absolute http or https URL", "same"},
	} {
		t.Run(tc.url, func(t *testing.T) {
			for _, allow := range []bool{false, true} {
				want := tc.want
				if allow {
					want = tc.allowed
					if want == "same" {
						want = tc.want
					}
				}
				err := CheckURL(context.Background(), tc.url, Policy{AllowPrivate: allow, Resolver: testResolver})
				if want == "" {
					require.NoError(t, err, "allowPrivate=%v", allow)
					continue
				}
				var ue *URLError
				require.ErrorAs(t, err, &ue, "allowPrivate=%v", allow)
				require.Contains(t, ue.Message, want, "allowPrivate=%v", allow)
				require.Equal(t, tc.url == "https://flaky.example/", ue.Temporary)
			}
		})
	}
}

func TestCheckURLResolveTimeout(t *testing.T) {
	// A resolver that never answers is cut off by ResolveTimeout and
	// reported as temporary.
	start := time.Now()
	err := CheckURL(context.Background(), "https://slow.example/", Policy{Resolver: hangingResolver{}, ResolveTimeout: 50 * time.Millisecond})
	var ue *URLError
	require.ErrorAs(t, err, &ue)
	require.True(t, ue.Temporary)
	require.Less(t, time.Since(start), 2*time.Second)
}

type hangingResolver struct{}

func (hangingResolver) LookupNetIP(ctx context.Context, _, _ string) ([]netip.Addr, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}
