package evm

import "strings"

// ListedInternal reports whether a call frame is an internal transaction as
// the Data API lists them ("only CALL and CALLCODE internal transactions
// that had a non-zero value and CREATE/CREATE2/CREATE3 calls"): never the
// root frame (depth 0), which is the transaction itself. value is the
// frame's decimal value ("0" or "" for none).
func ListedInternal(depth uint32, typ, value string) bool {
	if depth == 0 {
		return false
	}
	switch typ {
	case "CALL", "CALLCODE":
		return value != "" && value != "0"
	}
	return strings.HasPrefix(typ, "CREATE")
}

// Reverts tells, for the frames of one transaction visited depth-first in
// pre-order (the order of the flattened callTracer tree), whether each
// frame's effects were undone: the frame failed, or a frame it runs inside
// did (a failed call reverts everything below it, successful subcalls
// included). The zero value is ready; use one per transaction.
type Reverts struct {
	byDepth []bool // whether the latest frame seen at each depth reverted
}

// Next returns whether the next frame, at depth with error message errMsg,
// reverted.
func (r *Reverts) Next(depth uint32, errMsg string) bool {
	reverted := errMsg != ""
	if d := int(depth); d > 0 && d <= len(r.byDepth) && r.byDepth[d-1] {
		reverted = true
	}
	d := int(depth)
	if d < len(r.byDepth) {
		r.byDepth = r.byDepth[:d+1]
	} else {
		for len(r.byDepth) <= d {
			r.byDepth = append(r.byDepth, false)
		}
	}
	r.byDepth[d] = reverted
	return reverted
}
