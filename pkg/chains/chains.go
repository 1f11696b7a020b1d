// Package chains loads the chain configuration file: which EVM chains moraine
// indexes and serves, how to reach their nodes, and what each supports.
//
// The file is JSON (see deploy/chains/*.json):
//
//	{"chains": [{"evmChainId": "43112", "blockchainId": "...", "name": "...", "rpcUrls": ["http://..."], ...}]}
//
// Chains are configuration, never code: pointing moraine at a real node is a
// matter of adding an entry.
package chains

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// Token is a chain's native token.
type Token struct {
	Name        string `json:"name"`
	Symbol      string `json:"symbol"`
	Decimals    int    `json:"decimals"`
	LogoURI     string `json:"logoUri,omitempty"`
	Description string `json:"description,omitempty"`
}

// Chain is one configured chain.
type Chain struct {
	// EVMChainID is the decimal EVM chain id ("43114").
	EVMChainID string `json:"evmChainId"`
	// BlockchainID is the base58 Avalanche blockchain id (platformChainId);
	// optional for non-Avalanche chains.
	BlockchainID string `json:"blockchainId,omitempty"`
	Name         string `json:"name"`
	Description  string `json:"description,omitempty"`
	// Network is mainnet, fuji or testnet (or devnet for local chains); it
	// drives the ?network= filter and isTestnet.
	Network string `json:"network"`
	// Nodes are the chain's JSON-RPC endpoints (rpcUrls): each entry is a
	// URL, or an object with the URL and that node's limits (Node). Ingest
	// and every other reader use all of them (package pkg/rpc's Pool).
	Nodes []Node `json:"rpcUrls"`
	// RPCURLs are the URLs of Nodes, filled by Parse (kept for code that
	// only needs the addresses). Code that builds a Chain by hand may set
	// either; RPCNodes reads Nodes first.
	RPCURLs     []string `json:"-"`
	WSURL       string   `json:"wsUrl,omitempty"`
	PublicRPC   string   `json:"publicRpcUrl,omitempty"`
	ExplorerURL string   `json:"explorerUrl,omitempty"`
	LogoURI     string   `json:"chainLogoUri,omitempty"`
	SubnetID    string   `json:"subnetId,omitempty"`
	VMID        string   `json:"vmId,omitempty"`
	VMName      string   `json:"vmName,omitempty"`
	Private     bool     `json:"private,omitempty"`
	Multicall   string   `json:"multicallAddress,omitempty"`
	NativeToken Token    `json:"networkToken"`
	// Traces enables debug_traceBlockByNumber (callTracer) during ingest.
	Traces bool `json:"traces"`
	// Webhooks allows address-activity webhooks on the chain.
	Webhooks bool `json:"webhooks"`
	// Features lists extra ApiFeature values to advertise (nftIndexing, teleporter).
	Features []string `json:"features,omitempty"`
	// StartBlock is the first block ingest indexes.
	StartBlock uint64 `json:"startBlock"`
	// StartCumulativeTransactions is the transaction count of the chain
	// before StartBlock (0 when indexing from genesis).
	StartCumulativeTransactions uint64 `json:"startCumulativeTransactions,omitempty"`
	// Replay marks a recorded, possibly non-contiguous source: parent hashes
	// of consecutive blocks need not link and that is not a reorg.
	Replay bool `json:"replay,omitempty"`
	// SkipChecks relaxes ingest's verification of each block for a chain
	// whose nodes are known to answer differently (values: Checks): e.g.
	// "transactionsRoot" for a node that returns transactions without their
	// real signatures. docs/nodes.md says what each check catches.
	SkipChecks []string `json:"skipChecks,omitempty"`
}

// The checks ingest makes on every block before producing it (SkipChecks).
const (
	// CheckReceiptsRoot recomputes the header's receiptsRoot from the
	// receipts (status, cumulative gas, logs): a missing log or receipt
	// fails it.
	CheckReceiptsRoot = "receiptsRoot"
	// CheckLogsBloom recomputes the header's logsBloom from the logs.
	CheckLogsBloom = "logsBloom"
	// CheckTransactionsRoot recomputes the header's transactionsRoot from
	// the signed transactions.
	CheckTransactionsRoot = "transactionsRoot"
	// CheckTraces requires one call trace per transaction, for the same
	// transactions in the same order.
	CheckTraces = "traces"
)

// Checks lists every check SkipChecks may name.
var Checks = []string{CheckReceiptsRoot, CheckLogsBloom, CheckTransactionsRoot, CheckTraces}

// Checked reports whether ingest verifies check on this chain.
func (c Chain) Checked(check string) bool {
	for _, s := range c.SkipChecks {
		if s == check {
			return false
		}
	}
	return true
}

// Node is one JSON-RPC endpoint of a chain and what it may be asked. In the
// chains file it is either a bare URL string or an object:
//
//	{"url": "https://host/key", "name": "hosted", "requestsPerSecond": 25, "maxConcurrency": 4, "maxBatch": 30}
//
// Zero limits mean "no limit of its own": the pool then adapts concurrency
// to the node's answers (429s, rising latency) up to its default ceiling.
type Node struct {
	URL string `json:"url"`
	// Name labels the node's metrics and status lines; default its position
	// in rpcUrls ("0", "1", ...). URLs never become labels: they can hold
	// API keys.
	Name string `json:"name,omitempty"`
	// RequestsPerSecond caps the calls sent per second (each call of a
	// batch counts, as providers count them).
	RequestsPerSecond float64 `json:"requestsPerSecond,omitempty"`
	// MaxConcurrency caps the HTTP requests in flight to the node.
	MaxConcurrency int `json:"maxConcurrency,omitempty"`
	// MaxBatch caps the calls in one JSON-RPC batch; larger batches are
	// split.
	MaxBatch int `json:"maxBatch,omitempty"`
}

// UnmarshalJSON reads a bare URL string or a Node object (unknown fields
// are errors, as in the rest of the file).
func (n *Node) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if len(b) > 0 && b[0] == '"' {
		*n = Node{}
		return json.Unmarshal(b, &n.URL)
	}
	type plain Node
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var p plain
	if err := dec.Decode(&p); err != nil {
		return fmt.Errorf("rpcUrls entry: %w", err)
	}
	*n = Node(p)
	return nil
}

// RPCNodes returns the chain's nodes with their names filled in: Nodes, or
// one node per RPCURLs entry when only those were set (a Chain built in
// code).
func (c Chain) RPCNodes() []Node {
	nodes := c.Nodes
	if len(nodes) == 0 {
		for _, u := range c.RPCURLs {
			nodes = append(nodes, Node{URL: u})
		}
	}
	out := make([]Node, len(nodes))
	for i, n := range nodes {
		if n.Name == "" {
			n.Name = strconv.Itoa(i)
		}
		out[i] = n
	}
	return out
}

// ID returns the EVM chain id as a number.
func (c Chain) ID() uint64 {
	n, _ := strconv.ParseUint(c.EVMChainID, 10, 64)
	return n
}

// IsTestnet reports whether the chain is not a mainnet chain.
func (c Chain) IsTestnet() bool { return c.Network != "mainnet" }

// EnabledFeatures is the ApiFeature list of /v1/chains.
func (c Chain) EnabledFeatures() []string {
	out := append([]string(nil), c.Features...)
	if c.Webhooks {
		out = append(out, "webhooks")
	}
	return out
}

// Config is the whole file.
type Config struct {
	Chains []Chain `json:"chains"`
}

var (
	decimalID = regexp.MustCompile(`^[1-9][0-9]{0,18}$`)
	base58ID  = regexp.MustCompile(`^[1-9A-HJ-NP-Za-km-z]{40,60}$`)
	nodeName  = regexp.MustCompile(`^[A-Za-z0-9._-]{1,32}$`)
	networks  = map[string]bool{"mainnet": true, "fuji": true, "testnet": true, "devnet": true}
	features  = map[string]bool{"nftIndexing": true, "webhooks": true, "teleporter": true}
)

// Load reads and validates a chain file.
func Load(path string) (*Config, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("chains: %w", err)
	}
	return Parse(b)
}

// Parse decodes and validates a chain file; unknown fields are errors so a
// typo does not silently drop a setting.
func Parse(b []byte) (*Config, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var c Config
	if err := dec.Decode(&c); err != nil {
		return nil, fmt.Errorf("chains: %w", err)
	}
	for i := range c.Chains {
		c.Chains[i].RPCURLs = nil
		for _, n := range c.Chains[i].Nodes {
			c.Chains[i].RPCURLs = append(c.Chains[i].RPCURLs, n.URL)
		}
	}
	return &c, c.Validate()
}

// Validate checks every chain and rejects duplicate ids.
func (c *Config) Validate() error {
	var errs []error
	seen := map[string]bool{}
	for i, ch := range c.Chains {
		where := fmt.Sprintf("chains[%d] (%s)", i, ch.EVMChainID)
		if !decimalID.MatchString(ch.EVMChainID) {
			errs = append(errs, fmt.Errorf("%s: evmChainId must be a decimal chain id", where))
		}
		if ch.BlockchainID != "" && !base58ID.MatchString(ch.BlockchainID) {
			errs = append(errs, fmt.Errorf("%s: blockchainId must be a base58 id", where))
		}
		for _, id := range []string{ch.EVMChainID, ch.BlockchainID} {
			if id != "" && seen[id] {
				errs = append(errs, fmt.Errorf("%s: id %s is configured twice", where, id))
			}
			seen[id] = true
		}
		if ch.Name == "" {
			errs = append(errs, fmt.Errorf("%s: name is required", where))
		}
		if !networks[ch.Network] {
			errs = append(errs, fmt.Errorf("%s: network must be mainnet, fuji, testnet or devnet", where))
		}
		nodes := ch.RPCNodes()
		if len(nodes) == 0 {
			errs = append(errs, fmt.Errorf("%s: rpcUrls needs at least one URL", where))
		}
		names := map[string]bool{}
		urls := []string{ch.WSURL}
		for j, n := range nodes {
			urls = append(urls, n.URL)
			switch {
			case !nodeName.MatchString(n.Name):
				errs = append(errs, fmt.Errorf("%s: rpcUrls[%d]: name %q must be 1-32 letters, digits, '.', '_' or '-'", where, j, n.Name))
			case names[n.Name]:
				errs = append(errs, fmt.Errorf("%s: rpcUrls[%d]: name %q is used twice", where, j, n.Name))
			}
			names[n.Name] = true
			if n.RequestsPerSecond < 0 || n.MaxConcurrency < 0 || n.MaxBatch < 0 {
				errs = append(errs, fmt.Errorf("%s: rpcUrls[%d]: limits must not be negative", where, j))
			}
		}
		for _, s := range ch.SkipChecks {
			if !slices.Contains(Checks, s) {
				errs = append(errs, fmt.Errorf("%s: skipChecks: unknown check %q (known: %s)", where, s, strings.Join(Checks, ", ")))
			}
		}
		for _, u := range urls {
			if u == "" {
				continue
			}
			p, err := url.Parse(u)
			if err != nil || p.Host == "" || !strings.HasPrefix(p.Scheme, "http") && !strings.HasPrefix(p.Scheme, "ws") {
				errs = append(errs, fmt.Errorf("%s: %q is not an http(s) or ws(s) URL", where, u))
			}
		}
		if ch.NativeToken.Symbol == "" || ch.NativeToken.Name == "" {
			errs = append(errs, fmt.Errorf("%s: networkToken name and symbol are required", where))
		}
		for _, f := range ch.Features {
			if !features[f] {
				errs = append(errs, fmt.Errorf("%s: unknown feature %q", where, f))
			}
		}
	}
	return errors.Join(errs...)
}

// Find returns the chain whose EVM chain id or blockchain id is id.
func (c *Config) Find(id string) (Chain, bool) {
	for _, ch := range c.Chains {
		if ch.EVMChainID == id || (ch.BlockchainID != "" && ch.BlockchainID == id) {
			return ch, true
		}
	}
	return Chain{}, false
}

// RegisterFlag adds --chains.file.
func RegisterFlag(fs *flag.FlagSet, p *string) {
	fs.StringVar(p, "chains.file", "deploy/chains/dev.json", "chain configuration file (JSON)")
}
