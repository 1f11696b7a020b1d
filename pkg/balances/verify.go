package balances

import (
	"context"
	"encoding/hex"
	"errors"
	"log/slog"
	"math/big"
	"math/rand/v2"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/moraine-data/moraine/pkg/evm"
	"github.com/moraine-data/moraine/pkg/obs"
	schema "github.com/moraine-data/moraine/schemas/clickhouse"
)

// VerifierConfig tunes the verifier.
type VerifierConfig struct {
	// Interval is the time between rounds; 0 turns the verifier off.
	Interval time.Duration
	// Samples is how many (holder, token) pairs a round checks per chain.
	Samples int
	// Depth is how far below the indexed head the checked block is: deep
	// enough that no reorg is in flight there (at least ingest's
	// --ingest.reorg-window), so the node and moraine talk about the same
	// block.
	Depth uint64
}

// Verifier checks served balances against the chain's node: every round,
// per chain, it samples holders and tokens that moved near a settled block
// and compares what moraine serves at that block (Reader, Native) with the
// node's balanceOf / ownerOf / eth_getBalance at the same block. The
// counts are its metric:
//
//	moraine_<subsystem>_balance_checks_total{kind,result}
//
// kind: erc20, erc721, erc1155, native; result: match, mismatch, partial
// (an opening balance unknown: not comparable), no_answer (the node
// cannot say: a reverting balanceOf, a pruned block), error. A mismatch is
// logged with the holder, token, block and both amounts. A standard token
// never mismatches; tokens whose balances move without Transfer logs
// (rebasing, interest-bearing, fee-on-transfer with a fee not logged) do:
// docs/balances.md, "Non-standard tokens".
type Verifier struct {
	cfg        VerifierConfig
	db         DB
	reader     *Reader
	node       Node
	native     *Native
	nativeNode NativeNode
	heads      func(context.Context) (map[uint64]uint64, error)
	logger     *slog.Logger
	checks     *prometheus.CounterVec
	rng        *rand.Rand
}

// VerifierDeps are what a verifier compares: the served balances (Reader,
// Native), the node's (Node, NativeNode), the rows it samples from (DB),
// and the indexed heads.
type VerifierDeps struct {
	DB         DB
	Reader     *Reader
	Node       Node
	Native     *Native
	NativeNode NativeNode
	Heads      func(context.Context) (map[uint64]uint64, error)
	Logger     *slog.Logger
	Registerer prometheus.Registerer
	// Subsystem names the service in the metric's name.
	Subsystem string
}

// NewVerifier returns a verifier; it does no I/O until Run.
func NewVerifier(cfg VerifierConfig, d VerifierDeps) *Verifier {
	f := obs.NewMetrics(d.Registerer, d.Subsystem)
	v := &Verifier{cfg: cfg, db: d.DB, reader: d.Reader, node: d.Node, native: d.Native, nativeNode: d.NativeNode,
		heads: d.Heads, logger: d.Logger, rng: rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 7)),
		checks: f.CounterVec("balance_checks_total", "Served balances compared with the chain's node at the same block, by kind (erc20, erc721, erc1155, native) and result (match, mismatch, partial, no_answer, error).", "kind", "result")}
	for _, k := range []string{"erc20", "erc721", "erc1155", "native"} {
		for _, r := range []string{"match", "mismatch"} {
			v.checks.WithLabelValues(k, r)
		}
	}
	return v
}

// Run checks a round every Interval until ctx ends.
func (v *Verifier) Run(ctx context.Context) error {
	if v.cfg.Interval <= 0 {
		return nil
	}
	for obs.Sleep(ctx, v.cfg.Interval) {
		if err := v.Round(ctx); err != nil && ctx.Err() == nil {
			v.logger.Warn("balances: verification round failed", "err", err)
		}
	}
	return nil
}

// Round checks every chain once.
func (v *Verifier) Round(ctx context.Context) error {
	heads, err := v.heads(ctx)
	if err != nil {
		return err
	}
	var errs []error
	for chainID, head := range heads {
		if head < v.cfg.Depth {
			continue
		}
		errs = append(errs, v.chain(ctx, chainID, head-v.cfg.Depth))
	}
	return errors.Join(errs...)
}

// qSample reads n level-0 keys of a key range at random, one per (holder,
// pair): the holder is bytes 18 to 37 of the key, the pair the 53 after
// it; the order is a hash of the key seeded by the round.
const qSample = `SELECT bal_key
FROM balances
WHERE bal_key >= unhex(?) AND bal_key <= unhex(?)
ORDER BY cityHash64(bal_key, ?)
LIMIT 1 BY substring(bal_key, 18, 73)
LIMIT ?`

// sample returns up to n (holder, pair) keys of deltas near block b, at
// random among those of b's level-1 bucket and the bucket before (a read of
// their rows, once a round).
func (v *Verifier) sample(ctx context.Context, chainID, b uint64, n int) ([]schema.BalanceKey, error) {
	const name = "balance_sample"
	first := b >> schema.BucketBits
	if first > 0 {
		first--
	}
	from, _ := schema.BalancePrefixRange(schema.BalanceParentPrefix(chainID, schema.BalanceLevelDelta, first))
	_, to := schema.BalancePrefixRange(schema.BalanceParentPrefix(chainID, schema.BalanceLevelDelta, b>>schema.BucketBits))
	rows, done, err := v.db.Query(ctx, name, nil, qSample, hex.EncodeToString(from[:]), hex.EncodeToString(to[:]), v.rng.Uint64(), n)
	if err != nil {
		return nil, err
	}
	defer done()
	var out []schema.BalanceKey
	err = each(name, rows, func() error {
		var key string
		if err := rows.Scan(&key); err != nil {
			return scanErr(name, err)
		}
		k, err := schema.ParseBalanceKey(key)
		if err != nil {
			return err
		}
		out = append(out, k)
		return nil
	})
	return out, err
}

var kindNames = map[uint8]string{uint8(evm.ERC20): "erc20", uint8(evm.ERC721): "erc721", uint8(evm.ERC1155): "erc1155"}

// chain checks samples of one chain at block b.
func (v *Verifier) chain(ctx context.Context, chainID, b uint64) error {
	keys, err := v.sample(ctx, chainID, b, v.cfg.Samples)
	if err != nil {
		return err
	}
	holders := map[evm.Address]bool{}
	for _, k := range keys {
		holder, pair := evm.Address(k.Holder()), k.Pair()
		holders[holder] = true
		kind := kindNames[pair.Kind]
		res, err := v.reader.At(ctx, Query{ChainID: chainID, Holder: holder, Block: b, Kinds: []uint8{pair.Kind}, Tokens: []evm.Address{pair.Token}})
		if err != nil {
			v.checks.WithLabelValues(kind, "error").Inc()
			continue
		}
		served, partial := new(big.Int), false
		for _, h := range res.Holdings {
			if h.BalancePair == pair {
				served, partial = h.Balance, h.Partial
			}
		}
		if partial {
			v.checks.WithLabelValues(kind, "partial").Inc()
			continue
		}
		got, err := v.node.BalancesAt(ctx, chainID, holder, b, []schema.BalancePair{pair})
		switch {
		case err != nil:
			v.checks.WithLabelValues(kind, "error").Inc()
			continue
		case got[0] == nil:
			v.checks.WithLabelValues(kind, "no_answer").Inc()
			continue
		}
		v.compare(kind, chainID, b, holder, pair, served, got[0])
	}
	for holder := range holders {
		served, err := v.native.At(ctx, chainID, holder, b, true)
		if err == nil {
			var node *big.Int
			if node, err = v.nativeNode.NativeBalance(ctx, chainID, holder, b); err == nil {
				v.compare("native", chainID, b, holder, schema.BalancePair{}, served, node)
				continue
			}
		}
		if errors.Is(err, ErrNoState) {
			v.checks.WithLabelValues("native", "no_answer").Inc()
		} else {
			v.checks.WithLabelValues("native", "error").Inc()
		}
	}
	return nil
}

func (v *Verifier) compare(kind string, chainID, b uint64, holder evm.Address, pair schema.BalancePair, served, node *big.Int) {
	if served.Cmp(node) == 0 {
		v.checks.WithLabelValues(kind, "match").Inc()
		return
	}
	v.checks.WithLabelValues(kind, "mismatch").Inc()
	v.logger.Warn("balances: served balance differs from the node's", "chain_id", chainID, "block", b, "kind", kind,
		"holder", holder.Checksum(), "token", evm.Address(pair.Token).Checksum(), "token_id", evm.Decimal(pair.TokenID[:]),
		"served", served.String(), "node", node.String())
}
