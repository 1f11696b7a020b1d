package server

import (
	"fmt"
	"net/url"
	"sort"
	"strings"
)

// singleValued refuses query strings that give a parameter more than one
// value: a repeated name ("pageSize=5&pageSize=500") or a bracketed one
// ("status[]=failed", "status[0]=failed"). Express's qs parser turns both
// into arrays or objects, and no parameter of the API takes one; reading
// the first value instead (what net/url and gin do) would answer a request
// nobody sent. The messages, one per offending name, are the 400's.
func singleValued(q url.Values) []string {
	var msgs []string
	names := make([]string, 0, len(q))
	for name := range q {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		if i := strings.IndexByte(name, '['); i >= 0 || strings.IndexByte(name, ']') >= 0 {
			base := name
			if i >= 0 {
				base = name[:i]
			}
			msgs = append(msgs, fmt.Sprintf("%s is not a parameter: give %s once, as %s=value (brackets are not supported)", name, base, base))
			continue
		}
		if n := len(q[name]); n > 1 {
			msgs = append(msgs, fmt.Sprintf("%s must be given once (it was given %d times)", name, n))
		}
	}
	return msgs
}
