package app

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/moraine-data/moraine/pkg/testenv"
	"github.com/moraine-data/moraine/schemas/codec"
	"github.com/moraine-data/moraine/schemas/record"
	"github.com/moraine-data/moraine/schemas/topics"
)

// TestSDKReindexNft calls reindexNft through the official SDK against the
// running service (sdktest/nfts.mjs: accepted, refused within the hour,
// errors) and checks that the accepted requests reached the metadata topic
// as REINDEX requests, the refused one did not.
func TestSDKReindexNft(t *testing.T) {
	chCfg, _ := testenv.ClickHouse(t)
	dir := sdkDir(t)
	a, url := startApp(t, func(c *Config) { c.ClickHouse = chCfg })
	nft, err := json.Marshal(map[string]string{"chainId": "43112", "address": "0x71C7656EC7ab88b098defB751B7401B5f6d8976F", "tokenId": "145"})
	require.NoError(t, err)
	nctx, ncancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer ncancel()
	cmd := exec.CommandContext(nctx, "node", "nfts.mjs")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "MORAINE_SDKTEST_URL="+url, "MORAINE_SDKTEST_NFT="+string(nft))
	out, err := cmd.CombinedOutput()
	t.Logf("node nfts.mjs:\n%s", out)
	require.NoError(t, err, "the SDK's reindexNft calls failed")
	require.Contains(t, string(out), ", 0 failures")

	k := a.cfg.Webhooks.Kafka
	cl, err := kgo.NewClient(append(k.BaseOpts(testenv.Logger(t), "test-reader"), kgo.ConsumeTopics(k.Topic(topics.NftMetadata)),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))...)
	require.NoError(t, err)
	defer cl.Close()
	tokens := map[string]int{}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	for len(tokens) < 2 && ctx.Err() == nil {
		cl.PollFetches(ctx).EachRecord(func(r *kgo.Record) {
			req, err := codec.DecodeNftMetadataRequest(r.Value)
			require.NoError(t, err)
			require.Equal(t, record.NftMetadataRequest_REASON_REINDEX, req.Reason)
			require.Equal(t, uint64(43112), req.ChainId)
			tokens[req.TokenId]++
		})
	}
	// One more poll: a refused request must not have produced anything.
	pctx, pcancel := context.WithTimeout(t.Context(), time.Second)
	defer pcancel()
	cl.PollFetches(pctx).EachRecord(func(r *kgo.Record) {
		req, _ := codec.DecodeNftMetadataRequest(r.Value)
		tokens[req.TokenId]++
	})
	require.Equal(t, map[string]int{"145": 1, "1451": 1}, tokens)
}
