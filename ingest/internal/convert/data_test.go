package convert

import (
	"bufio"
	"encoding/csv"
	"encoding/json"
	"io"
	"os"
	"strings"
	"testing"

	"github.com/klauspost/compress/zstd"
	"github.com/stretchr/testify/require"

	"github.com/moraine-data/moraine/pkg/jsonx"
	"github.com/moraine-data/moraine/pkg/testenv"
)

// line is one line of the recorded JSONL files in shared/data.
type line struct {
	Block    json.RawMessage `json:"block"`
	Receipts json.RawMessage `json:"receipts"`
	Traces   json.RawMessage `json:"traces"`
}

func (l line) raw() Raw { return Raw{Block: l.Block, Receipts: l.Receipts, Traces: l.Traces} }

// openShared opens a file of shared/data, unpacking .zst on the fly.
func openShared(t testing.TB, rel string) io.Reader {
	t.Helper()
	f, err := os.Open(testenv.SharedData(t, rel))
	require.NoError(t, err)
	t.Cleanup(func() { f.Close() })
	if !strings.HasSuffix(rel, ".zst") {
		return f
	}
	zr, err := zstd.NewReader(f)
	require.NoError(t, err)
	t.Cleanup(zr.Close)
	return zr
}

// readJSONL reads a recorded block file.
func readJSONL(t testing.TB, rel string) []line {
	t.Helper()
	sc := bufio.NewScanner(openShared(t, rel))
	sc.Buffer(make([]byte, 1<<20), 1<<30)
	var out []line
	for sc.Scan() {
		// Split the line with jsonx (one pass): encoding/json would scan the
		// 100 MB recording twice more, which the race detector makes slow.
		buf := append([]byte(nil), sc.Bytes()...)
		r := jsonx.NewReader(buf)
		var l line
		err := r.Object(func(k []byte) error {
			v, err := r.Raw()
			switch string(k) {
			case "block":
				l.Block = v
			case "receipts":
				l.Receipts = v
			case "traces":
				l.Traces = v
			}
			return err
		})
		require.NoError(t, err)
		out = append(out, l)
	}
	require.NoError(t, sc.Err())
	return out
}

// table is a warehouse CSV: column names (backquotes removed, upper-cased)
// and rows.
type table struct {
	col  map[string]int
	rows [][]string
}

func readCSV(t testing.TB, rel string) table {
	t.Helper()
	r := csv.NewReader(openShared(t, rel))
	r.ReuseRecord = false
	header, err := r.Read()
	require.NoError(t, err)
	tb := table{col: map[string]int{}}
	for i, h := range header {
		tb.col[strings.ToUpper(strings.Trim(h, "`"))] = i
	}
	for {
		rec, err := r.Read()
		if err == io.EOF {
			break
		}
		require.NoError(t, err)
		tb.rows = append(tb.rows, rec)
	}
	return tb
}

// get returns a row's value of a column; the column must exist.
func (tb table) get(t testing.TB, row []string, name string) string {
	i, ok := tb.col[name]
	if !ok {
		t.Fatalf("column %s not in %v", name, tb.col)
	}
	return row[i]
}

// index maps the values of key columns (joined by "/") to rows.
func (tb table) index(t testing.TB, keys ...string) map[string][]string {
	t.Helper()
	out := make(map[string][]string, len(tb.rows))
	for _, row := range tb.rows {
		parts := make([]string, len(keys))
		for i, k := range keys {
			parts[i] = strings.ToLower(tb.get(t, row, k))
		}
		k := strings.Join(parts, "/")
		_, dup := out[k]
		require.Falsef(t, dup, "duplicate key %s", k)
		out[k] = row
	}
	return out
}
