package sink

import (
	"context"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/moraine-data/moraine/pkg/evm"
	schema "github.com/moraine-data/moraine/schemas/clickhouse"
	"github.com/moraine-data/moraine/schemas/record"
)

// The transaction-history tables (migration 6): transaction_hashes, one row
// per transaction, and address_index, the per-address lists the Data API's
// transaction endpoints page through. Their rows are built from the same
// decoded records as the block tables and written with them, as child rows
// (before the blocks), versioned by the same offsets.

// indexRow is one address_index row. Rows of ListTransactions take their
// transaction columns from tx when inserted; the other lists carry their
// own. Addresses are arrays, viewed as strings at insert time (the rows do
// not move once the batch is built).
type indexRow struct {
	tx        *txRow
	address   evm.Address
	list      uint8
	position  uint32
	sub       uint32
	roles     uint8
	tokenKind uint8
	status    uint8
	// hasTo is false when the row has no recipient (a CREATE frame that
	// failed, a top-level creation's creator).
	hasTo              bool
	from, to, contract evm.Address
	callType           string
	value, tokenID     string
	gas, gasUsed       uint64
}

// parties collects the addresses of one transaction with their roles, in
// the order first seen; a map takes over once a transaction has many (an
// airdrop's hundreds of transfers).
type parties struct {
	addrs []evm.Address
	roles []uint8
	index map[evm.Address]int
}

const partiesScan = 16

func (p *parties) reset() {
	p.addrs, p.roles = p.addrs[:0], p.roles[:0]
	if p.index != nil {
		clear(p.index)
	}
}

func (p *parties) add(a evm.Address, role uint8) {
	if len(p.addrs) > partiesScan {
		if p.index == nil {
			p.index = make(map[evm.Address]int, 64)
		}
		if len(p.index) == 0 {
			for i, x := range p.addrs {
				p.index[x] = i
			}
		}
		if i, ok := p.index[a]; ok {
			p.roles[i] |= role
			return
		}
		p.index[a] = len(p.addrs)
	} else {
		for i, x := range p.addrs {
			if x == a {
				p.roles[i] |= role
				return
			}
		}
	}
	p.addrs = append(p.addrs, a)
	p.roles = append(p.roles, role)
}

// addIndex appends the address_index rows of one transaction.
func (b *Batch) addIndex(tr *txRow) {
	tx := tr.tx
	p := &b.parties
	p.reset()
	if from, ok := evm.AddressFrom(tx.From); ok {
		p.add(from, schema.RoleSender)
	}
	to := tx.To
	if len(to) == 0 {
		to = tx.ContractAddress
	}
	if a, ok := evm.AddressFrom(to); ok {
		p.add(a, schema.RoleRecipient)
	}
	for _, l := range tx.Logs {
		token, ok := evm.AddressFrom(l.Address)
		if !ok {
			continue
		}
		var sub uint32
		evm.Transfers(l.Topics, l.Data, func(x evm.Transfer) {
			r := indexRow{tx: tr, position: l.LogIndex, sub: sub, tokenKind: uint8(x.Kind), hasTo: true,
				from: x.From, to: x.To, contract: token, value: evm.Decimal(x.Value)}
			sub++
			if x.TokenID != nil {
				r.tokenID = evm.Decimal(x.TokenID)
			}
			list := schema.ListERC20
			switch x.Kind {
			case evm.ERC721:
				list = schema.ListERC721
			case evm.ERC1155:
				list = schema.ListERC1155
			}
			b.indexRow(r, x.From, list)
			if x.To != x.From {
				b.indexRow(r, x.To, list)
			}
			b.indexRow(r, token, schema.ListTokenTransfers)
			p.add(x.From, schema.RoleTransferParty)
			p.add(x.To, schema.RoleTransferParty)
			p.add(token, schema.RoleToken)
		})
	}
	sender, _ := evm.AddressFrom(tx.From)
	if tx.Status == 1 && len(tx.To) == 0 {
		if c, ok := evm.AddressFrom(tx.ContractAddress); ok {
			r := indexRow{tx: tr, from: sender, contract: c}
			b.indexRow(r, c, schema.ListCreation)
			b.indexRow(r, sender, schema.ListDeployments)
		}
	}
	var reverts evm.Reverts
	for _, it := range tx.InternalTransactions {
		reverted := reverts.Next(it.Depth, it.Error)
		if !evm.ListedInternal(it.Depth, it.Type, it.Value) {
			continue
		}
		from, _ := evm.AddressFrom(it.From)
		to, hasTo := evm.AddressFrom(it.To)
		r := indexRow{tx: tr, position: it.TracePosition, callType: it.Type, hasTo: hasTo, from: from, to: to,
			value: it.Value, gas: it.Gas, gasUsed: it.GasUsed, status: 1}
		if reverted {
			r.status = 0
		}
		b.indexRow(r, from, schema.ListInternal)
		p.add(from, schema.RoleInternalParty)
		if hasTo {
			if to != from {
				b.indexRow(r, to, schema.ListInternal)
			}
			p.add(to, schema.RoleInternalParty)
		}
		if !reverted && hasTo && it.Type != "CALL" && it.Type != "CALLCODE" {
			// A contract created inside the transaction (CREATE, CREATE2):
			// deployed by the transaction's sender, through the creating
			// contract.
			d := indexRow{tx: tr, position: it.TracePosition, from: sender, to: from, hasTo: true, contract: to}
			b.indexRow(d, to, schema.ListCreation)
			b.indexRow(d, sender, schema.ListDeployments)
			if from != sender {
				b.indexRow(d, from, schema.ListDeployments)
			}
		}
	}
	for i, a := range p.addrs {
		b.index = append(b.index, indexRow{tx: tr, address: a, list: schema.ListTransactions, roles: p.roles[i]})
	}
}

// indexRow appends r as a row of list for address.
func (b *Batch) indexRow(r indexRow, address evm.Address, list uint8) {
	r.address, r.list = address, list
	b.index = append(b.index, r)
}

const txHashColumns = "chain_id, hash, block_hash, block_number, tx_index, version"

func (w *Writer) insertTxHashes(ctx context.Context, rows []*txRow) error {
	n := min(len(rows), flushRows)
	var (
		chainID, blockNumber, version = make([]uint64, n), make([]uint64, n), make([]uint64, n)
		txIndex                       = make([]uint32, n)
		hash, blockHash               = make([]string, n), make([]string, n)
	)
	return w.sendBlocks(ctx, "transaction_hashes", txHashColumns, len(rows), func(batch driver.Batch, lo, hi int) error {
		for i, r := range rows[lo:hi] {
			chainID[i], hash[i], blockHash[i], blockNumber[i] = r.b.ChainId, fixed32(r.tx.Hash), fixed32(r.b.Hash), r.b.Number
			txIndex[i], version[i] = r.tx.Index, r.version
		}
		// The order matches txHashColumns.
		return appendColumns(batch, hi-lo, chainID, hash, blockHash, blockNumber, txIndex, version)
	})
}

const indexColumns = "chain_id, address, list, block_number, tx_index, position, sub_index, block_hash, tx_hash, roles, tx_type, call_type, token_kind, from_address, to_address, contract_address, value, token_id, gas, gas_price, nonce, selector, status, gas_used, version"

func (w *Writer) insertIndex(ctx context.Context, rows []indexRow) error {
	n := min(len(rows), flushRows)
	var (
		chainID, blockNumber, gas, nonce, gasUsed, version                       = make([]uint64, n), make([]uint64, n), make([]uint64, n), make([]uint64, n), make([]uint64, n), make([]uint64, n)
		txIndex, position, sub                                                   = make([]uint32, n), make([]uint32, n), make([]uint32, n)
		list, roles, txType, tokenKind, status                                   = make([]uint8, n), make([]uint8, n), make([]uint8, n), make([]uint8, n), make([]uint8, n)
		address, blockHash, txHash, callType, from, to, contract, value, tokenID = make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
		gasPrice, selector                                                       = make([]string, n), make([]string, n)
	)
	return w.sendBlocks(ctx, "address_index", indexColumns, len(rows), func(batch driver.Batch, lo, hi int) error {
		for i := range hi - lo {
			r := &rows[lo+i]
			b, tx := r.tx.b, r.tx.tx
			chainID[i], address[i], list[i], blockNumber[i] = b.ChainId, view(r.address[:]), r.list, b.Number
			txIndex[i], position[i], sub[i], blockHash[i], txHash[i] = tx.Index, r.position, r.sub, fixed32(b.Hash), fixed32(tx.Hash)
			roles[i], version[i] = r.roles, r.tx.version
			if r.list == schema.ListTransactions {
				txType[i], callType[i], tokenKind[i] = uint8(tx.Type), "", 0
				from[i], to[i], contract[i], value[i], tokenID[i] = view(tx.From), view(tx.To), view(tx.ContractAddress), tx.Value, ""
				gas[i], gasPrice[i], nonce[i], selector[i] = tx.Gas, txGasPrice(tx), tx.Nonce, view(tx.Input[:min(len(tx.Input), 4)])
				status[i], gasUsed[i] = uint8(tx.Status), tx.GasUsed
				continue
			}
			txType[i], callType[i], tokenKind[i] = 0, r.callType, r.tokenKind
			from[i], to[i], contract[i], value[i], tokenID[i] = view(r.from[:]), "", "", r.value, r.tokenID
			if r.hasTo {
				to[i] = view(r.to[:])
			}
			if r.list != schema.ListInternal {
				contract[i] = view(r.contract[:])
			}
			gas[i], gasPrice[i], nonce[i], selector[i], status[i], gasUsed[i] = r.gas, "", 0, "", r.status, r.gasUsed
		}
		// The order matches indexColumns.
		return appendColumns(batch, hi-lo, chainID, address, list, blockNumber, txIndex, position, sub, blockHash, txHash,
			roles, txType, callType, tokenKind, from, to, contract, value, tokenID, gas, gasPrice, nonce, selector, status,
			gasUsed, version)
	})
}

// txGasPrice is the gas price the Data API shows: the transaction's, or the
// effective price when a node did not give one.
func txGasPrice(tx *record.Transaction) string {
	if tx.GasPrice != "" {
		return tx.GasPrice
	}
	return tx.EffectiveGasPrice
}
