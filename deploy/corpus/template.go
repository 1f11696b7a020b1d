package corpus

import (
	"bytes"
	"encoding/hex"
	"fmt"
	"strconv"

	"github.com/moraine-data/moraine/deploy/internal/jsonscan"
	"github.com/moraine-data/moraine/deploy/replay"
)

// holeKind is what a template leaves open.
type holeKind uint8

const (
	holeNumber    holeKind = iota + 1 // the block number, a hex quantity
	holeHash                          // the block's hash
	holeParent                        // its parent's hash
	holeTimestamp                     // its timestamp in seconds, a hex quantity
	holeTxHash                        // the hash of transaction tx of the block
)

// segment is a run of recorded bytes followed by a hole (none when kind is 0).
type segment struct {
	lit  []byte
	kind holeKind
	tx   uint32
}

// template is one recorded block (a line of a recording) with every place
// that names its number, hash, parent, time or a transaction hash cut out:
// the block fields number, hash, parentHash and timestamp; each
// transaction's hash, blockHash and blockNumber; each receipt's and each
// log's blockHash, blockNumber and transactionHash; each trace's txHash.
// Everything else, the transactions' contents, addresses, gas, logs' topics
// and data, the call frames, stays as recorded.
type template struct {
	source   string
	number   uint64 // as recorded
	segments []segment
	size     int // bytes of a rendered line, roughly (for buffer sizing)

	txs, logs, frames int
}

// hole is a span of the line to replace.
type hole struct {
	start, end int
	kind       holeKind
	tx         uint32
}

// parseTemplate cuts the holes out of one recorded line.
func parseTemplate(source string, line []byte) (*template, error) {
	t := &template{source: source}
	var holes []hole
	at := func(v []byte, kind holeKind, tx uint32) {
		start := cap(line) - cap(v) // v is a slice of line
		holes = append(holes, hole{start: start, end: start + len(v), kind: kind, tx: tx})
	}
	txIndex := map[string]uint32{} // recorded hash (JSON string) -> position
	var block, receipts, traces []byte
	err := jsonscan.EachField(line, func(key, _, val []byte) error {
		switch string(key) {
		case "block":
			block = val
		case "receipts":
			receipts = val
		case "traces":
			traces = val
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if block == nil {
		return nil, fmt.Errorf("no block")
	}
	haveNumber := false
	err = jsonscan.EachField(block, func(key, _, val []byte) error {
		switch string(key) {
		case "number":
			n, err := strconv.ParseUint(string(bytes.Trim(val, `"`))[2:], 16, 64)
			if err != nil {
				return fmt.Errorf("block number %s: %w", val, err)
			}
			t.number, haveNumber = n, true
			at(val, holeNumber, 0)
		case "hash":
			at(val, holeHash, 0)
		case "parentHash":
			at(val, holeParent, 0)
		case "timestamp":
			at(val, holeTimestamp, 0)
		case "transactions":
			return jsonscan.EachElement(val, func(tx []byte) error {
				i := uint32(len(txIndex))
				if tx[0] == '"' { // a hash only
					txIndex[string(tx)] = i
					at(tx, holeTxHash, i)
					return nil
				}
				return jsonscan.EachField(tx, func(key, _, v []byte) error {
					switch string(key) {
					case "hash":
						txIndex[string(v)] = i
						at(v, holeTxHash, i)
					case "blockHash":
						at(v, holeHash, 0)
					case "blockNumber":
						at(v, holeNumber, 0)
					}
					return nil
				})
			})
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("block: %w", err)
	}
	if !haveNumber {
		return nil, fmt.Errorf("block without number")
	}
	t.txs = len(txIndex)
	txHash := func(v []byte) error {
		i, ok := txIndex[string(v)]
		if !ok {
			return fmt.Errorf("transaction %s is not in the block", v)
		}
		at(v, holeTxHash, i)
		return nil
	}
	// blockRefs handles the fields of a receipt or a log that point back to
	// the block and the transaction.
	blockRefs := func(key, v []byte) error {
		switch string(key) {
		case "blockHash":
			at(v, holeHash, 0)
		case "blockNumber":
			at(v, holeNumber, 0)
		case "transactionHash":
			return txHash(v)
		}
		return nil
	}
	if receipts != nil && string(receipts) != "null" {
		err = jsonscan.EachElement(receipts, func(r []byte) error {
			return jsonscan.EachField(r, func(key, _, v []byte) error {
				if string(key) == "logs" && string(v) != "null" {
					return jsonscan.EachElement(v, func(l []byte) error {
						t.logs++
						return jsonscan.EachField(l, func(key, _, v []byte) error { return blockRefs(key, v) })
					})
				}
				return blockRefs(key, v)
			})
		})
		if err != nil {
			return nil, fmt.Errorf("receipts: %w", err)
		}
	}
	if traces != nil && string(traces) != "null" {
		err = jsonscan.EachElement(traces, func(tr []byte) error {
			return jsonscan.EachField(tr, func(key, _, v []byte) error {
				switch string(key) {
				case "txHash":
					return txHash(v)
				case "result":
					n, err := countFrames(v)
					t.frames += n
					return err
				}
				return nil
			})
		})
		if err != nil {
			return nil, fmt.Errorf("traces: %w", err)
		}
	}
	sortHoles(holes)
	prev := 0
	for _, h := range holes {
		t.segments = append(t.segments, segment{lit: line[prev:h.start], kind: h.kind, tx: h.tx})
		prev = h.end
	}
	t.segments = append(t.segments, segment{lit: line[prev:]})
	t.size = len(line) + 8*len(holes) + 1
	return t, nil
}

// sortHoles orders the holes by position (they are found in order within
// each part of the line, the parts in any order).
func sortHoles(h []hole) {
	for i := 1; i < len(h); i++ {
		for j := i; j > 0 && h[j].start < h[j-1].start; j-- {
			h[j], h[j-1] = h[j-1], h[j]
		}
	}
}

// countFrames counts a callTracer frame and the frames below it.
func countFrames(frame []byte) (int, error) {
	n := 1
	err := jsonscan.EachField(frame, func(key, _, v []byte) error {
		if string(key) != "calls" || string(v) == "null" {
			return nil
		}
		return jsonscan.EachElement(v, func(c []byte) error {
			k, err := countFrames(c)
			n += k
			return err
		})
	})
	return n, err
}

// render appends the template as block number n, with time ts, to dst.
func (t *template) render(dst []byte, s *replay.HashScheme, n, ts uint64) []byte {
	hashOf := func(h replay.Hash) []byte {
		dst = append(dst, '"', '0', 'x')
		dst = hex.AppendEncode(dst, h[:])
		return append(dst, '"')
	}
	quantity := func(v uint64) []byte {
		dst = append(dst, '"', '0', 'x')
		dst = strconv.AppendUint(dst, v, 16)
		return append(dst, '"')
	}
	// The block's own hash appears once per transaction, receipt and log:
	// encrypt it once.
	self, parent := s.Block(n), s.Block(n-1)
	for _, seg := range t.segments {
		dst = append(dst, seg.lit...)
		switch seg.kind {
		case holeNumber:
			dst = quantity(n)
		case holeHash:
			dst = hashOf(self)
		case holeParent:
			dst = hashOf(parent)
		case holeTimestamp:
			dst = quantity(ts)
		case holeTxHash:
			dst = hashOf(s.Tx(n, seg.tx))
		}
	}
	return dst
}
