package balances

import (
	"fmt"
	"math/big"
	"slices"
	"testing"
	"time"

	"github.com/moraine-data/moraine/pkg/evm"
	"github.com/moraine-data/moraine/pkg/testenv"
	"github.com/moraine-data/moraine/schemas/record"
)

// An NFT's owner is the recipient of its newest canonical transfer, of
// either kind; a collection's ids are listed in numeric order, once each,
// without the ids only orphaned blocks minted, page by page whether the
// collection is read at once or in windows of ids.
func TestNFTsIntegration(t *testing.T) {
	_, conn := testenv.ClickHouse(t)
	ctx := t.Context()
	const chainID = 13
	c := newTestChain(t, conn, chainID)
	var zero evm.Address
	block := func(number uint64, salt byte, logs ...*record.Log) *record.Block {
		for i, l := range logs {
			l.LogIndex = uint32(i)
		}
		return &record.Block{ChainId: chainID, Number: number, Hash: append(wordN(number)[:31], salt),
			Transactions: []*record.Transaction{{Status: 1, Logs: logs}}}
	}
	// ids 0..299 minted to alice, 1<<200 and 1<<255 to bob.
	var mints []*record.Log
	for id := range uint64(300) {
		mints = append(mints, erc721Log(art, zero, alice, id))
	}
	c.write(block(10, 0, mints...))
	big1 := new(big.Int).Lsh(big.NewInt(1), 200)
	big2 := new(big.Int).Lsh(big.NewInt(1), 255)
	bigMint := func(id *big.Int) *record.Log {
		return &record.Log{Address: art[:], Topics: [][]byte{evm.TopicTransfer[:], topicOf(zero), topicOf(bob), word(id)}}
	}
	c.write(block(11, 0, bigMint(big1), bigMint(big2)))
	c.write(block(12, 0, erc721Log(art, alice, bob, 5), erc721Log(art, alice, carol, 6)))
	// #5 goes on to carol, then as ERC-1155 (the contract is both) to alice.
	c.write(block(13, 0, erc721Log(art, bob, carol, 5)))
	c.write(block(14, 0, single1155Log(art, carol, carol, alice, 5, 1)))
	// Block 15 burns #6 and mints #1000; it is orphaned, and its
	// replacement moves #7 to bob.
	c.write(block(15, 0, erc721Log(art, carol, zero, 6), erc721Log(art, zero, bob, 1000)))
	c.orphan(15)
	c.write(block(15, 1, erc721Log(art, alice, bob, 7)))
	c.flush()

	db := Conn{Conn: conn, Timeout: time.Minute}
	nfts := NewNFTs(db, BlockTable{DB: db})
	owner := func(id uint64) string {
		t.Helper()
		n, ok, err := nfts.Token(ctx, chainID, art, [32]byte(wordN(id)))
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			return "none"
		}
		return fmt.Sprintf("%s %02x@%d", n.Kind, n.Owner[19], n.Block)
	}
	for id, want := range map[uint64]string{0: "ERC721 01@10", 5: "ERC1155 00@14", 6: "ERC721 03@12", 7: "ERC721 02@15", 1000: "none", 300: "none"} {
		if got := owner(id); got != want {
			t.Errorf("#%d: %s, want %s", id, got, want)
		}
	}
	if n, ok, err := nfts.Token(ctx, chainID, art, [32]byte(word(big2))); err != nil || !ok || n.Owner != bob {
		t.Fatalf("#2^255: %+v %v %v", n, ok, err)
	}
	// Every id, page by page, read at once and in windows.
	var want []string
	for id := range 300 {
		want = append(want, fmt.Sprint(id))
	}
	want = append(want, big1.String(), big2.String())
	for _, budget := range []int{100000, 50} {
		nfts.ScanRows = budget
		var got []string
		var after *[32]byte
		for page := 0; ; page++ {
			if page > 100 {
				t.Fatal("paging does not end")
			}
			list, more, err := nfts.Tokens(ctx, chainID, art, after, 7)
			if err != nil {
				t.Fatal(err)
			}
			for _, n := range list {
				got = append(got, evm.Decimal(n.ID[:]))
			}
			if len(list) > 0 {
				last := list[len(list)-1].ID
				after = &last
			}
			if !more {
				break
			}
		}
		if !slices.Equal(got, want) {
			t.Fatalf("budget %d: ids %v,\nwant %v", budget, got, want)
		}
	}
}
