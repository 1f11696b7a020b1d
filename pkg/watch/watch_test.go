package watch_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/moraine-data/moraine/pkg/watch"
	"github.com/moraine-data/moraine/schemas/codec"
)

const hookA = "6f1c7a52-7e8e-4a39-9d59-2f0f4c8b1a01"

func addr(i int) string { return fmt.Sprintf("0x%040x", 0xabc000+i) }

func TestPartitionerKeepsAWebhookTogether(t *testing.T) {
	p := watch.Partitioner().ForTopic("t")
	part := func(key string) int { return p.Partition(&kgo.Record{Key: []byte(key)}, 4) }
	for i := range 50 {
		require.Equal(t, part(codec.WatchWebhookKey(hookA)), part(codec.WatchAddressKey(hookA, addr(i))))
	}
}
