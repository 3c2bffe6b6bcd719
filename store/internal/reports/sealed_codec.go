package reports

import (
	"cmp"
	"encoding/binary"
	"net/netip"
	"slices"
	"sync"

	"github.com/klauspost/compress/zstd"

	"github.com/dmarcd/dmarcd/store/internal/codec"
)

// Sealed roll-ups (issue 25): once a domain-day is closed, the seal job
// rewrites its roll-ups compressed, as nothing but a late report changes
// them any more. Both forms decode; ingest writes the plain ones (a late
// report's day goes back to them until the next seal run).
//
// A sealed source segment is sealedSegVersion, then the length of the
// payload (uvarint) and the payload as one zstd frame; the payload is a
// segVersion segment's blocks without its version byte (AppendSourceSegment:
// one entry per source, in blocks of the same seen times, IPs in order).
//
// A sealed day roll-up is sealedDayVersion, then the same head as the plain
// form (reports and the summary's ten totals, varints: what the day totals
// and the disposition chart read without decompressing), then the length
// of the payload and the payload as one zstd frame: the summary's groups
// and the sources, each address as its 4 or 16 bytes (codec.Addr) rather
// than its text, in address order.
const (
	sealedSegVersion = 4
	sealedDayVersion = 2
)

// maxSealedPayload caps what a sealed value may claim to decompress to, so
// that a corrupt length cannot make a decoder allocate without bound.
const maxSealedPayload = 1 << 30

// The zstd encoder and decoder are made once (they are expensive) and are
// safe for concurrent EncodeAll and DecodeAll.
var (
	zOnce sync.Once
	zEnc  *zstd.Encoder
	zDec  *zstd.Decoder
)

func zstdCodecs() (*zstd.Encoder, *zstd.Decoder) {
	zOnce.Do(func() {
		var err error
		// Sealing runs in the background and a sealed day is read many
		// times: the better level is worth its time.
		zEnc, err = zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedBetterCompression),
			zstd.WithEncoderCRC(false), zstd.WithEncoderConcurrency(1), zstd.WithLowerEncoderMem(true))
		if err != nil {
			panic(err) // only for invalid options
		}
		zDec, err = zstd.NewReader(nil, zstd.WithDecoderConcurrency(0), zstd.WithDecoderMaxMemory(maxSealedPayload),
			zstd.IgnoreChecksum(true))
		if err != nil {
			panic(err)
		}
	})
	return zEnc, zDec
}

// appendZstd appends the length of payload and payload compressed.
func appendZstd(e []byte, payload []byte) []byte {
	enc, _ := zstdCodecs()
	e = binary.AppendUvarint(e, uint64(len(payload)))
	return enc.EncodeAll(payload, e)
}

// openZstd reads what appendZstd wrote: all of b.
func openZstd(b []byte) ([]byte, error) {
	n, k := binary.Uvarint(b)
	if k <= 0 || n > maxSealedPayload {
		return nil, errCorrupt
	}
	z := b[k:]
	// A zstd block holds at most 128 KiB and takes at least 4 bytes: a
	// claim beyond 32,768 times the compressed bytes is a lie that must
	// not become an allocation.
	if n > uint64(len(z))*32768+64 {
		return nil, errCorrupt
	}
	_, dec := zstdCodecs()
	out, err := dec.DecodeAll(z, make([]byte, 0, n))
	if err != nil || uint64(len(out)) != n {
		return nil, errCorrupt
	}
	return out, nil
}

// AppendSealedSourceSegment encodes the sources of a domain-day as one
// sealed segment.
func AppendSealedSourceSegment(e codec.Enc, day DaySources) codec.Enc {
	plain := AppendSourceSegment(make(codec.Enc, 0, 64*len(day)+16), day)
	e = append(e, sealedSegVersion)
	return appendZstd(e, plain[1:])
}

// SourceSegmentSealed reports whether raw is a sealed segment.
func SourceSegmentSealed(raw []byte) bool {
	return len(raw) > 0 && raw[0] == sealedSegVersion
}

// DayRollupSealed reports whether raw is a sealed day roll-up.
func DayRollupSealed(raw []byte) bool {
	return len(raw) > 0 && raw[0] == sealedDayVersion
}

// dayHeadVarints is how many varints the head of a day roll-up has after
// its version byte: reports, then appendSummaryTotals' ten.
const dayHeadVarints = 11

// DayRollupHead returns the head of an encoded day roll-up, plain or
// sealed, as the plain form writes it: its version byte (codecVersion)
// and the varints of the reports and the summary's totals, then the rest
// (the plain form's groups and sources, or the sealed form's payload).
func DayRollupHead(raw []byte) (head []byte, err error) {
	d := codec.NewDec(raw)
	switch d.Byte() {
	case codecVersion, sealedDayVersion:
	default:
		return nil, errCorrupt
	}
	for range dayHeadVarints {
		d.Varint()
	}
	if !d.Ok() {
		return nil, errCorrupt
	}
	head = append([]byte{codecVersion}, raw[1:len(raw)-d.Len()]...)
	return head, nil
}

// SealDayRollup returns the sealed form of the day roll-up raw (plain or
// sealed).
func SealDayRollup(raw []byte) ([]byte, error) {
	r, err := DecodeDayRollup(raw)
	if err != nil {
		return nil, err
	}
	return AppendSealedDayRollup(make(codec.Enc, 0, len(raw)/2+64), r), nil
}

// AppendSealedDayRollup encodes r in the sealed form.
func AppendSealedDayRollup(e codec.Enc, r *DayRollup) codec.Enc {
	s := r.Sum.Summary()
	e = append(e, sealedDayVersion)
	e = appendSummaryTotals(e.Varint(r.Reports), &s)
	p := appendSummaryGroups(make(codec.Enc, 0, 32*len(r.Src)+256), &s)
	p = p.Uvarint(uint64(len(r.Src)))
	for _, ip := range sortedAddrs(r.Src) {
		c := r.Src[ip]
		p = p.Addr(ip).Varint(c.Messages).Varint(c.Pass).Varint(c.Fail).Opt(c.CC).OptU32(c.ASN).Opt(c.ASOrg)
	}
	return appendZstd(e, p)
}

// decodeSealedDayRollup reads what AppendSealedDayRollup wrote.
func decodeSealedDayRollup(raw []byte) (*DayRollup, error) {
	d := codec.NewDec(raw)
	if d.Byte() != sealedDayVersion {
		return nil, errCorrupt
	}
	r := &DayRollup{Reports: d.Varint()}
	var s Summary
	decodeSummaryTotals(&d, &s)
	if !d.Ok() {
		return nil, errCorrupt
	}
	payload, err := openZstd(raw[len(raw)-d.Len():])
	if err != nil {
		return nil, err
	}
	r.Size = len(raw) - d.Len() + len(payload)
	p := codec.NewDec(payload)
	decodeSummaryGroups(&p, &s)
	r.Sum = accOf(&s)
	n := p.Count()
	r.Src = make(SourceAcc, n)
	for range n {
		ip := p.Addr()
		r.Src[ip] = &SourceCount{Messages: p.Varint(), Pass: p.Varint(), Fail: p.Varint(), CC: p.Opt(), ASN: p.OptU32(), ASOrg: p.Opt()}
	}
	if !p.Done() || len(r.Src) != n {
		return nil, errCorrupt
	}
	return r, nil
}

// sortedAddrs returns the IPs of src in address order (IPv4 first, text
// that is no address last): neighbours share their leading bytes, which
// the compression finds.
func sortedAddrs(src SourceAcc) []string {
	type key struct {
		a  netip.Addr
		ip string
	}
	keys := make([]key, 0, len(src))
	for ip := range src {
		a, _ := netip.ParseAddr(ip)
		keys = append(keys, key{a, ip})
	}
	slices.SortFunc(keys, func(x, y key) int {
		return cmp.Or(cmp.Compare(b2i(!x.a.IsValid()), b2i(!y.a.IsValid())), x.a.Compare(y.a), cmp.Compare(x.ip, y.ip))
	})
	out := make([]string, len(keys))
	for i := range keys {
		out[i] = keys[i].ip
	}
	return out
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}
