package verify

import (
	"bytes"
	"crypto/ecdsa"
	"encoding/json"
	"math/big"
	"os"
	"testing"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/holiman/uint256"
	"github.com/klauspost/compress/zstd"
	"github.com/stretchr/testify/require"

	"github.com/moraine-data/moraine/ingest/internal/chaintest"
	"github.com/moraine-data/moraine/pkg/testenv"
)

// sameAsGoEthereum checks that signedTx reads elem as the transaction
// go-ethereum's Transaction.UnmarshalJSON reads (same consensus encoding),
// or fails where it fails.
func sameAsGoEthereum(t *testing.T, elem []byte) {
	t.Helper()
	got, err := signedTx(elem)
	want := new(types.Transaction)
	wantErr := want.UnmarshalJSON(bytes.Replace(elem, emptyTo, nullTo, 1))
	if wantErr != nil {
		require.Error(t, err, "go-ethereum refuses %s: %v", elem, wantErr)
		return
	}
	require.NoError(t, err, "%s", elem)
	gb, err := got.MarshalBinary()
	require.NoError(t, err)
	wb, err := want.MarshalBinary()
	require.NoError(t, err)
	require.Equal(t, wb, gb, "%s", elem)
}

// TestSignedTxOnRecordedBlocks: every transaction of the recorded blocks
// (Gunzilla, the C-Chain, a C-Chain block after Granite, Ethereum block
// 18,000,000) reads as go-ethereum reads it.
func TestSignedTxOnRecordedBlocks(t *testing.T) {
	var blocks []json.RawMessage
	for _, f := range []string{"avalanche/gunzilla_14M/GUNZILLA_BLOCKS.jsonl.zst", "avalanche/cchain_1_100/blocks_1_100.jsonl.zst"} {
		for _, b := range chaintest.Load(t, f) {
			blocks = append(blocks, b.Block)
		}
	}
	raw, err := os.ReadFile(testenv.SharedData(t, "avalanche/misc/cchain_block_95033472_post_granite.json"))
	require.NoError(t, err)
	blocks = append(blocks, raw)
	f, err := os.Open(testenv.SharedData(t, "ethereum/erigon_rpc_tests/eth_getBlockByNumber_18000000_fullTx.json.zst"))
	require.NoError(t, err)
	defer f.Close()
	zr, err := zstd.NewReader(f)
	require.NoError(t, err)
	defer zr.Close()
	var pairs []struct {
		Response struct {
			Result json.RawMessage `json:"result"`
		} `json:"response"`
	}
	require.NoError(t, json.NewDecoder(zr).Decode(&pairs))
	blocks = append(blocks, pairs[0].Response.Result)

	types := map[string]int{}
	for _, b := range blocks {
		var blk struct {
			Transactions []json.RawMessage `json:"transactions"`
		}
		require.NoError(t, json.Unmarshal(b, &blk))
		for _, tx := range blk.Transactions {
			var typ struct{ Type string }
			require.NoError(t, json.Unmarshal(tx, &typ))
			types[typ.Type]++
			sameAsGoEthereum(t, tx)
		}
	}
	t.Logf("transactions by type: %v", types)
	require.Positive(t, types["0x0"])
	require.Positive(t, types["0x2"])
}

// TestSignedTxEveryType: transactions of every type, signed and written by
// go-ethereum (a creation, an access list, a blob and a set-code one
// included), read back as they were; a field missing or a yParity that
// contradicts v is refused as go-ethereum refuses it.
func TestSignedTxEveryType(t *testing.T) {
	key, err := crypto.GenerateKey()
	require.NoError(t, err)
	chainID := big.NewInt(43114)
	signer := types.LatestSignerForChainID(chainID)
	to := common.HexToAddress("0x00000000000000000000000000000000000000aa")
	access := types.AccessList{{Address: to, StorageKeys: []common.Hash{{1}, {2}}}, {Address: common.Address{3}, StorageKeys: []common.Hash{}}}
	sign := func(d types.TxData) *types.Transaction {
		tx, err := types.SignNewTx(key, signer, d)
		require.NoError(t, err)
		return tx
	}
	auth, err := types.SignSetCode(key, types.SetCodeAuthorization{ChainID: *uint256.MustFromBig(chainID), Address: to, Nonce: 1})
	require.NoError(t, err)
	txs := []*types.Transaction{
		sign(&types.LegacyTx{Nonce: 1, GasPrice: big.NewInt(25e9), Gas: 21000, To: &to, Value: big.NewInt(1), Data: []byte{1, 2}}),
		sign(&types.LegacyTx{Nonce: 2, GasPrice: big.NewInt(25e9), Gas: 53000, Data: []byte{0x60, 0x80}}), // a creation
		unprotected(t, key, &types.LegacyTx{Nonce: 3, GasPrice: big.NewInt(1), Gas: 21000, To: &to}),
		sign(&types.AccessListTx{ChainID: chainID, Nonce: 4, GasPrice: big.NewInt(25e9), Gas: 30000, To: &to, AccessList: access}),
		sign(&types.DynamicFeeTx{ChainID: chainID, Nonce: 5, GasTipCap: big.NewInt(2), GasFeeCap: big.NewInt(30e9), Gas: 30000, To: &to,
			Value: new(big.Int).Lsh(big.NewInt(1), 200), AccessList: access}),
		sign(&types.DynamicFeeTx{ChainID: chainID, Nonce: 6, GasTipCap: big.NewInt(0), GasFeeCap: big.NewInt(30e9), Gas: 60000}),
		sign(&types.BlobTx{ChainID: uint256.MustFromBig(chainID), Nonce: 7, GasTipCap: uint256.NewInt(1), GasFeeCap: uint256.NewInt(2),
			Gas: 21000, To: to, BlobFeeCap: uint256.NewInt(3), BlobHashes: []common.Hash{{0x01, 0xbb}}}),
		sign(&types.SetCodeTx{ChainID: uint256.MustFromBig(chainID), Nonce: 8, GasTipCap: uint256.NewInt(1), GasFeeCap: uint256.NewInt(2),
			Gas: 50000, To: to, AuthList: []types.SetCodeAuthorization{auth}}),
	}
	for _, tx := range txs {
		j, err := tx.MarshalJSON()
		require.NoError(t, err)
		got, err := signedTx(j)
		require.NoError(t, err, "%s", j)
		require.Equal(t, tx.Hash(), got.Hash(), "%s", j)
		sameAsGoEthereum(t, j)
	}

	// A creation written with "to":"" (some exporters), a field missing,
	// and yParity against v.
	j, err := txs[1].MarshalJSON()
	require.NoError(t, err)
	got, err := signedTx(bytes.Replace(j, []byte(`"to":null`), emptyTo, 1))
	require.NoError(t, err)
	require.Equal(t, txs[1].Hash(), got.Hash())
	for _, tc := range []struct {
		tx       int
		from, to string
	}{
		{0, `"gas":`, `"gaz":`},
		{3, `"chainId":`, `"chainIdX":`},
		{4, `"maxFeePerGas":`, `"maxFee":`},
		{4, `"input":`, `"data":`},
		{0, `"v":`, `"w":`},
		{4, `"yParity":"0x`, `"yParity":"0x1`},
	} {
		j, err := txs[tc.tx].MarshalJSON()
		require.NoError(t, err)
		bad := bytes.Replace(j, []byte(tc.from), []byte(tc.to), 1)
		require.NotEqual(t, j, bad)
		_, err = signedTx(bad)
		require.Error(t, err, "%s", bad)
		sameAsGoEthereum(t, bad)
	}
}

// unprotected signs a legacy transaction without EIP-155 (v 27 or 28).
func unprotected(t *testing.T, key *ecdsa.PrivateKey, d *types.LegacyTx) *types.Transaction {
	tx, err := types.SignNewTx(key, types.HomesteadSigner{}, d)
	require.NoError(t, err)
	return tx
}
