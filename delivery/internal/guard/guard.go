// Package guard keeps webhook deliveries from reaching internal networks
// (server-side request forgery): a webhook URL is the customer's choice,
// and without a guard it could point delivery at the metadata service, an
// admin port on loopback, or anything in the cluster's private ranges.
//
// The check runs at dial time, on the address the connection is actually
// about to use, after DNS resolution: a hostname that resolves (or
// re-resolves, DNS rebinding) to a refused address is refused, and so is
// every address a literal IP URL names. Delivery does not follow redirects
// (a 3xx is a failed attempt) and never uses a proxy from the environment,
// so no other path leads elsewhere.
//
// Refused unless the operator allows private targets
// (--delivery.allow-private-targets, which the development stack and tests
// pass), for IPv4 and IPv6 alike (IPv4-mapped IPv6 addresses are checked as
// IPv4):
//
//	unspecified   0.0.0.0/8, ::/128
//	loopback      127.0.0.0/8, ::1/128
//	private       10.0.0.0/8, 172.16.0.0/12, 192.168.0.0/16, fc00::/7
//	link-local    169.254.0.0/16 (incl. the 169.254.169.254 metadata service), fe80::/10
//	CGNAT         100.64.0.0/10
//	multicast     224.0.0.0/4, ff00::/8
//	reserved      240.0.0.0/4 (incl. 255.255.255.255), 192.0.0.0/24, 198.18.0.0/15
//	NAT64/6to4    64:ff9b::/96, 2002::/16 (they embed IPv4 addresses)
//
// What stays with the caller: the URL scheme check (http and https only)
// and the classification of the error (errors.As(err, *RefusedError)).
package guard

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"syscall"
	"time"
)

// refused lists the prefixes of the package doc with their reason.
var refused = func() []struct {
	p      netip.Prefix
	reason string
} {
	var out []struct {
		p      netip.Prefix
		reason string
	}
	add := func(reason string, cidrs ...string) {
		for _, c := range cidrs {
			out = append(out, struct {
				p      netip.Prefix
				reason string
			}{netip.MustParsePrefix(c), reason})
		}
	}
	add("unspecified", "0.0.0.0/8", "::/128")
	add("loopback", "127.0.0.0/8", "::1/128")
	add("private", "10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "fc00::/7")
	add("link-local", "169.254.0.0/16", "fe80::/10")
	add("cgnat", "100.64.0.0/10")
	add("multicast", "224.0.0.0/4", "ff00::/8")
	add("reserved", "240.0.0.0/4", "192.0.0.0/24", "198.18.0.0/15")
	add("embedded-ipv4", "64:ff9b::/96", "2002::/16")
	return out
}()

// RefusedError says that a connection to a refused address was not made.
type RefusedError struct {
	Addr   netip.Addr
	Reason string
}

func (e *RefusedError) Error() string {
	return fmt.Sprintf("refused target address %s (%s; allow with --delivery.allow-private-targets)", e.Addr, e.Reason)
}

// Check returns a *RefusedError when addr is in a refused range.
func Check(addr netip.Addr) error {
	addr = addr.Unmap()
	for _, r := range refused {
		if r.p.Contains(addr) {
			return &RefusedError{Addr: addr, Reason: r.reason}
		}
	}
	if !addr.IsValid() {
		return &RefusedError{Addr: addr, Reason: "invalid"}
	}
	return nil
}

// control is a net.Dialer Control function: it runs after resolution, for
// the very address being dialled.
func control(_, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return &RefusedError{Reason: "unparseable address " + address}
	}
	return Check(ap.Addr())
}

// Dialer returns a DialContext for http.Transport that refuses the ranges
// of the package doc unless allowPrivate.
func Dialer(allowPrivate bool, timeout time.Duration) func(ctx context.Context, network, addr string) (net.Conn, error) {
	d := &net.Dialer{Timeout: timeout, KeepAlive: 30 * time.Second}
	if !allowPrivate {
		d.Control = control
	}
	return d.DialContext
}
