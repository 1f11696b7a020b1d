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
// record batches (each consumer, the sink and the matcher, decompresses
// every one) and the rows of a batch live for one batch. In make bench's
// pipeline run (Gunzilla, 2 cores), ten runs alternating GOGC 100 and 300
// within one invocation gave the processor a median of 0.46 and 0.41 s of
// CPU per run, for a peak resident memory of 230 and 250 MB. ingest,
// measured the same way, gained nothing (0.63 and 0.65 s) for 85 MB more,
// so it keeps Go's default.
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
// before a collection: the processor's live heap in a long backfill of the
// corpus (make bench-backfill) was about 220 MB and its resident memory went
// to 1.3-1.8 GB with GOGC=300. A soft limit lets the garbage collector keep
// its high target (and its CPU saving) below the limit and collect sooner
// near it.
func DefaultMemoryLimit(bytes int64) int64 {
	if _, set := os.LookupEnv("GOMEMLIMIT"); set {
		return debug.SetMemoryLimit(-1)
	}
	debug.SetMemoryLimit(bytes)
	return bytes
}
