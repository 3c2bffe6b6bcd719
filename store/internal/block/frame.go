package block

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"

	"github.com/dmarcd/dmarcd/store/internal/zst"
)

// A frame is what Encode and EncodeTable return: a version byte, the
// CRC-32C (Castagnoli, little-endian) of the header part, the header part
// (a kind byte, kindRecords or kindTable, the header's length as a
// uvarint and the header: what a block says of itself uncompressed), the
// CRC-32C of the body part, and the body part (the payload's length
// before compression, uvarint, then the payload as one zstd frame). Two
// checksums, so that reading the header (ScanRuns) touches only it.
const (
	// Version is the first byte of every block. A later layout takes the
	// next number; Decode refuses one it does not know.
	Version = 1

	kindRecords = 'R'

	// maxPayload caps what a frame may claim to decompress to, so a
	// corrupt or hostile length cannot make Decode allocate without bound.
	maxPayload = 1 << 31
)

// ErrCorrupt is the error (wrapped) of a value that does not decode:
// truncated, a wrong checksum, an unknown version or kind, a column that
// does not add up.
var ErrCorrupt = errors.New("block: corrupt block")

func corrupt(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrCorrupt}, args...)...)
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// seal appends to dst the frame of header and payload.
func seal(dst []byte, kind byte, header, payload []byte) []byte {
	enc, _ := zst.Codecs()
	start := len(dst)
	dst = append(dst, Version, 0, 0, 0, 0, kind)
	dst = binary.AppendUvarint(dst, uint64(len(header)))
	dst = append(dst, header...)
	binary.LittleEndian.PutUint32(dst[start+1:], crc32.Checksum(dst[start+5:], castagnoli))
	body := len(dst)
	dst = append(dst, 0, 0, 0, 0)
	dst = binary.AppendUvarint(dst, uint64(len(payload)))
	dst = enc.EncodeAll(payload, dst)
	binary.LittleEndian.PutUint32(dst[body:], crc32.Checksum(dst[body+4:], castagnoli))
	return dst
}

// openHeader checks a frame's header part and returns the header and the
// body part, not checked yet.
func openHeader(b []byte, kind byte) (header, body []byte, err error) {
	if len(b) < 6 {
		return nil, nil, corrupt("%d bytes", len(b))
	}
	if b[0] != Version {
		return nil, nil, corrupt("unknown version %d", b[0])
	}
	n, k := binary.Uvarint(b[6:])
	if k <= 0 || n > uint64(len(b)-6-k) {
		return nil, nil, corrupt("header length")
	}
	end := 6 + k + int(n)
	if crc32.Checksum(b[5:end], castagnoli) != binary.LittleEndian.Uint32(b[1:]) {
		return nil, nil, corrupt("header checksum mismatch")
	}
	if b[5] != kind {
		return nil, nil, corrupt("kind %q, want %q", b[5], kind)
	}
	return b[6+k : end], b[end:], nil
}

// openBody checks a frame's body part and returns its payload,
// decompressed.
func openBody(b []byte) ([]byte, error) {
	if len(b) < 5 {
		return nil, corrupt("body of %d bytes", len(b))
	}
	if crc32.Checksum(b[4:], castagnoli) != binary.LittleEndian.Uint32(b) {
		return nil, corrupt("checksum mismatch")
	}
	n, k := binary.Uvarint(b[4:])
	if k <= 0 || n > maxPayload {
		return nil, corrupt("payload length")
	}
	z := b[4+k:]
	// A zstd block holds at most 128 KiB and takes at least 4 bytes: a
	// claim beyond 32,768 times the compressed bytes is a lie that must
	// not become an allocation.
	if n > uint64(len(z))*32768+64 {
		return nil, corrupt("payload length %d for %d compressed bytes", n, len(z))
	}
	_, dec := zst.Codecs()
	out, err := dec.DecodeAll(z, make([]byte, 0, n))
	if err != nil {
		return nil, corrupt("zstd: %v", err)
	}
	if uint64(len(out)) != n {
		return nil, corrupt("payload of %d bytes, header says %d", len(out), n)
	}
	return out, nil
}

// open checks a whole frame and returns its header and payload.
func open(b []byte, kind byte) (header, payload []byte, err error) {
	header, body, err := openHeader(b, kind)
	if err != nil {
		return nil, nil, err
	}
	payload, err = openBody(body)
	return header, payload, err
}
