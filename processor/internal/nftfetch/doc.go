// Package nftfetch turns one NFT's metadata URI (what tokenURI(id) or
// uri(id) returned) into its metadata document and an indexStatus of the
// spec's NftTokenMetadataStatus: it resolves the URI, fetches the document
// under the SSRF policy of package guard with bounded size, time and
// concurrency per host, and reads the fields the API renders.
//
// What stays with the caller (the metadata worker): reading the URI from
// the node (and the statuses that come from that answer: MISSING_TOKEN,
// UNKNOWN, INVALID_TOKEN_URI for a non-string), when to retry, and storing
// the result.
//
// # URIs
//
//	http://, https://   fetched; redirects followed (at most MaxRedirects, to http(s) only), each hop under the policy
//	ipfs://CID/path     fetched from Config.IPFSGateway + CID/path (ipfs://ipfs/CID/path too)
//	data:[type][;base64],DATA   decoded in place (base64, or percent-encoded/plain text)
//	{id} in an ERC-1155 URI     replaced by the token id as 64 lowercase hex digits (EIP-1155)
//
// # Statuses (the spec's NftTokenMetadataStatus) set here
//
//	INVALID_TOKEN_URI           empty, not UTF-8, white space or control characters, not an absolute URI, an
//	                            ipfs:// without a CID, a data: URI that does not decode
//	INVALID_TOKEN_URI_SCHEME    an absolute URI whose scheme is none of the above (ar://, ipns://, ftp://, file://, ...)
//	UNREACHABLE_TOKEN_URI       refused by the policy (an internal address: final), or no answer, DNS or
//	                            connection failure, timeout, HTTP 5xx or 408 (retried), or another HTTP status
//	                            that is not 2xx (404, 403, a redirect loop: final)
//	THROTTLED_TOKEN_URI         HTTP 429 (retried)
//	METADATA_CONTENT_TOO_LARGE  a document (Content-Length, the bytes read, or a data: URI) over MaxBytes
//	INVALID_METADATA_JSON       the document is not JSON
//	INVALID_METADATA            JSON, but not an object with at least one metadata field of the right type
//	                            (name, description, image, image_url, animation_url, external_url,
//	                            background_color, attributes, properties)
//	INDEXED                     a metadata document
//
// Result.Retry marks the transient failures above; Result.Deferred a fetch
// not made because its host was busy beyond HostQueueTimeout (it costs no
// attempt: the worker parks it on its first retry level).
//
// # The policy
//
// Every host is checked as webhook URLs are (guard.CheckURL: names and
// resolved addresses), and every connection on the address it dials
// (guard.Dialer: DNS rebinding), unless AllowPrivateTargets; with one
// exception: the configured IPFS gateway, when it serves an ipfs:// URI, is
// dialled without the policy, since it is the operator's choice (it may
// well be a node on a private address). An http(s) token URI that names the
// gateway's host is checked like any other, and so are the hosts the
// gateway redirects to. No proxy from the environment is used.
package nftfetch
