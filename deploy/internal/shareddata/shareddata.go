// Package shareddata finds the real chain data of ../shared/data for the
// tests of the deploy module.
package shareddata

import (
	"os"
	"path/filepath"
	"testing"
)

// Path finds a file under ../shared/data by walking up from the working
// directory (or under $MORAINE_SHARED_DATA); the test fails when it is
// absent.
func Path(tb testing.TB, rel string) string {
	tb.Helper()
	if d := os.Getenv("MORAINE_SHARED_DATA"); d != "" {
		return filepath.Join(d, rel)
	}
	dir, _ := os.Getwd()
	for range 6 {
		for _, p := range []string{filepath.Join(dir, "shared", "data", rel), filepath.Join(dir, "..", "shared", "data", rel)} {
			if _, err := os.Stat(p); err == nil {
				return p
			}
		}
		dir = filepath.Join(dir, "..")
	}
	tb.Fatalf("shared data %s not found: clone moraine beside ../shared or set MORAINE_SHARED_DATA", rel)
	return ""
}
