package process

import (
	"os"
	"runtime/debug"
)

// DefaultGOGC sets the garbage collector's target (GOGC) to percent unless
// the GOGC environment variable is set, which keeps the last word. It
// returns the setting in force.
//
// The processor turns over far more memory than it keeps: decompressed
// record batches and the rows of a batch live for one batch, so collecting
// less often saves CPU for little more peak memory. ingest keeps Go's
// default: a higher target gained it no CPU and cost memory. The
// measurements are in bench/history.md.
func DefaultGOGC(percent int) int {
	if _, set := os.LookupEnv("GOGC"); set {
		cur := debug.SetGCPercent(100)
		debug.SetGCPercent(cur)
		return cur
	}
	debug.SetGCPercent(percent)
	return percent
}

// DefaultMemoryLimit sets the runtime's soft memory limit (GOMEMLIMIT) to
// bytes unless the GOMEMLIMIT environment variable is set, which keeps the
// last word. It returns the limit in force.
//
// With a high GC target the heap grows to several times what is live
// before a collection, and in a long backfill the processor's resident
// memory grew to many times its live heap. A soft limit lets the garbage
// collector keep its high target (and its CPU saving) below the limit and
// collect sooner near it.
func DefaultMemoryLimit(bytes int64) int64 {
	if _, set := os.LookupEnv("GOMEMLIMIT"); set {
		return debug.SetMemoryLimit(-1)
	}
	debug.SetMemoryLimit(bytes)
	return bytes
}
