// Package guard keeps webhook deliveries from reaching internal networks
// (server-side request forgery): a webhook URL is the customer's choice,
// and without a guard it could point delivery at the metadata service, an
// admin port on loopback, or anything in the cluster's private ranges.
//
// The policy is applied twice, by the same code:
//
//   - When a URL is accepted (query's POST and PATCH /v1/webhooks, with
//     CheckURL): the scheme, the port, the host in every spelling a URL
//     parser or resolver may read as an IP address, reserved names, and
//     the addresses the name resolves to right now. The customer learns at
//     once, in a 400 that names the reason, instead of from failed
//     deliveries.
//   - When delivery connects (Dialer): on the address the connection is
//     actually about to use, after DNS resolution, because DNS answers
//     change (a name can be re-pointed at an internal address after it was
//     accepted: DNS rebinding). Delivery does not follow redirects (a 3xx is
//     a failed attempt) and never uses a proxy from the environment, so no
//     other path leads elsewhere.
//
// Refused unless the operator allows private targets
// (--delivery.allow-private-targets, the same flag on query and delivery;
// the development stack and tests set it), for IPv4 and IPv6 alike
// (IPv4-mapped IPv6 addresses are checked as IPv4):
//
//	unspecified   0.0.0.0/8, ::/128
//	loopback      127.0.0.0/8, ::1/128
//	private       10.0.0.0/8, 172.16.0.0/12, 192.168.0.0/16, fc00::/7
//	link-local    169.254.0.0/16 (incl. the 169.254.169.254 metadata service), fe80::/10
//	CGNAT         100.64.0.0/10
//	multicast     224.0.0.0/4, ff00::/8
//	reserved      240.0.0.0/4 (incl. 255.255.255.255), 192.0.0.0/24, 198.18.0.0/15
//	NAT64/6to4    64:ff9b::/96, 2002::/16, ::/96 (they embed IPv4 addresses)
//
// and, at accept time only (a dial sees addresses, not names), the names
// that only ever lead inside: localhost and *.localhost, *.internal (ICANN's
// private-use name, e.g. metadata.google.internal), *.local (mDNS),
// *.home.arpa, metadata.goog, and single-label names (resolved through the
// search domains of the cluster). With private targets allowed, only the
// scheme, the port, the IPv4 spelling and the resolution are checked.
//
// What stays with the caller: the syntax of the URL string (length, white
// space), the status code it maps a *URLError to, and the classification
// of dial errors (errors.As(err, *RefusedError)).
package guard

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// RegisterFlags adds --delivery.allow-private-targets, the one switch of
// the policy, so query (accept time) and delivery (connect time) read the
// same flag and the same MORAINE_DELIVERY_ALLOW_PRIVATE_TARGETS.
func RegisterFlags(fs *flag.FlagSet, allowPrivate *bool) {
	fs.BoolVar(allowPrivate, "delivery.allow-private-targets", false, "allow webhook URLs that name or resolve to loopback, private, link-local (metadata), CGNAT or other internal addresses; checked when query accepts a URL and when delivery connects (development only)")
}

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
	// ::/96 are the deprecated IPv4-compatible addresses (::127.0.0.1);
	// :: and ::1 inside it matched above.
	add("embedded-ipv4", "64:ff9b::/96", "2002::/16", "::/96")
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

// Resolver looks names up; *net.Resolver implements it.
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// Policy is what CheckURL applies.
type Policy struct {
	// AllowPrivate is --delivery.allow-private-targets.
	AllowPrivate bool
	// Resolver resolves host names (net.DefaultResolver when nil).
	Resolver Resolver
	// ResolveTimeout bounds the lookup (2 s when 0).
	ResolveTimeout time.Duration
}

// URLError says why a webhook URL is not accepted. Message is meant for the
// customer (the API's 400); Temporary marks a lookup that failed for
// reasons of the resolver, not of the name (a retry may pass).
type URLError struct {
	Message   string
	Temporary bool
}

func (e *URLError) Error() string { return e.Message }

func urlErr(format string, args ...any) error {
	return &URLError{Message: fmt.Sprintf(format, args...)}
}

// reasonText words a refused range's reason for the customer.
var reasonText = map[string]string{
	"unspecified":   "an unspecified (0.0.0.0 or ::) address",
	"loopback":      "a loopback address",
	"private":       "a private network address",
	"link-local":    "a link-local address (this includes the cloud metadata service)",
	"cgnat":         "a shared (carrier-grade NAT) address",
	"multicast":     "a multicast address",
	"reserved":      "a reserved address",
	"embedded-ipv4": "an IPv6 address embedding an IPv4 one (NAT64, 6to4 or IPv4-compatible)",
	"invalid":       "an invalid address",
}

// refusedNames are the host names, or name suffixes (leading dot), that
// only ever lead inside: checked before resolution, since a resolver of
// the cluster would answer them with internal addresses (or not at all,
// here, and then a later DNS change would make them live).
var refusedNames = []string{"localhost", ".localhost", ".internal", ".local", ".home.arpa", "metadata.goog"}

// CheckURL applies the policy to a webhook URL when it is accepted. It
// returns nil or a *URLError.
func CheckURL(ctx context.Context, raw string, p Policy) error {
	u, err := url.Parse(raw)
	if err != nil || !u.IsAbs() || u.Opaque != "" {
		return urlErr("url must be an absolute http or https URL")
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return urlErr("url must be an absolute http or https URL")
	}
	if port := u.Port(); port != "" {
		n, err := strconv.Atoi(port)
		if err != nil || n < 1 || n > 65535 {
			return urlErr("url port %s is outside 1-65535", port)
		}
	}
	host := strings.ToLower(u.Hostname())
	if host == "" {
		return urlErr("url must name a host")
	}
	// An IPv6 literal ([...] in the URL).
	if strings.Contains(host, ":") {
		if i := strings.IndexByte(host, '%'); i >= 0 {
			return urlErr("url host %s carries an IPv6 zone, which only has a meaning on one machine", host)
		}
		a, err := netip.ParseAddr(host)
		if err != nil {
			return urlErr("url host %s is not a valid IPv6 address", host)
		}
		return checkAddr(host, a, p.AllowPrivate)
	}
	name := strings.TrimSuffix(host, ".")
	// A host whose last label is a number is an IPv4 address to URL parsers
	// (WHATWG) and to the C resolver (inet_aton): 2130706433, 0x7f000001,
	// 127.1 and 0177.0.0.1 all mean 127.0.0.1.
	if a, isIP, ok := parseIPv4(name); isIP {
		if !ok {
			return urlErr("url host %s is not a valid IPv4 address", host)
		}
		if err := checkAddr(host, a, p.AllowPrivate); err != nil {
			return err
		}
		if host != a.String() {
			// Go's resolver, which delivery dials with, reads only the
			// dotted-decimal form.
			return urlErr("url host %s is an IPv4 address in a non-standard form; write it as %s", host, a)
		}
		return nil
	}
	if !p.AllowPrivate {
		for _, n := range refusedNames {
			if suffix, isSuffix := strings.CutPrefix(n, "."); (isSuffix && strings.HasSuffix(name, "."+suffix)) || name == n {
				return urlErr("url host %s is an internal name; webhook URLs must reach the public internet", host)
			}
		}
		if !strings.Contains(name, ".") {
			return urlErr("url host %s is a single-label name, which resolves inside the local network; use a fully qualified domain name", host)
		}
	}
	return resolve(ctx, host, name, p)
}

func checkAddr(host string, a netip.Addr, allowPrivate bool) error {
	if allowPrivate {
		return nil
	}
	var re *RefusedError
	if err := Check(a); errors.As(err, &re) {
		what := host
		if u := a.Unmap(); u.String() != host {
			what = fmt.Sprintf("%s (%s)", host, u)
		}
		return urlErr("url host %s is %s; webhook URLs must reach the public internet", what, reasonText[re.Reason])
	}
	return nil
}

// resolve looks name up: a name that does not resolve is refused, and so
// is one with any refused address (delivery may dial any of them).
func resolve(ctx context.Context, host, name string, p Policy) error {
	r := p.Resolver
	if r == nil {
		r = net.DefaultResolver
	}
	timeout := p.ResolveTimeout
	if timeout <= 0 {
		timeout = 2 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	addrs, err := r.LookupNetIP(ctx, "ip", name)
	var dnsErr *net.DNSError
	switch {
	case err == nil && len(addrs) == 0, errors.As(err, &dnsErr) && dnsErr.IsNotFound:
		return urlErr("url host %s does not resolve to an address", host)
	case err != nil:
		return &URLError{Message: fmt.Sprintf("url host %s could not be resolved right now; try again", host), Temporary: true}
	}
	if p.AllowPrivate {
		return nil
	}
	for _, a := range addrs {
		var re *RefusedError
		if err := Check(a); errors.As(err, &re) {
			return urlErr("url host %s resolves to %s, %s; webhook URLs must reach the public internet", host, a.Unmap(), reasonText[re.Reason])
		}
	}
	return nil
}

// parseIPv4 reads host the way WHATWG URL parsers and inet_aton do when its
// last label is numeric (decimal, 0x hex or 0-led octal): up to four parts,
// the last filling the remaining bytes. isIP reports whether host is meant
// as an IPv4 address at all, ok whether it is a valid one.
func parseIPv4(host string) (a netip.Addr, isIP, ok bool) {
	parts := strings.Split(host, ".")
	if !isNumber(parts[len(parts)-1]) {
		return netip.Addr{}, false, false
	}
	if len(parts) > 4 {
		return netip.Addr{}, true, false
	}
	nums := make([]uint64, len(parts))
	for i, s := range parts {
		n, ok := parseIPv4Part(s)
		if !ok {
			return netip.Addr{}, true, false
		}
		nums[i] = n
	}
	for _, n := range nums[:len(nums)-1] {
		if n > 255 {
			return netip.Addr{}, true, false
		}
	}
	last := nums[len(nums)-1]
	if last >= 1<<(8*(5-len(nums))) {
		return netip.Addr{}, true, false
	}
	v := last
	for i, n := range nums[:len(nums)-1] {
		v |= n << (8 * (3 - i))
	}
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)}), true, true
}

// isNumber: a label that URL parsers take as a number.
func isNumber(s string) bool {
	if s == "" {
		return false
	}
	if h, ok := strings.CutPrefix(s, "0x"); ok {
		for _, c := range h {
			if !strings.ContainsRune("0123456789abcdef", c) {
				return false
			}
		}
		return true
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

func parseIPv4Part(s string) (uint64, bool) {
	base := 10
	switch {
	case strings.HasPrefix(s, "0x"):
		s, base = s[2:], 16
		if s == "" {
			return 0, true
		}
	case len(s) > 1 && s[0] == '0':
		s, base = s[1:], 8
	}
	n, err := strconv.ParseUint(s, base, 64)
	if err != nil || n > 1<<32-1 {
		return 0, false
	}
	return n, true
}
