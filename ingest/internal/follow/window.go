package follow

import "sort"

// produced is what the follower remembers of a block it produced.
type produced struct {
	Number     uint64
	Hash       []byte
	Cumulative uint64
}

// window holds the most recently produced blocks in ascending number order:
// the parent-hash check of the next block, the walk back to the common
// ancestor of a reorg, and the cumulative count to restart from.
type window struct {
	entries []produced
	size    int
}

func newWindow(size int) *window { return &window{size: size} }

// push appends a block; numbers must ascend.
func (w *window) push(p produced) {
	w.entries = append(w.entries, p)
	if len(w.entries) > 2*w.size {
		// Trim in bulk so that pushes stay O(1) amortised.
		n := copy(w.entries, w.entries[len(w.entries)-w.size:])
		clear(w.entries[n:])
		w.entries = w.entries[:n]
	}
}

func (w *window) len() int { return len(w.entries) }

func (w *window) last() (produced, bool) {
	if len(w.entries) == 0 {
		return produced{}, false
	}
	return w.entries[len(w.entries)-1], true
}

func (w *window) first() (produced, bool) {
	if len(w.entries) == 0 {
		return produced{}, false
	}
	return w.entries[0], true
}

// get returns the block produced at number n, if it is in the window.
func (w *window) get(n uint64) (produced, bool) {
	i := sort.Search(len(w.entries), func(i int) bool { return w.entries[i].Number >= n })
	if i < len(w.entries) && w.entries[i].Number == n {
		return w.entries[i], true
	}
	return produced{}, false
}

// truncateAbove removes and returns the blocks numbered above n.
func (w *window) truncateAbove(n uint64) []produced {
	i := sort.Search(len(w.entries), func(i int) bool { return w.entries[i].Number > n })
	removed := append([]produced(nil), w.entries[i:]...)
	clear(w.entries[i:])
	w.entries = w.entries[:i]
	return removed
}

// trim keeps only the newest size entries.
func (w *window) trim() {
	if len(w.entries) > w.size {
		n := copy(w.entries, w.entries[len(w.entries)-w.size:])
		clear(w.entries[n:])
		w.entries = w.entries[:n]
	}
}
