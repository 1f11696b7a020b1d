package pagetoken

import (
	"bytes"
	"encoding/base64"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func codec(t *testing.T, key string, now *time.Time) *Codec {
	t.Helper()
	c, err := NewCodec(bytes.Repeat([]byte(key), 32), 24*time.Hour, func() time.Time { return *now })
	require.NoError(t, err)
	return c
}

func TestRoundTrip(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	c := codec(t, "a", &now)
	for _, tc := range []struct {
		name string
		tok  Token
	}{
		{"chain blocks", Token{Kind: KindChainBlocks, ChainID: 43114, Cursor: 123456789}},
		{"chain blocks at genesis", Token{Kind: KindChainBlocks, ChainID: 1, Cursor: 0}},
		{"all blocks", Token{Kind: KindAllBlocks, Network: NetworkTestnet, Positions: []Position{{43113, 5}, {4337, 1 << 60}}}},
		{"all blocks, one chain left", Token{Kind: KindAllBlocks, Positions: []Position{{43114, 9}}}},
		{"block txs", Token{Kind: KindBlockTxs, ChainID: 43114, BlockNumber: 77, BlockHash: [32]byte{1, 2, 3, 31: 9}, Cursor: 50}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := c.Encode(tc.tok)
			got, err := c.Decode(s, tc.tok.Kind)
			require.NoError(t, err)
			tc.tok.IssuedAt = now
			require.Equal(t, tc.tok, got)
			// URL-safe as is.
			require.NotContains(t, s, "+")
			require.NotContains(t, s, "/")
			require.NotContains(t, s, "=")
		})
	}
}

func TestRejects(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	c := codec(t, "a", &now)
	s := c.Encode(Token{Kind: KindChainBlocks, ChainID: 43114, Cursor: 99})
	raw, _ := base64.RawURLEncoding.DecodeString(s)
	// Every single-bit change anywhere is detected.
	for i := range raw {
		for bit := range 8 {
			b := append([]byte(nil), raw...)
			b[i] ^= 1 << bit
			_, err := c.Decode(base64.RawURLEncoding.EncodeToString(b), KindChainBlocks)
			require.ErrorIs(t, err, ErrInvalid, "byte %d bit %d", i, bit)
		}
	}
	for _, bad := range []string{"", "x", "!!!!", "AAAA", s + "A", s[:len(s)-1], string(bytes.Repeat([]byte("A"), 9000))} {
		_, err := c.Decode(bad, KindChainBlocks)
		require.ErrorIs(t, err, ErrInvalid, "%q", bad)
	}
	// Another kind, another key.
	_, err := c.Decode(s, KindAllBlocks)
	require.ErrorIs(t, err, ErrInvalid)
	_, err = codec(t, "b", &now).Decode(s, KindChainBlocks)
	require.ErrorIs(t, err, ErrInvalid)
	// Expiry.
	now = now.Add(24*time.Hour + time.Second)
	_, err = c.Decode(s, KindChainBlocks)
	require.ErrorIs(t, err, ErrInvalid)
	// TTL 0: forever.
	forever, err := NewCodec(bytes.Repeat([]byte("a"), 32), 0, func() time.Time { return now.Add(1000 * time.Hour) })
	require.NoError(t, err)
	_, err = forever.Decode(s, KindChainBlocks)
	require.NoError(t, err)

	_, err = NewCodec([]byte("short"), 0, nil)
	require.Error(t, err)
}

func TestKey(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "sub", "page-token.key")

	// The flag wins and must be long enough.
	k, err := Config{Secret: "0123456789abcdef0123456789abcdef", SecretFile: file}.Key()
	require.NoError(t, err)
	require.Equal(t, "0123456789abcdef0123456789abcdef", string(k))
	require.Error(t, Config{Secret: "short"}.Validate())
	_, err = os.Stat(file)
	require.True(t, os.IsNotExist(err))

	// The file is created once, with a random key, and shared by every
	// process that reads it, also when they race to create it.
	var wg sync.WaitGroup
	keys := make([][]byte, 8)
	errs := make([]error, 8)
	for i := range keys {
		wg.Go(func() { keys[i], errs[i] = Config{SecretFile: file}.Key() })
	}
	wg.Wait()
	for i := range keys {
		require.NoError(t, errs[i])
		require.Equal(t, keys[0], keys[i])
	}
	require.Len(t, keys[0], 64)
	st, err := os.Stat(file)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), st.Mode().Perm())
	again, err := Config{SecretFile: file}.Key()
	require.NoError(t, err)
	require.Equal(t, keys[0], again)

	// A file that is too short is an error, not a weak key.
	short := filepath.Join(dir, "short.key")
	require.NoError(t, os.WriteFile(short, []byte("abc\n"), 0o600))
	_, err = Config{SecretFile: short}.Key()
	require.Error(t, err)

	require.NotContains(t, Config{Secret: "0123456789abcdef0123456789abcdef"}.String(), "0123")
}
