package clickhouse

import (
	"bytes"
	"strings"
	"testing"
)

func TestListKeyOrder(t *testing.T) {
	addr := [20]byte{0xaa}
	h := [32]byte{0x01}
	at := func(p ListPosition) ListKey { return NewListKey(43114, addr, ListERC20, p) }
	// Keys sort as the list does: block, tx index, position, sub-index, hash.
	ordered := []ListKey{
		at(ListPosition{Block: 1, TxIndex: 300, Position: 5}),
		at(ListPosition{Block: 256}),
		at(ListPosition{Block: 256, TxIndex: 1}),
		at(ListPosition{Block: 256, TxIndex: 1, Position: 1 << 20}),
		at(ListPosition{Block: 256, TxIndex: 1, Position: 1 << 20, Sub: 2}),
		at(ListPosition{Block: 256, TxIndex: 1, Position: 1 << 20, Sub: 2, BlockHash: h}),
		at(ListPosition{Block: 1 << 40}),
		NewListKey(43114, addr, ListERC721, ListPosition{}),
		NewListKey(43114, [20]byte{0xab}, ListTransactions, ListPosition{}),
		NewListKey(1<<32, [20]byte{}, ListTransactions, ListPosition{}),
	}
	for i := 1; i < len(ordered); i++ {
		if bytes.Compare(ordered[i-1][:], ordered[i][:]) >= 0 {
			t.Fatalf("key %d does not sort after key %d", i, i-1)
		}
	}
	p := ListPosition{Block: 1<<33 + 7, TxIndex: 9, Position: 1<<31 + 3, Sub: 4, BlockHash: h}
	k := at(p)
	if got := k.Position(); got != p {
		t.Fatalf("Position() = %+v, want %+v", got, p)
	}
	parsed, err := ParseListKey(string(k[:]))
	if err != nil || parsed != k {
		t.Fatalf("ParseListKey: %v", err)
	}
	if _, err := ParseListKey(string(k[:80])); err == nil {
		t.Fatal("ParseListKey took 80 bytes")
	}
	from, to := ListKeyRange(43114, addr, ListERC20)
	if bytes.Compare(from[:], ordered[0][:]) > 0 || bytes.Compare(ordered[6][:], to[:]) > 0 ||
		bytes.Compare(ordered[7][:], to[:]) <= 0 {
		t.Fatal("ListKeyRange must hold every key of the list and no other list's")
	}
}

func TestListKeyPrevNext(t *testing.T) {
	k := NewListKey(1, [20]byte{2}, ListTransactions, ListPosition{Block: 5})
	prev, next := k.Prev(), k.Next()
	if bytes.Compare(prev[:], k[:]) >= 0 || bytes.Compare(next[:], k[:]) <= 0 {
		t.Fatal("Prev/Next do not bracket the key")
	}
	if prev.Next() != k || next.Prev() != k {
		t.Fatal("Prev and Next are not inverse")
	}
	// A key ending in zero bytes borrows from the bytes before them.
	if got := prev.Position(); got.Block != 4 || got.TxIndex != 1<<32-1 || got.BlockHash[31] != 0xff {
		t.Fatalf("Prev of block 5's first key = %+v", got)
	}
	var zero, ones ListKey
	for i := range ones {
		ones[i] = 0xff
	}
	if zero.Prev() != zero || ones.Next() != ones {
		t.Fatal("Prev/Next must stop at the ends")
	}
}

// The upgrade statement builds keys with SQLListKey's expression, so it
// cannot drift from what the processor writes; the store's tests run it
// against rows of address_index.
func TestCopyAddressIndexStatement(t *testing.T) {
	want := SQLListKey("chain_id", "address", "list", "block_number", "tx_index", "position", "sub_index", "block_hash")
	if !strings.Contains(CopyAddressIndex, want) {
		t.Fatalf("upgrades/000008_copy_address_index.sql does not build list_key with SQLListKey's expression:\n%s", want)
	}
	if !strings.Contains(CopyAddressIndex, "INSERT INTO address_lists (list_key, roles, entry, version)") {
		t.Fatal("the copy must list address_lists' columns")
	}
}

func TestTxKeyAndEntry(t *testing.T) {
	h, bh := [32]byte{1, 2}, [32]byte{3}
	from, to := TxKeyRange(1<<40, h)
	k := NewTxKey(1<<40, h, bh)
	if bytes.Compare(from[:], k[:]) > 0 || bytes.Compare(k[:], to[:]) > 0 {
		t.Fatal("a transaction's key is outside its range")
	}
	other := NewTxKey(1<<40, [32]byte{1, 3}, [32]byte{})
	if bytes.Compare(other[:], to[:]) <= 0 {
		t.Fatal("another transaction's key is inside the range")
	}
	entry := append(TxEntryPlace(nil, 1<<33+5, 7), "detail"...)
	block, index, detail, err := ParseTxEntry(entry)
	if err != nil || block != 1<<33+5 || index != 7 || string(detail) != "detail" {
		t.Fatalf("ParseTxEntry = %d, %d, %q, %v", block, index, detail, err)
	}
	if _, _, _, err := ParseTxEntry(entry[:11]); err == nil {
		t.Fatal("ParseTxEntry took 11 bytes")
	}
}

func TestCopyTransactionLookupStatement(t *testing.T) {
	for _, want := range []string{SQLTxKey("chain_id", "hash", "block_hash"), SQLTxEntryPlace("block_number", "tx_index"),
		"INSERT INTO transactions_by_hash (tx_key, entry, version)"} {
		if !strings.Contains(CopyTransactionLookup, want) {
			t.Fatalf("upgrades/000009_copy_transaction_lookup.sql lacks %s", want)
		}
	}
}
