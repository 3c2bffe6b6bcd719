package store

import (
	"encoding/binary"
	"fmt"
	"reflect"
	"testing"

	"github.com/dmarcd/dmarcd/store/internal/block"
)

// blockFixture is three reports' runs (the second from its 100th record,
// as the rest of a report larger than a block) and their rows.
func blockFixture() ([]blockEntry, []block.Row) {
	entries := []blockEntry{
		{report: [16]byte{1, 1}, first: 0, count: 3},
		{report: [16]byte{1, 2}, first: 100, count: 2},
		{report: [16]byte{2, 9}, first: 0, count: 1},
	}
	var rows []block.Row
	for i, e := range entries {
		for j := range e.count {
			rows = append(rows, block.Row{Report: uint32(i), Index: e.first + j,
				Rec: Record{SourceIP: fmt.Sprintf("192.0.2.%d", 10*i+int(j)), Count: int64(j + 1), Disposition: "none",
					DKIM: "pass", SPF: "fail", HeaderFrom: "example.com", Reasons: []Reason{},
					AuthResults: AuthResults{DKIM: []DKIMAuth{}, SPF: []SPFAuth{}}}})
		}
	}
	return entries, rows
}

// encodeBlockColumns writes a block as schema 9 did (blockFormatColumns:
// the store's table of runs before the columnar block).
func encodeBlockColumns(entries []blockEntry, rows []block.Row) ([]byte, error) {
	out := []byte{blockFormatColumns}
	out = binary.AppendUvarint(out, uint64(len(entries)))
	ids := make([][16]byte, len(entries))
	for i, e := range entries {
		ids[i] = e.report
		out = append(out, e.report[:]...)
		out = binary.AppendUvarint(out, uint64(e.first))
		out = binary.AppendUvarint(out, uint64(e.count))
		out = binary.AppendUvarint(out, uint64(e.size))
	}
	return block.Encode(out, ids, rows)
}

// TestBlockFormats ensures a block of either format reads as the same
// table of runs and the same records, that the new one is smaller, and
// that a damaged table of the new one is an error, not a panic.
func TestBlockFormats(t *testing.T) {
	entries, rows := blockFixture()
	runs, err := encodeBlock(entries, rows)
	if err != nil {
		t.Fatal(err)
	}
	cols, err := encodeBlockColumns(entries, rows)
	if err != nil {
		t.Fatal(err)
	}
	if runs[0] != blockFormatRuns || len(runs) >= len(cols) {
		t.Fatalf("format %d of %d bytes, schema 9's takes %d", runs[0], len(runs), len(cols))
	}
	var want [][]Record
	for _, v := range [][]byte{cols, runs} {
		h, err := decodeBlockHeader(v)
		if err != nil {
			t.Fatalf("format %d: %v", v[0], err)
		}
		if !reflect.DeepEqual(h.entries, entries) {
			t.Fatalf("format %d: entries %+v, want %+v", v[0], h.entries, entries)
		}
		d, err := h.decode()
		if err != nil {
			t.Fatalf("format %d: %v", v[0], err)
		}
		if want == nil {
			want = d.runs
		} else if !reflect.DeepEqual(d.runs, want) {
			t.Fatalf("format %d reads other records", v[0])
		}
		// Stopping at the second entry returns no body and no error.
		seen := 0
		if body, err := scanBlockHeader(v, func(i int, _ *blockEntry, _ int) bool { seen++; return i < 1 }); err != nil || body != nil || seen != 2 {
			t.Fatalf("format %d stopped: %d seen, %v", v[0], seen, err)
		}
	}
	if len(want) != 3 || len(want[0]) != 3 || want[1][0].SourceIP != "192.0.2.10" {
		t.Fatalf("records %+v", want)
	}
	for cut := 1; cut < len(runs); cut++ {
		if h, err := decodeBlockHeader(runs[:cut]); err == nil {
			if _, err := h.decode(); err == nil {
				t.Fatalf("a block cut at %d of %d bytes decoded", cut, len(runs))
			}
		}
	}
	if _, err := decodeBlockHeader([]byte{blockFormatRuns}); err == nil {
		t.Fatal("an empty block of the new format decoded")
	}
}
