// Package nftdiscover is `moraine-admin nft discover`: it asks the NFT
// metadata worker for the NFTs of blocks that the processor's discovery
// never read, blocks indexed before it ran (older than the blocks topic's
// seven days of retention when a deployment upgrades, or indexed with
// --nft.enabled=false). It reads the ERC-721 Transfer and ERC-1155
// TransferSingle/TransferBatch logs of ClickHouse's logs table in windows
// of blocks, decodes them as discovery does (pkg/evm.Transfers), and
// produces one discovery request per NFT to moraine.nft-metadata.
//
// It is safe to run at any time and more than once: the worker skips every
// NFT it has stored. Logs of blocks that a reorg orphaned are not told
// apart (the logs table keeps them): their NFTs are asked too, and a token
// the chain does not have ends as MISSING_TOKEN.
package nftdiscover

import (
	"context"
	"encoding/hex"
	"fmt"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/moraine-data/moraine/pkg/chclient"
	"github.com/moraine-data/moraine/pkg/evm"
	"github.com/moraine-data/moraine/pkg/nftmeta"
	"github.com/moraine-data/moraine/schemas/codec"
	"github.com/moraine-data/moraine/schemas/record"
)

// qTransfers reads the token-transfer logs of a block range; topic0 is
// stored as raw bytes.
var qTransfers = `SELECT block_number, address, topic0, topic1, topic2, topic3, data
FROM logs
WHERE chain_id = ? AND block_number >= ? AND block_number <= ?
  AND topic0 IN (unhex('` + hex.EncodeToString(evm.TopicTransfer[:]) + `'), unhex('` + hex.EncodeToString(evm.TopicTransferSingle[:]) +
	`'), unhex('` + hex.EncodeToString(evm.TopicTransferBatch[:]) + `'))
  AND topic3 != ''`

// qHead is the chain's indexed head.
const qHead = `SELECT number FROM chain_heads FINAL WHERE chain_id = ?`

// Options say what to read.
type Options struct {
	ChainID uint64
	// From and To bound the blocks (To 0: the indexed head).
	From, To uint64
	// Window is the number of blocks read at a time (100,000 when 0).
	Window uint64
	// Timeout bounds each window's read (2 min when 0).
	Timeout time.Duration
	// Progress, when set, is called after each window.
	Progress func(Result)
}

// Result counts what Run did.
type Result struct {
	// Through is the last block read.
	Through uint64
	// Logs are the transfer logs read, Requests the requests produced
	// (one per NFT and window).
	Logs, Requests int
}

// Run reads the range window by window and produces the requests with cl
// (a producer whose default topic is moraine.nft-metadata, with the
// deployment's prefix); each window's requests are acknowledged before the
// next is read.
func Run(ctx context.Context, conn driver.Conn, cl *kgo.Client, o Options) (Result, error) {
	var res Result
	if o.Window == 0 {
		o.Window = 100_000
	}
	if o.Timeout <= 0 {
		o.Timeout = 2 * time.Minute
	}
	if o.To == 0 {
		if err := conn.QueryRow(ctx, qHead, o.ChainID).Scan(&o.To); err != nil {
			return res, fmt.Errorf("nft discover: chain %d has no indexed head: %w", o.ChainID, err)
		}
	}
	now := time.Now().UnixMilli()
	for from := o.From; from <= o.To; from += o.Window {
		to := min(from+o.Window-1, o.To)
		n, recs, err := window(ctx, conn, o, from, to, now)
		if err != nil {
			return res, err
		}
		if len(recs) > 0 {
			if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
				return res, fmt.Errorf("nft discover: produce: %w", err)
			}
		}
		res.Through, res.Logs, res.Requests = to, res.Logs+n, res.Requests+len(recs)
		if o.Progress != nil {
			o.Progress(res)
		}
		if to == o.To {
			break
		}
	}
	return res, nil
}

// window reads one block range and builds its requests, one per NFT.
func window(ctx context.Context, conn driver.Conn, o Options, from, to uint64, now int64) (int, []*kgo.Record, error) {
	ctx, cancel := chclient.WithTimeout(ctx, o.Timeout, nil)
	defer cancel()
	rows, err := conn.Query(ctx, qTransfers, o.ChainID, from, to)
	if err != nil {
		return 0, nil, fmt.Errorf("nft discover: read logs %d..%d: %w", from, to, err)
	}
	defer rows.Close()
	seen := map[nftmeta.Ref]bool{}
	var out []*kgo.Record
	n := 0
	for rows.Next() {
		var (
			block                         uint64
			address, t0, t1, t2, t3, data string
		)
		if err := rows.Scan(&block, &address, &t0, &t1, &t2, &t3, &data); err != nil {
			return 0, nil, fmt.Errorf("nft discover: read logs %d..%d: %w", from, to, err)
		}
		n++
		contract, ok := evm.AddressFrom([]byte(address))
		if !ok {
			continue
		}
		evm.Transfers([][]byte{[]byte(t0), []byte(t1), []byte(t2), []byte(t3)}, []byte(data), func(t evm.Transfer) {
			if t.Kind != evm.ERC721 && t.Kind != evm.ERC1155 {
				return
			}
			ref := nftmeta.Ref{ChainID: o.ChainID, Contract: contract, TokenID: nftmeta.TokenIDFromWord(t.TokenID)}
			if seen[ref] {
				return
			}
			seen[ref] = true
			standard := uint32(721)
			if t.Kind == evm.ERC1155 {
				standard = 1155
			}
			val, err := codec.EncodeNftMetadataRequest(&record.NftMetadataRequest{ChainId: o.ChainID, Contract: ref.Contract[:],
				TokenId: ref.TokenID, Standard: standard, SeenBlock: block, Reason: record.NftMetadataRequest_REASON_DISCOVERED,
				RequestedAtUnixMs: now, Attempt: 1})
			if err != nil {
				return
			}
			out = append(out, &kgo.Record{Key: codec.NftMetadataKey(o.ChainID, ref.Contract[:], ref.TokenID), Value: val,
				Headers: []kgo.RecordHeader{{Key: codec.SchemaHeader, Value: []byte(codec.NftMetadataRequestSchema)}}})
		})
	}
	if err := rows.Err(); err != nil {
		return 0, nil, fmt.Errorf("nft discover: read logs %d..%d: %w", from, to, err)
	}
	return n, out, nil
}
