package codec

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"

	"github.com/moraine-data/moraine/schemas/record"
)

// ActivitySchema is the SchemaHeader value of activity-topic records.
const ActivitySchema = "moraine.v1.Activity"

// EncodeActivity encodes an activity message deterministically.
func EncodeActivity(a *record.Activity) ([]byte, error) { return encode("activity", a) }

// DecodeActivity decodes an activity-topic value.
func DecodeActivity(b []byte) (*record.Activity, error) {
	a, err := decode[record.Activity]("activity", b)
	if err != nil {
		return nil, err
	}
	if a.WebhookId == "" || a.MessageId == "" {
		return nil, fmt.Errorf("decode activity: webhook id and message id are required")
	}
	return a, nil
}

// ActivityMessageID is the messageId of the activity of one transaction for
// one webhook: a UUID in the RFC 9562 version 8 layout whose 122 free bits
// are the first bits of SHA-256("<webhookId>|<decimal chainId>|0x<tx hash,
// lowercase hex>"). The same (webhook, chain, transaction) always gives the
// same id, so a redelivery or a reprocessed block repeats it and receivers
// can drop duplicates; different ones collide with negligible probability.
func ActivityMessageID(webhookID string, chainID uint64, txHash []byte) string {
	h := sha256.New()
	h.Write([]byte(webhookID))
	h.Write([]byte{'|'})
	h.Write(strconv.AppendUint(nil, chainID, 10))
	h.Write([]byte("|0x"))
	h.Write([]byte(hex.EncodeToString(txHash)))
	return uuid8(h.Sum(nil))
}

// uuid8 lays the first 122 bits of sum out as an RFC 9562 version 8 UUID.
func uuid8(sum []byte) string {
	var u [16]byte
	copy(u[:], sum)
	u[6] = u[6]&0x0f | 0x80 // version 8
	u[8] = u[8]&0x3f | 0x80 // variant 10
	var out [36]byte
	hex.Encode(out[0:8], u[0:4])
	out[8] = '-'
	hex.Encode(out[9:13], u[4:6])
	out[13] = '-'
	hex.Encode(out[14:18], u[6:8])
	out[18] = '-'
	hex.Encode(out[19:23], u[8:10])
	out[23] = '-'
	hex.Encode(out[24:], u[10:])
	return string(out[:])
}
