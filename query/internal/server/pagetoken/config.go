package pagetoken

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Config says where the signing key comes from and how long tokens live.
//
// Every instance behind one load balancer must use the same key, or a token
// issued by one is rejected by the next. So the key is never random per
// process: it is --api.page-token-secret when set (production: the same
// secret on every instance, e.g. from a Kubernetes Secret through
// MORAINE_API_PAGE_TOKEN_SECRET), otherwise the contents of
// --api.page-token-secret-file, which is created with 32 random bytes when
// missing (one host, or a shared volume).
type Config struct {
	Secret     string
	SecretFile string
	TTL        time.Duration
}

// DefaultSecretFile is $MORAINE_STATE_DIR/query/page-token.key, or
// .moraine/query/page-token.key without the variable.
func DefaultSecretFile() string {
	dir := os.Getenv("MORAINE_STATE_DIR")
	if dir == "" {
		dir = ".moraine"
	}
	return filepath.Join(dir, "query", "page-token.key")
}

// RegisterFlags adds the --api.page-token-* flags.
func (c *Config) RegisterFlags(fs *flag.FlagSet) {
	fs.StringVar(&c.Secret, "api.page-token-secret", "", "key (at least 32 characters) that signs page tokens; every instance must share it. Empty: read --api.page-token-secret-file")
	fs.StringVar(&c.SecretFile, "api.page-token-secret-file", DefaultSecretFile(), "file holding the page-token key, created with a random key when missing (used when --api.page-token-secret is empty)")
	fs.DurationVar(&c.TTL, "api.page-token-ttl", 24*time.Hour, "how long a page token stays valid (0: forever); the hosted API uses 24h")
}

// Validate checks the settings without touching the file system.
func (c Config) Validate() error {
	if c.Secret != "" && len(c.Secret) < 32 {
		return errors.New("pagetoken: --api.page-token-secret must be at least 32 characters")
	}
	if c.Secret == "" && c.SecretFile == "" {
		return errors.New("pagetoken: set --api.page-token-secret or --api.page-token-secret-file")
	}
	if c.TTL < 0 {
		return errors.New("pagetoken: --api.page-token-ttl must not be negative")
	}
	return nil
}

// String redacts the secret.
func (c Config) String() string {
	s := "<file " + c.SecretFile + ">"
	if c.Secret != "" {
		s = "<redacted>"
	}
	return fmt.Sprintf("pagetoken.Config{Secret:%s TTL:%s}", s, c.TTL)
}

// Key returns the signing key: the secret, or the file's contents (the file
// is created with a random hex key, mode 0600, when it does not exist; two
// processes creating it at once agree on the first one written).
func (c Config) Key() ([]byte, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	if c.Secret != "" {
		return []byte(c.Secret), nil
	}
	b, err := os.ReadFile(c.SecretFile)
	if errors.Is(err, fs.ErrNotExist) {
		b, err = create(c.SecretFile)
	}
	if err != nil {
		return nil, fmt.Errorf("pagetoken: key file: %w", err)
	}
	key := strings.TrimSpace(string(b))
	if len(key) < 32 {
		return nil, fmt.Errorf("pagetoken: key file %s holds fewer than 32 characters", c.SecretFile)
	}
	return []byte(key), nil
}

func create(path string) ([]byte, error) {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	raw := make([]byte, 32)
	if _, err := rand.Read(raw); err != nil {
		return nil, err
	}
	key := []byte(hex.EncodeToString(raw) + "\n")
	// Write a complete temporary file, then hard-link it into place: the
	// link either appears whole or fails because another process's key is
	// already there, in which case that key wins.
	tmp, err := os.CreateTemp(dir, ".page-token-*.tmp")
	if err != nil {
		return nil, err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(key); err != nil {
		tmp.Close()
		return nil, err
	}
	if err := tmp.Close(); err != nil {
		return nil, err
	}
	if err := os.Link(tmp.Name(), path); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return os.ReadFile(path)
		}
		return nil, err
	}
	return key, nil
}
