package block

import (
	"encoding/binary"
	"math/rand/v2"
	"testing"
)

// FuzzDecode ensures no input makes the decoders panic: whole frames
// (mostly stopped by the checksum) and payloads past it, read every way.
func FuzzDecode(f *testing.F) {
	r := rand.New(rand.NewPCG(1, 1))
	ids, rows := smallBlock(r, 2, 6)
	enc, _ := Encode(nil, ids, rows)
	f.Add(enc)
	_, p, _ := open(enc, kindRecords)
	f.Add(p)
	table, _ := EncodeTable(nil, []TableEntry{{ID: ids[0], Val: []byte("report value")}})
	f.Add(table)
	_, tp, _ := open(table, kindTable)
	f.Add(tp)
	f.Add([]byte{})
	f.Add([]byte{Version, 0, 0, 0, 0, kindRecords, 0xff, 0xff, 0xff, 0xff, 0x07})
	f.Fuzz(func(t *testing.T, b []byte) {
		if blk, err := Decode(b); err == nil {
			_, _ = blk.Rows()
		}
		_, _ = DecodeTable(b)
		_ = ScanRuns(b, func(uint32, [16]byte, uint32, uint32) error { return nil })
		_, _ = readHeader(b)
		readAll(b)
	})
}

// FuzzRoundTrip builds rows from the fuzzer's bytes and checks they come
// back exactly.
func FuzzRoundTrip(f *testing.F) {
	f.Add(uint64(1), uint8(3), uint16(10))
	f.Add(uint64(2), uint8(1), uint16(0))
	f.Add(uint64(99), uint8(200), uint16(500))
	f.Fuzz(func(t *testing.T, seed uint64, nReports uint8, nRows uint16) {
		r := rand.New(rand.NewPCG(seed, binary.LittleEndian.Uint64([]byte("roundtri"))))
		ids, rows := randBlock(r, int(nReports)+1, int(nRows%2000))
		roundTrip(t, ids, rows)
	})
}
