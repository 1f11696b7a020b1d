// Package guardtest resolves the documentation names tests use in webhook
// URLs (example.com, example.org, example.net and their subdomains) to a
// public address, without DNS: the tests run on machines without a
// resolver that knows them, and the target policy resolves every host.
package guardtest

import (
	"context"
	"net"
	"net/netip"
	"strings"
)

// PublicAddr is what every example name resolves to (an address of the
// real example.com, outside every refused range).
var PublicAddr = netip.MustParseAddr("93.184.215.14")

// Resolver answers example.com, example.org, example.net and their
// subdomains with PublicAddr, and "no such host" for anything else.
type Resolver struct{}

// LookupNetIP implements guard.Resolver.
func (Resolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	h := strings.TrimSuffix(strings.ToLower(host), ".")
	for _, d := range []string{"example.com", "example.org", "example.net"} {
		if h == d || strings.HasSuffix(h, "."+d) {
			return []netip.Addr{PublicAddr}, nil
		}
	}
	return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
}
