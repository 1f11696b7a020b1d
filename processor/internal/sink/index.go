package sink

import (
	"context"
	"errors"
	"fmt"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/moraine-data/moraine/pkg/evm"
	schema "github.com/moraine-data/moraine/schemas/clickhouse"
	"github.com/moraine-data/moraine/schemas/record"
)

// The transaction-history tables: transactions_by_hash (migration 9), one row
// per transaction with its detail, and address_lists (migration 8), the per-address lists
// the Data API's transaction endpoints page through. Their rows are built
// from the same decoded records as the block tables and written with them,
// as child rows (before the blocks), versioned by the same offsets. The
// details are protobufs (schemas/proto/moraine/v1/history.proto), marshalled
// when the batch is built.

// indexRow is one address_lists row.
type indexRow struct {
	tx       *txRow
	address  evm.Address
	list     uint8
	position uint32
	sub      uint32
	roles    uint8
	detail   []byte
}

// party is an address of one transaction: its roles, and which of the
// transaction's transfers and internal transactions it sent or received.
type party struct {
	addr      evm.Address
	roles     uint8
	transfers []int
	internals []int
}

// parties collects the parties of one transaction in the order first seen;
// a map takes over once a transaction has many (an airdrop's hundreds of
// transfers).
type parties struct {
	list  []party
	index map[evm.Address]int
}

const partiesScan = 16

func (p *parties) reset() {
	p.list = p.list[:0]
	if p.index != nil {
		clear(p.index)
	}
}

// get returns the party a, added with no role when new.
func (p *parties) get(a evm.Address) *party {
	if len(p.list) > partiesScan {
		if p.index == nil {
			p.index = make(map[evm.Address]int, 64)
		}
		if len(p.index) == 0 {
			for i := range p.list {
				p.index[p.list[i].addr] = i
			}
		}
		if i, ok := p.index[a]; ok {
			return &p.list[i]
		}
		p.index[a] = len(p.list)
	} else {
		for i := range p.list {
			if p.list[i].addr == a {
				return &p.list[i]
			}
		}
	}
	p.list = append(p.list, party{addr: a})
	return &p.list[len(p.list)-1]
}

func (p *parties) add(a evm.Address, role uint8) { p.get(a).roles |= role }

// addIndex builds the transactions_by_hash detail and the address_lists rows
// of one transaction.
func (b *Batch) addIndex(tr *txRow) error {
	tx := tr.tx
	d := &record.TxDetail{
		Type: tx.Type, From: tx.From, To: tx.To, ContractAddress: tx.ContractAddress, Value: tx.Value, Gas: tx.Gas,
		GasPrice: txGasPrice(tx), MaxFeePerGas: tx.MaxFeePerGas, MaxPriorityFeePerGas: tx.MaxPriorityFeePerGas,
		Nonce: tx.Nonce, Input: tx.Input, Status: tx.Status, GasUsed: tx.GasUsed, EffectiveGasPrice: tx.EffectiveGasPrice,
	}
	// address_lists rows carry their block's timestamps (history.proto):
	// the messages nested in a TxDetail do not, so they are set for the
	// row's own marshal and cleared after it.
	ts, tsMs := &tr.b.Timestamp, tr.b.TimestampMilliseconds
	p := &b.parties
	p.reset()
	sender, hasSender := evm.AddressFrom(tx.From)
	if hasSender {
		p.add(sender, schema.RoleSender)
	}
	to := tx.To
	if len(to) == 0 {
		to = tx.ContractAddress
	}
	if a, ok := evm.AddressFrom(to); ok {
		p.add(a, schema.RoleRecipient)
	}
	var errs []error
	for _, l := range tx.Logs {
		token, ok := evm.AddressFrom(l.Address)
		if !ok {
			continue
		}
		var sub uint32
		evm.Transfers(l.Topics, l.Data, func(x evm.Transfer) {
			// x's addresses are arrays of this call: the detail keeps copies.
			t := &record.TokenTransfer{Kind: uint32(x.Kind), Token: l.Address, From: append([]byte(nil), x.From[:]...),
				To: append([]byte(nil), x.To[:]...), LogIndex: l.LogIndex, Value: evm.Decimal(x.Value)}
			if x.TokenID != nil {
				t.TokenId = evm.Decimal(x.TokenID)
			}
			n := len(d.Transfers)
			d.Transfers = append(d.Transfers, t)
			t.BlockTimestamp, t.BlockTimestampMilliseconds = ts, tsMs
			detail := marshal(t, &errs)
			t.BlockTimestamp, t.BlockTimestampMilliseconds = nil, nil
			list := schema.ListERC20
			switch x.Kind {
			case evm.ERC721:
				list = schema.ListERC721
			case evm.ERC1155:
				list = schema.ListERC1155
			}
			r := indexRow{tx: tr, position: l.LogIndex, sub: sub, detail: detail}
			sub++
			b.indexRow(r, x.From, list)
			if x.To != x.From {
				b.indexRow(r, x.To, list)
			}
			b.indexRow(r, token, schema.ListTokenTransfers)
			from := p.get(x.From)
			from.roles |= schema.RoleTransferParty
			from.transfers = append(from.transfers, n)
			if x.To != x.From {
				to := p.get(x.To)
				to.roles |= schema.RoleTransferParty
				to.transfers = append(to.transfers, n)
			}
			p.add(token, schema.RoleToken)
		})
	}
	deploy := func(position uint32, contract, creator []byte) {
		c, _ := evm.AddressFrom(contract)
		dep := &record.Deployment{Contract: contract, Deployer: tx.From, Creator: creator, BlockTimestamp: ts,
			BlockTimestampMilliseconds: tsMs}
		detail := marshal(dep, &errs)
		r := indexRow{tx: tr, position: position, detail: detail}
		b.indexRow(r, c, schema.ListCreation)
		if hasSender {
			b.indexRow(r, sender, schema.ListDeployments)
		}
		if cr, ok := evm.AddressFrom(creator); ok && cr != sender {
			b.indexRow(r, cr, schema.ListDeployments)
		}
	}
	if tx.Status == 1 && len(tx.To) == 0 && len(tx.ContractAddress) == 20 {
		deploy(0, tx.ContractAddress, nil)
	}
	var reverts evm.Reverts
	for _, it := range tx.InternalTransactions {
		reverted := reverts.Next(it.Depth, it.Error)
		if !evm.ListedInternal(it.Depth, it.Type, it.Value) {
			continue
		}
		c := &record.CallDetail{Type: it.Type, From: it.From, To: it.To, Value: it.Value, Gas: it.Gas, GasUsed: it.GasUsed,
			Reverted: reverted}
		n := len(d.InternalTransactions)
		d.InternalTransactions = append(d.InternalTransactions, c)
		c.BlockTimestamp, c.BlockTimestampMilliseconds = ts, tsMs
		detail := marshal(c, &errs)
		c.BlockTimestamp, c.BlockTimestampMilliseconds = nil, nil
		r := indexRow{tx: tr, position: it.TracePosition, detail: detail}
		from, _ := evm.AddressFrom(it.From)
		to, hasTo := evm.AddressFrom(it.To)
		b.indexRow(r, from, schema.ListInternal)
		fp := p.get(from)
		fp.roles |= schema.RoleInternalParty
		fp.internals = append(fp.internals, n)
		if hasTo && to != from {
			b.indexRow(r, to, schema.ListInternal)
			tp := p.get(to)
			tp.roles |= schema.RoleInternalParty
			tp.internals = append(tp.internals, n)
		}
		if !reverted && hasTo && it.Type != "CALL" && it.Type != "CALLCODE" {
			// A contract created inside the transaction (CREATE, CREATE2),
			// deployed by the transaction's sender through the creating
			// contract.
			deploy(it.TracePosition, it.To, it.From)
		}
	}
	// The transactions_by_hash detail carries what the transaction route
	// renders of its block (history.proto).
	d.BlockTimestamp, d.BlockTimestampMilliseconds = ts, tsMs
	d.BlockMinDelayExcess, d.BlockBaseFee = tr.b.MinDelayExcess, tr.b.BaseFee
	tr.lookup = marshal(d, &errs)
	// Each party's row of the transactions list: the transaction (input cut
	// to its selector) with the transfers and internal transactions the
	// party sent or received.
	own := &record.TxDetail{}
	for i := range p.list {
		pa := &p.list[i]
		*own = listedDetail(tx)
		own.BlockTimestamp, own.BlockTimestampMilliseconds = ts, tsMs
		for _, n := range pa.transfers {
			own.Transfers = append(own.Transfers, d.Transfers[n])
		}
		for _, n := range pa.internals {
			own.InternalTransactions = append(own.InternalTransactions, d.InternalTransactions[n])
		}
		detail := marshal(own, &errs)
		b.index = append(b.index, indexRow{tx: tr, address: pa.addr, list: schema.ListTransactions, roles: pa.roles, detail: detail})
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("sink: marshal the history of transaction %x: %w", tx.Hash, err)
	}
	return nil
}

// marshal encodes m, adding its error (none in practice: the generated
// code sizes the buffer first) to errs.
func marshal(m interface{ MarshalVT() ([]byte, error) }, errs *[]error) []byte {
	b, err := m.MarshalVT()
	if err != nil {
		*errs = append(*errs, err)
	}
	return b
}

// indexRow appends r as a row of list for address.
func (b *Batch) indexRow(r indexRow, address evm.Address, list uint8) {
	r.address, r.list = address, list
	b.index = append(b.index, r)
}

const txByHashColumns = "tx_key, entry, version"

// insertTxLookup writes the transactions' rows of transactions_by_hash
// (migration 9): the key is chain, hash and block hash, the entry the
// transaction's place in its block and its detail.
func (w *Writer) insertTxLookup(ctx context.Context, rows []*txRow) error {
	n := min(len(rows), flushRows)
	var (
		version    = make([]uint64, n)
		key, entry = make([]string, n), make([]string, n)
		buf        []byte // the chunk's keys and entries, viewed by key and entry
	)
	return w.sendBlocks(ctx, "transactions_by_hash", txByHashColumns, len(rows), func(batch driver.Batch, lo, hi int) error {
		buf = buf[:0]
		for _, r := range rows[lo:hi] {
			k := schema.NewTxKey(r.b.ChainId, hash32(r.tx.Hash), hash32(r.b.Hash))
			buf = append(buf, k[:]...)
			buf = schema.TxEntryPlace(buf, r.b.Number, r.tx.Index)
			buf = append(buf, r.lookup...)
		}
		at := 0
		for i, r := range rows[lo:hi] {
			entryLen := schema.TxEntryPlaceLen + len(r.lookup)
			key[i] = view(buf[at : at+schema.TxKeyLen])
			at += schema.TxKeyLen
			entry[i] = view(buf[at : at+entryLen])
			at += entryLen
			version[i] = r.version
		}
		// The order matches txByHashColumns.
		return appendColumns(batch, hi-lo, key, entry, version)
	})
}

const listColumns = "list_key, roles, entry, version"

// insertIndex writes the rows of the address lists (address_lists,
// migration 8): the key packs what selects and orders a row, the entry its
// transaction hash and detail.
func (w *Writer) insertIndex(ctx context.Context, rows []indexRow) error {
	n := min(len(rows), flushRows)
	var (
		version    = make([]uint64, n)
		roles      = make([]uint8, n)
		key, entry = make([]string, n), make([]string, n)
		buf        []byte // the chunk's keys and entries, viewed by key and entry
	)
	return w.sendBlocks(ctx, "address_lists", listColumns, len(rows), func(batch driver.Batch, lo, hi int) error {
		buf = buf[:0]
		for i := range hi - lo {
			r := &rows[lo+i]
			b, tx := r.tx.b, r.tx.tx
			p := schema.ListPosition{Block: b.Number, TxIndex: tx.Index, Position: r.position, Sub: r.sub, BlockHash: hash32(b.Hash)}
			k := schema.NewListKey(b.ChainId, r.address, r.list, p)
			buf = append(buf, k[:]...)
			buf = append(buf, fixed32(tx.Hash)...)
			buf = append(buf, r.detail...)
		}
		at := 0
		for i := range hi - lo {
			r := &rows[lo+i]
			entryLen := schema.EntryHashLen + len(r.detail)
			key[i] = view(buf[at : at+schema.ListKeyLen])
			at += schema.ListKeyLen
			entry[i] = view(buf[at : at+entryLen])
			at += entryLen
			roles[i], version[i] = r.roles, r.tx.version
		}
		// The order matches listColumns.
		return appendColumns(batch, hi-lo, key, roles, entry, version)
	})
}

// hash32 is a hash as 32 bytes (padded or cut, as fixed32).
func hash32(b []byte) (h [32]byte) {
	copy(h[:], b)
	return h
}

// listedDetail is tx as the transactions lists hold it (an address's, a
// block's): its input cut to the 4-byte selector and without the fee caps and
// effective price, which only the transaction route shows.
func listedDetail(tx *record.Transaction) record.TxDetail {
	return record.TxDetail{
		Type: tx.Type, From: tx.From, To: tx.To, ContractAddress: tx.ContractAddress, Value: tx.Value, Gas: tx.Gas,
		GasPrice: txGasPrice(tx), Nonce: tx.Nonce, Input: tx.Input[:min(len(tx.Input), 4)], Status: tx.Status,
		GasUsed: tx.GasUsed,
	}
}

// txGasPrice is the gas price the Data API shows: the transaction's, or the
// effective price when a node did not give one.
func txGasPrice(tx *record.Transaction) string {
	if tx.GasPrice != "" {
		return tx.GasPrice
	}
	return tx.EffectiveGasPrice
}
