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
	Network     string   `json:"network"`
	RPCURLs     []string `json:"rpcUrls"`
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
		if len(ch.RPCURLs) == 0 {
			errs = append(errs, fmt.Errorf("%s: rpcUrls needs at least one URL", where))
		}
		for _, u := range append(append([]string(nil), ch.RPCURLs...), ch.WSURL) {
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
