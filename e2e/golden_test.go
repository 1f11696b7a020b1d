package e2e

import (
	"encoding/csv"
	"encoding/json"
	"io"
	"os"
	"testing"

	"github.com/klauspost/compress/zstd"
)

// table is a golden warehouse CSV: a header and rows as maps.
type table []map[string]string

// readCSV loads a zstd-compressed CSV with a header line.
func readCSV(t testing.TB, path string) table {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := zstd.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	defer zr.Close()
	r := csv.NewReader(zr)
	r.FieldsPerRecord = -1
	r.LazyQuotes = true
	header, err := r.Read()
	if err != nil {
		t.Fatal(err)
	}
	for i, h := range header {
		// Some exports quote reserved words with backticks (`FROM`) or use lower case.
		h = trimAll(h, "`")
		header[i] = upper(h)
	}
	var out table
	for {
		rec, err := r.Read()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		row := make(map[string]string, len(header))
		for i, h := range header {
			if i < len(rec) {
				row[h] = rec[i]
			}
		}
		out = append(out, row)
	}
	return out
}

// rpcBlock is one recorded line: the RPC answers for a block.
type rpcBlock struct {
	Block    map[string]any   `json:"block"`
	Receipts []map[string]any `json:"receipts"`
	Traces   []map[string]any `json:"traces"`
}

// readRecording loads every line of a replay file.
func readRecording(t testing.TB, path string) []rpcBlock {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := zstd.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	defer zr.Close()
	dec := json.NewDecoder(zr)
	dec.UseNumber()
	var out []rpcBlock
	for {
		var b rpcBlock
		if err := dec.Decode(&b); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		out = append(out, b)
	}
	return out
}
