package nftfetch

import (
	"encoding/base64"
	"fmt"
	"math/big"
	"net/url"
	"strings"
	"unicode/utf8"

	"github.com/moraine-data/moraine/pkg/nftmeta"
)

// location is where a URI's document is.
type location struct {
	scheme string // http, https, ipfs, data: the metric label
	url    *url.URL
	inline []byte // data: the document itself
}

// failure is a status decided before or without fetching.
type failure struct {
	status, detail string
}

func (f *failure) Error() string { return f.status + ": " + f.detail }

// SubstituteID replaces every "{id}" of an ERC-1155 URI with the token id
// as 64 lowercase hex digits, without 0x (EIP-1155 "ID substitution").
func SubstituteID(uri string, id *big.Int) string {
	if !strings.Contains(uri, "{id}") {
		return uri
	}
	return strings.ReplaceAll(uri, "{id}", fmt.Sprintf("%064x", id))
}

// resolve reads a token URI: where to fetch its document, or the status of
// a URI that cannot lead to one.
func (f *Fetcher) resolve(raw string) (location, *failure) {
	invalid := func(why string) (location, *failure) {
		return location{}, &failure{nftmeta.StatusInvalidTokenURI, why}
	}
	switch {
	case raw == "":
		return invalid("empty token URI")
	case !utf8.ValidString(raw):
		return invalid("token URI is not UTF-8")
	}
	trimmed := strings.TrimSpace(raw)
	if i := strings.IndexByte(trimmed, ':'); i > 0 && strings.EqualFold(trimmed[:i], "data") {
		return f.resolveData(trimmed)
	}
	for _, r := range raw {
		if r <= ' ' || r == 0x7f {
			return invalid("token URI holds white space or control characters")
		}
	}
	u, err := url.Parse(raw)
	if err != nil {
		return invalid("token URI does not parse: " + err.Error())
	}
	if u.Scheme == "" {
		return invalid("token URI is not an absolute URI")
	}
	switch strings.ToLower(u.Scheme) {
	case "http", "https":
		if u.Host == "" || u.Opaque != "" {
			return invalid("http(s) token URI without a host")
		}
		return location{scheme: strings.ToLower(u.Scheme), url: u}, nil
	case "ipfs":
		return f.resolveIPFS(u)
	}
	return location{}, &failure{nftmeta.StatusInvalidTokenURIScheme, fmt.Sprintf("unsupported token URI scheme %q", u.Scheme)}
}

// resolveIPFS maps ipfs://CID/path (or ipfs://ipfs/CID/path) to the gateway.
func (f *Fetcher) resolveIPFS(u *url.URL) (location, *failure) {
	rest := u.Host + u.EscapedPath()
	if u.Opaque != "" {
		rest = strings.TrimLeft(u.Opaque, "/")
	}
	rest = strings.TrimPrefix(rest, "ipfs/")
	cid, path, _ := strings.Cut(rest, "/")
	if cid == "" {
		return location{}, &failure{nftmeta.StatusInvalidTokenURI, "ipfs:// token URI without a CID"}
	}
	for _, c := range cid {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z') {
			return location{}, &failure{nftmeta.StatusInvalidTokenURI, "ipfs:// token URI with a malformed CID"}
		}
	}
	target, err := url.Parse(f.gateway.String() + cid + "/" + path)
	if path == "" {
		target, err = url.Parse(f.gateway.String() + cid)
	}
	if err != nil {
		return location{}, &failure{nftmeta.StatusInvalidTokenURI, "ipfs:// token URI: " + err.Error()}
	}
	target.RawQuery = u.RawQuery
	return location{scheme: "ipfs", url: target}, nil
}

// resolveData decodes data:[<media type>][;base64],<data> (RFC 2397). The
// non-base64 form is percent-decoded when it decodes; on-chain generators
// often put raw JSON there, percent signs included, which is then kept as
// it is.
func (f *Fetcher) resolveData(raw string) (location, *failure) {
	header, payload, ok := strings.Cut(raw[len("data:"):], ",")
	if !ok {
		return location{}, &failure{nftmeta.StatusInvalidTokenURI, "data: token URI without a comma"}
	}
	isBase64 := false
	for _, p := range strings.Split(header, ";")[1:] {
		if strings.EqualFold(strings.TrimSpace(p), "base64") {
			isBase64 = true
		}
	}
	if isBase64 {
		payload = strings.Map(func(r rune) rune {
			if r == ' ' || r == '\n' || r == '\r' || r == '\t' {
				return -1
			}
			return r
		}, payload)
		if unesc, err := url.PathUnescape(payload); err == nil {
			payload = unesc // base64 with %2B / %3D escapes
		}
		if base64.StdEncoding.DecodedLen(len(payload)) > f.cfg.MaxBytes+3 {
			return location{}, &failure{nftmeta.StatusMetadataContentTooLarge, fmt.Sprintf("data: document over %d bytes", f.cfg.MaxBytes)}
		}
		for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
			if b, err := enc.DecodeString(payload); err == nil {
				return f.inline(b)
			}
		}
		return location{}, &failure{nftmeta.StatusInvalidTokenURI, "data: token URI with invalid base64"}
	}
	if unesc, err := url.PathUnescape(payload); err == nil {
		payload = unesc
	}
	return f.inline([]byte(payload))
}

func (f *Fetcher) inline(b []byte) (location, *failure) {
	if len(b) > f.cfg.MaxBytes {
		return location{}, &failure{nftmeta.StatusMetadataContentTooLarge, fmt.Sprintf("data: document of %d bytes, over %d", len(b), f.cfg.MaxBytes)}
	}
	return location{scheme: "data", inline: b}, nil
}
