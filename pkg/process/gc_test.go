package process

import (
	"os"
	"runtime/debug"
	"testing"
)

// DefaultGOGC applies its percentage when GOGC is not set, and leaves the
// runtime's (GOGC's) setting alone when it is.
func TestDefaultGOGC(t *testing.T) {
	prev := debug.SetGCPercent(100)
	t.Cleanup(func() { debug.SetGCPercent(prev) })

	t.Setenv("GOGC", "50") // restored after the test
	debug.SetGCPercent(50) // what the runtime read from GOGC at start-up
	if got := DefaultGOGC(300); got != 50 {
		t.Errorf("GOGC=50 set: DefaultGOGC returned %d", got)
	}
	if cur := debug.SetGCPercent(50); cur != 50 {
		t.Errorf("GOGC=50 set: the percentage became %d", cur)
	}

	os.Unsetenv("GOGC")
	if got := DefaultGOGC(300); got != 300 {
		t.Errorf("GOGC unset: DefaultGOGC returned %d", got)
	}
	if cur := debug.SetGCPercent(100); cur != 300 {
		t.Errorf("GOGC unset: the percentage is %d, want 300", cur)
	}
}

// DefaultMemoryLimit applies its limit when GOMEMLIMIT is not set, and
// leaves the runtime's (GOMEMLIMIT's) limit alone when it is.
func TestDefaultMemoryLimit(t *testing.T) {
	prev := debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetMemoryLimit(prev) })

	t.Setenv("GOMEMLIMIT", "1GiB")
	debug.SetMemoryLimit(1 << 30) // what the runtime read from GOMEMLIMIT at start-up
	if got := DefaultMemoryLimit(768 << 20); got != 1<<30 {
		t.Errorf("GOMEMLIMIT set: DefaultMemoryLimit returned %d", got)
	}
	if cur := debug.SetMemoryLimit(-1); cur != 1<<30 {
		t.Errorf("GOMEMLIMIT set: the limit became %d", cur)
	}

	os.Unsetenv("GOMEMLIMIT")
	if got := DefaultMemoryLimit(768 << 20); got != 768<<20 {
		t.Errorf("GOMEMLIMIT unset: DefaultMemoryLimit returned %d", got)
	}
	if cur := debug.SetMemoryLimit(-1); cur != 768<<20 {
		t.Errorf("GOMEMLIMIT unset: the limit is %d, want 768 MiB", cur)
	}
}
