package follow

import (
	"context"
	"math"
	"time"
)

// progress is what a periodic progress line says about a chain: where the
// node is, what Kafka has acknowledged, how fast that moves and when it
// will reach the node's head at that pace.
type progress struct {
	Head, Ingested uint64
	HeadKnown      bool
	// Behind is Head - Ingested (0 when ahead or unknown).
	Behind uint64
	// Lag is how old the last ingested block is (now - its timestamp).
	Lag time.Duration
	// BlocksPerSecond and TxsPerSecond are over the last interval.
	BlocksPerSecond, TxsPerSecond float64
	// ETA is Behind at BlocksPerSecond; negative when it cannot be told
	// (nothing moved in the interval).
	ETA time.Duration
}

// progressSample is the follower's acknowledged position at one instant.
type progressSample struct {
	at          time.Time
	blocks, txs uint64 // acknowledged since the follower started
}

// measure compares two samples.
func measure(prev, cur progressSample, head uint64, headKnown bool, ingested uint64, blockTime time.Time) progress {
	p := progress{Head: head, HeadKnown: headKnown, Ingested: ingested, ETA: -1}
	if headKnown && head > ingested {
		p.Behind = head - ingested
	}
	if !blockTime.IsZero() {
		p.Lag = max(cur.at.Sub(blockTime), 0)
	}
	if secs := cur.at.Sub(prev.at).Seconds(); secs > 0 {
		p.BlocksPerSecond = float64(cur.blocks-prev.blocks) / secs
		p.TxsPerSecond = float64(cur.txs-prev.txs) / secs
	}
	switch {
	case p.Behind == 0:
		p.ETA = 0
	case p.BlocksPerSecond > 0:
		p.ETA = time.Duration(math.Min(float64(p.Behind)/p.BlocksPerSecond, 1e9) * float64(time.Second))
	}
	return p
}

// attrs are the progress line's fields.
func (p progress) attrs() []any {
	eta := "unknown"
	if p.ETA >= 0 {
		eta = p.ETA.Round(time.Second).String()
	}
	return []any{
		"head", p.Head, "ingested", p.Ingested, "behind", p.Behind,
		"lag", p.Lag.Round(time.Second).String(),
		"blocks_per_s", math.Round(p.BlocksPerSecond*10) / 10, "txs_per_s", math.Round(p.TxsPerSecond),
		"eta", eta,
	}
}

// reportProgress logs a progress line every interval until ctx ends: one
// line per interval whatever the block rate, and none while the chain is
// at the head and quiet (nothing acknowledged, nothing behind), so a
// follower idling at the head does not fill the log.
func (f *Follower) reportProgress(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	prev := f.sample()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		cur := f.sample()
		head, known := f.deps.RPC.Head()
		next := f.ackedNext.Load()
		if next == 0 || !f.recovered.Load() {
			prev = cur
			continue
		}
		var blockTime time.Time
		if ts := f.ackedTime.Load(); ts > 0 {
			blockTime = time.Unix(ts, 0)
		}
		p := measure(prev, cur, head, known, next-1, blockTime)
		prev = cur
		if p.Behind == 0 && p.BlocksPerSecond == 0 {
			continue
		}
		msg := "ingesting"
		if p.Behind <= f.cfg.ReadyLag {
			msg = "following the head"
		}
		f.logger.Info(msg, p.attrs()...)
	}
}

func (f *Follower) sample() progressSample {
	return progressSample{at: f.deps.Now(), blocks: f.ackedBlocks.Load(), txs: f.ackedTxs.Load()}
}
