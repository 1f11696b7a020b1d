package evm

import (
	"encoding/hex"
	"strings"
	"testing"

	"golang.org/x/crypto/sha3"
)

func mustHex(s string) []byte {
	b, err := hex.DecodeString(strings.TrimPrefix(s, "0x"))
	if err != nil {
		panic(err)
	}
	return b
}

func word(n uint64) []byte {
	w := make([]byte, 32)
	for i := 31; n > 0; i-- {
		w[i] = byte(n)
		n >>= 8
	}
	return w
}

func addrTopic(a string) []byte { return append(make([]byte, 12), mustHex(a)...) }

func TestChecksum(t *testing.T) {
	// EIP-55 test vectors, plus addresses from the hosted payload examples.
	for _, want := range []string{
		"0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed",
		"0xfB6916095ca1df60bB79Ce92cE3Ea74c37c5d359",
		"0xdbF03B407c01E7cD3CBea99509d93f8DDDC8C6FB",
		"0xD1220A0cf47c7B9Be7A2E6BA89F429762e7b9aDb",
		"0x47a2c5701DB0D39408fef68A4d0c1e628B1c35ff",
		"0xC4D983c497E45A614C1D9449A8A8214d08F52E6F",
		"0xdA8770ef037cF2738A79b4478D78d1172cE7F710",
	} {
		a, ok := AddressFrom(mustHex(want))
		if !ok {
			t.Fatal("bad vector")
		}
		if got := a.Checksum(); got != want {
			t.Errorf("Checksum = %s, want %s", got, want)
		}
		if got := a.Hex(); got != strings.ToLower(want) {
			t.Errorf("Hex = %s", got)
		}
	}
	if _, ok := AddressFrom(make([]byte, 19)); ok {
		t.Error("19 bytes accepted as an address")
	}
	if HexBytes(nil) != "0x" {
		t.Error("empty bytes must be 0x")
	}
}

func TestTopicConstants(t *testing.T) {
	for sig, want := range map[string][32]byte{
		"Transfer(address,address,uint256)":                          TopicTransfer,
		"TransferSingle(address,address,address,uint256,uint256)":    TopicTransferSingle,
		"TransferBatch(address,address,address,uint256[],uint256[])": TopicTransferBatch,
	} {
		h := sha3.NewLegacyKeccak256()
		h.Write([]byte(sig))
		if got := h.Sum(nil); string(got) != string(want[:]) {
			t.Errorf("%s: constant %x, keccak %x", sig, want, got)
		}
	}
}

const (
	alice    = "47a2c5701db0d39408fef68a4d0c1e628b1c35ff"
	bob      = "da8770ef037cf2738a79b4478d78d1172ce7f710"
	operator = "c4d983c497e45a614c1d9449a8a8214d08f52e6f"
)

func batchData(ids, values []uint64) []byte {
	var d []byte
	d = append(d, word(64)...)
	d = append(d, word(uint64(64+32+32*len(ids)))...)
	d = append(d, word(uint64(len(ids)))...)
	for _, id := range ids {
		d = append(d, word(id)...)
	}
	d = append(d, word(uint64(len(values)))...)
	for _, v := range values {
		d = append(d, word(v)...)
	}
	return d
}

type got struct {
	kind           Kind
	from, to       string
	value, tokenID string
}

func TestTransfers(t *testing.T) {
	tr, ts, tb := TopicTransfer[:], TopicTransferSingle[:], TopicTransferBatch[:]
	for _, tc := range []struct {
		name   string
		topics [][]byte
		data   []byte
		want   []got
	}{
		{name: "erc20", topics: [][]byte{tr, addrTopic(alice), addrTopic(bob)}, data: word(1000),
			want: []got{{ERC20, alice, bob, "1000", ""}}},
		{name: "erc721", topics: [][]byte{tr, addrTopic(alice), addrTopic(bob), word(77)},
			want: []got{{ERC721, alice, bob, "1", "77"}}},
		{name: "erc1155 single: operator is not a party", topics: [][]byte{ts, addrTopic(operator), addrTopic(alice), addrTopic(bob)},
			data: append(word(5), word(9)...), want: []got{{ERC1155, alice, bob, "9", "5"}}},
		{name: "erc1155 batch: one transfer per id", topics: [][]byte{tb, addrTopic(operator), addrTopic(alice), addrTopic(bob)},
			data: batchData([]uint64{1, 2}, []uint64{10, 20}),
			want: []got{{ERC1155, alice, bob, "10", "1"}, {ERC1155, alice, bob, "20", "2"}}},
		{name: "erc1155 empty batch", topics: [][]byte{tb, addrTopic(operator), addrTopic(alice), addrTopic(bob)},
			data: batchData(nil, nil)},
		{name: "batch with mismatched arrays", topics: [][]byte{tb, addrTopic(operator), addrTopic(alice), addrTopic(bob)},
			data: batchData([]uint64{1, 2}, []uint64{10})},
		{name: "batch with an offset past the data", topics: [][]byte{tb, addrTopic(operator), addrTopic(alice), addrTopic(bob)},
			data: append(word(4096), word(64)...)},
		{name: "batch with a huge length", topics: [][]byte{tb, addrTopic(operator), addrTopic(alice), addrTopic(bob)},
			data: append(append(word(64), word(96)...), append(word(1<<40), word(0)...)...)},
		{name: "erc20 with short data", topics: [][]byte{tr, addrTopic(alice), addrTopic(bob)}, data: word(1)[:31]},
		{name: "erc721 with data", topics: [][]byte{tr, addrTopic(alice), addrTopic(bob), word(7)}, data: word(1)},
		{name: "transfer with all params in data (2 topics)", topics: [][]byte{tr, addrTopic(alice)}, data: word(1)},
		{name: "single with 3 topics", topics: [][]byte{ts, addrTopic(alice), addrTopic(bob)}, data: append(word(5), word(9)...)},
		{name: "short topic", topics: [][]byte{tr, addrTopic(alice)[:31], addrTopic(bob)}, data: word(1)},
		{name: "other event", topics: [][]byte{word(1), addrTopic(alice), addrTopic(bob)}, data: word(1)},
		{name: "no topics"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out []got
			n := Transfers(tc.topics, tc.data, func(x Transfer) {
				g := got{x.Kind, hex.EncodeToString(x.From[:]), hex.EncodeToString(x.To[:]), Decimal(x.Value), ""}
				if x.TokenID != nil {
					g.tokenID = Decimal(x.TokenID)
				}
				out = append(out, g)
			})
			if n != len(out) || Transfers(tc.topics, tc.data, nil) != n {
				t.Fatalf("count %d, calls %d", n, len(out))
			}
			from, to, ok := TransferParties(tc.topics, tc.data)
			if ok != (n > 0) {
				t.Fatalf("TransferParties ok=%v with %d transfers", ok, n)
			}
			if ok && (hex.EncodeToString(from[:]) != out[0].from || hex.EncodeToString(to[:]) != out[0].to) {
				t.Fatalf("TransferParties = %x, %x", from, to)
			}
			if len(out) != len(tc.want) {
				t.Fatalf("got %+v, want %+v", out, tc.want)
			}
			for i := range out {
				if out[i] != tc.want[i] {
					t.Errorf("transfer %d = %+v, want %+v", i, out[i], tc.want[i])
				}
			}
		})
	}
}

func TestDecimal(t *testing.T) {
	max := make([]byte, 32)
	for i := range max {
		max[i] = 0xff
	}
	for _, tc := range []struct {
		in   []byte
		want string
	}{
		{word(0), "0"},
		{nil, "0"},
		{word(30576074978046450), "30576074978046450"},
		{max, "115792089237316195423570985008687907853269984665640564039457584007913129639935"},
	} {
		if got := Decimal(tc.in); got != tc.want {
			t.Errorf("Decimal(%x) = %s, want %s", tc.in, got, tc.want)
		}
	}
}

func TestKindString(t *testing.T) {
	if ERC20.String() != "ERC20" || ERC721.String() != "ERC721" || ERC1155.String() != "ERC1155" {
		t.Fatal("kind names")
	}
}
