package clickhouse

import (
	"bytes"
	"testing"
)

func TestBalanceKeyOrder(t *testing.T) {
	holder := [20]byte{0xaa}
	erc20 := BalancePair{Kind: 1, Token: [20]byte{0x01}}
	nft := BalancePair{Kind: 2, Token: [20]byte{0x01}, TokenID: [32]byte{31: 7}}
	nft1155 := BalancePair{Kind: 3, Token: [20]byte{0x01}, TokenID: [32]byte{31: 7}}
	h := [32]byte{0x01}
	// Keys sort as reads need them: level, parent, holder, then the pair as
	// lists show them (token, token id, kind), then bucket (block order
	// within a pair) and block hash.
	ordered := []BalanceKey{
		DeltaKey(43114, holder, 5, erc20, [32]byte{}),
		DeltaKey(43114, holder, 5, erc20, h),
		DeltaKey(43114, holder, 1023, erc20, [32]byte{}),
		DeltaKey(43114, holder, 5, nft, [32]byte{}),
		DeltaKey(43114, holder, 5, nft1155, [32]byte{}),
		DeltaKey(43114, holder, 5, BalancePair{Kind: 1, Token: [20]byte{0x02}}, [32]byte{}),
		DeltaKey(43114, [20]byte{0xab}, 0, erc20, [32]byte{}),
		DeltaKey(43114, holder, 1024, erc20, [32]byte{}), // the next level-1 bucket is the next parent
		BucketSumKey(43114, holder, 0, erc20),
		BucketSumKey(43114, holder, 1023, erc20),
		BucketSumKey(43114, holder, 1024, erc20),
		EpochSumKey(43114, holder, 0, erc20),
		EpochSumKey(43114, holder, 1<<30, erc20),
		OpeningKey(43114, holder, 99, erc20),
		DeltaKey(1<<32, [20]byte{}, 0, BalancePair{}, [32]byte{}),
	}
	for i := 1; i < len(ordered); i++ {
		if bytes.Compare(ordered[i-1][:], ordered[i][:]) >= 0 {
			t.Fatalf("key %d does not sort after key %d", i, i-1)
		}
	}
	k := DeltaKey(43114, holder, 1<<33+5, nft, h)
	if k.ChainID() != 43114 || k.Level() != BalanceLevelDelta || k.Parent() != (1<<33+5)>>BucketBits ||
		k.Holder() != holder || k.Bucket() != 1<<33+5 || k.Pair() != nft || k.BlockHash() != h {
		t.Fatalf("parts of the key do not read back: %d %d %d %x %d %+v %x", k.ChainID(), k.Level(), k.Parent(), k.Holder(), k.Bucket(), k.Pair(), k.BlockHash())
	}
	if b := BucketSumKey(1, holder, 5000, erc20); b.Parent() != 4 || b.Bucket() != 5000 {
		t.Fatalf("a level-1 row's parent is its level-2 bucket: %d", b.Parent())
	}
	parsed, err := ParseBalanceKey(string(k[:]))
	if err != nil || parsed != k {
		t.Fatalf("ParseBalanceKey: %v", err)
	}
	if _, err := ParseBalanceKey(string(k[:129])); err == nil {
		t.Fatal("ParseBalanceKey took 129 bytes")
	}
	if pk := PairKeyOf(&k); pk.Pair() != nft.Bytes() || pk != NewPairKey(43114, holder, nft.Bytes()) {
		t.Fatal("PairKeyOf")
	}
}

func TestBalanceRanges(t *testing.T) {
	holder := [20]byte{0xaa}
	a := BalancePair{Kind: 1, Token: [20]byte{0x10}}
	b := BalancePair{Kind: 2, Token: [20]byte{0x20}, TokenID: [32]byte{0: 0xff}}
	c := BalancePair{Kind: 1, Token: [20]byte{0x30}}
	from, to := BalanceHolderRange(43114, BalanceLevelDelta, 1, holder, a.Bytes(), b.Bytes())
	in := func(k BalanceKey) bool { return bytes.Compare(from[:], k[:]) <= 0 && bytes.Compare(k[:], to[:]) <= 0 }
	for _, x := range []struct {
		k    BalanceKey
		want bool
	}{
		{DeltaKey(43114, holder, 1024, a, [32]byte{}), true},
		{DeltaKey(43114, holder, 2047, b, [32]byte{0: 0xff}), true},
		{DeltaKey(43114, holder, 1500, c, [32]byte{}), false},
		{DeltaKey(43114, holder, 1023, a, [32]byte{}), false}, // another parent
		{DeltaKey(43114, [20]byte{0xab}, 1200, a, [32]byte{}), false},
	} {
		if in(x.k) != x.want {
			t.Errorf("block %d of holder %x, pair %+v in the range: %v, want %v", x.k.Bucket(), x.k.Holder(), x.k.Pair(), !x.want, x.want)
		}
	}
	pf, pt := BalancePrefixRange(BalanceParentPrefix(43114, BalanceLevelDelta, 1))
	for _, k := range []BalanceKey{from, to, DeltaKey(43114, [20]byte{0xff}, 2047, b, [32]byte{})} {
		if bytes.Compare(pf[:], k[:]) > 0 || bytes.Compare(k[:], pt[:]) > 0 {
			t.Errorf("the parent's range lacks %x", k)
		}
	}
	if k := DeltaKey(43114, holder, 2048, BalancePair{}, [32]byte{}); bytes.Compare(k[:], pt[:]) <= 0 {
		t.Error("the parent's range holds the next parent's rows")
	}
}

func TestNFTKey(t *testing.T) {
	token := [20]byte{0x11}
	id := [32]byte{31: 9}
	at := func(id [32]byte, p NFTPosition) NFTKey { return NewNFTKey(43114, token, id, p) }
	ordered := []NFTKey{
		at(id, NFTPosition{Kind: 2, Block: 1, LogIndex: 7}),
		at(id, NFTPosition{Kind: 2, Block: 2}),
		at(id, NFTPosition{Kind: 2, Block: 2, Sub: 1}),
		at(id, NFTPosition{Kind: 3}),
		at([32]byte{30: 1}, NFTPosition{}),
		NewNFTKey(43114, [20]byte{0x12}, [32]byte{}, NFTPosition{}),
	}
	for i := 1; i < len(ordered); i++ {
		if bytes.Compare(ordered[i-1][:], ordered[i][:]) >= 0 {
			t.Fatalf("key %d does not sort after key %d", i, i-1)
		}
	}
	p := NFTPosition{Kind: 3, Block: 1<<40 + 1, LogIndex: 4, Sub: 2, BlockHash: [32]byte{5}}
	k := at(id, p)
	if k.Position() != p || k.TokenID() != id {
		t.Fatalf("Position() = %+v", k.Position())
	}
	if parsed, err := ParseNFTKey(string(k[:])); err != nil || parsed != k {
		t.Fatalf("ParseNFTKey: %v", err)
	}
	from, to := NFTRange(43114, token, id, id)
	if bytes.Compare(from[:], ordered[0][:]) > 0 || bytes.Compare(ordered[3][:], to[:]) > 0 || bytes.Compare(ordered[4][:], to[:]) <= 0 {
		t.Fatal("NFTRange must hold every transfer of the id and no other id's")
	}
	e := NFTEntry(nil, [20]byte{1}, [20]byte{2}, "12")
	f, tt, amount, err := ParseNFTEntry(string(e))
	if err != nil || f != [20]byte{1} || tt != [20]byte{2} || amount != "12" {
		t.Fatalf("ParseNFTEntry: %x %x %q %v", f, tt, amount, err)
	}
}
