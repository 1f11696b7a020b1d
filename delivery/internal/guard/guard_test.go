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
