package codec

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/moraine-data/moraine/schemas/record"
)

// StreamEntrySchema is the SchemaHeader value of webhook-stream records.
const StreamEntrySchema = "moraine.v1.StreamEntry"

// Key prefixes of the webhook-stream topic (proto/moraine/v1/stream.proto).
const (
	streamSeqPrefix     = "seq:"
	streamEmittedPrefix = "emitted:"
	streamPendingPrefix = "pending:"
	streamReplayPrefix  = "replay:"
)

// StreamSequenceKey is the key of a webhook's last sequence number.
func StreamSequenceKey(webhookID string) string { return streamSeqPrefix + webhookID }

// StreamEmittedKey is the key of the messages delivered for one block.
func StreamEmittedKey(chainID uint64, blockHash []byte) string {
	return streamEmittedPrefix + strconv.FormatUint(chainID, 10) + ":0x" + hex.EncodeToString(blockHash)
}

// StreamPendingKey is the key of one webhook's messages of one block that
// wait for its confirmations.
func StreamPendingKey(chainID uint64, blockHash []byte, webhookID string) string {
	return streamPendingPrefix + strconv.FormatUint(chainID, 10) + ":0x" + hex.EncodeToString(blockHash) + ":" + webhookID
}

// StreamReplayKey is the key of a replay job's progress.
func StreamReplayKey(replayID string) string { return streamReplayPrefix + replayID }

// StreamKeyKind says what a webhook-stream key names.
type StreamKeyKind int

// Kinds of webhook-stream keys.
const (
	StreamKeySequence StreamKeyKind = iota + 1
	StreamKeyEmitted
	StreamKeyPending
	StreamKeyReplay
)

// ParseStreamKey tells the kind of a webhook-stream key.
func ParseStreamKey(key string) (StreamKeyKind, error) {
	switch {
	case strings.HasPrefix(key, streamSeqPrefix) && len(key) > len(streamSeqPrefix):
		return StreamKeySequence, nil
	case strings.HasPrefix(key, streamEmittedPrefix):
		return StreamKeyEmitted, nil
	case strings.HasPrefix(key, streamPendingPrefix):
		return StreamKeyPending, nil
	case strings.HasPrefix(key, streamReplayPrefix) && len(key) > len(streamReplayPrefix):
		return StreamKeyReplay, nil
	}
	return 0, fmt.Errorf("webhook-stream key %q: unknown kind", key)
}

// EncodeStreamEntry encodes e deterministically.
func EncodeStreamEntry(e *record.StreamEntry) ([]byte, error) {
	if e.GetEntry() == nil {
		return nil, errors.New("encode stream entry: empty entry")
	}
	return encode("stream entry", e)
}

// DecodeStreamEntry decodes a webhook-stream value; callers handle nil
// values (tombstones) before calling it.
func DecodeStreamEntry(b []byte) (*record.StreamEntry, error) {
	e, err := decode[record.StreamEntry]("stream entry", b)
	if err != nil {
		return nil, err
	}
	if e.GetEntry() == nil {
		return nil, errors.New("decode stream entry: empty entry")
	}
	return e, nil
}

// RetractionMessageID is the messageId of the retraction of messageID
// because the block blockHash was orphaned: a UUID in the layout of
// ActivityMessageID over SHA-256("retraction|<messageId>|0x<block hash>").
// A transaction can be orphaned twice (in two blocks, on two reorgs); each
// withdrawal has its own id, and a redelivery of one repeats it.
func RetractionMessageID(messageID string, blockHash []byte) string {
	h := sha256.New()
	h.Write([]byte("retraction|"))
	h.Write([]byte(messageID))
	h.Write([]byte("|0x"))
	h.Write([]byte(hex.EncodeToString(blockHash)))
	return uuid8(h.Sum(nil))
}
