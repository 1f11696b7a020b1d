package auth

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"regexp"
)

// KeyPrefix starts every moraine API key.
const KeyPrefix = "mk_"

// keyPattern is the whole key: the prefix and 32 random bytes in lowercase
// hex (256 bits: guessing is hopeless, so a plain SHA-256 is the right
// storage hash; slow password hashes are for low-entropy secrets).
var keyPattern = regexp.MustCompile(`^mk_[0-9a-f]{64}$`)

// NewKey is a freshly generated key with what is stored of it.
type NewKey struct {
	// Key is shown to the operator once and never stored.
	Key string
	// Hash is the hex SHA-256 of Key, the only stored form.
	Hash string
	// ID names the key for listing and revoking: the first 16 hex digits of
	// Hash, so it reveals nothing of the key.
	ID string
	// Prefix is the key's first 11 characters ("mk_" and 8 hex digits), for
	// an operator to recognise a key they hold.
	Prefix string
}

// GenerateKey returns a new random key.
func GenerateKey() (NewKey, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return NewKey{}, err
	}
	return Describe(KeyPrefix + hex.EncodeToString(b)), nil
}

// Describe returns the stored forms of key.
func Describe(key string) NewKey {
	h := HashKey(key)
	p := key
	if len(p) > 11 {
		p = p[:11]
	}
	return NewKey{Key: key, Hash: h, ID: h[:16], Prefix: p}
}

// HashKey is the hex SHA-256 of key.
func HashKey(key string) string {
	s := sha256.Sum256([]byte(key))
	return hex.EncodeToString(s[:])
}

// WellFormed reports whether key has the shape of a moraine key (checked
// before any lookup, so garbage never reaches the database).
func WellFormed(key string) bool { return keyPattern.MatchString(key) }
