package reports

import (
	"cmp"
	"encoding/binary"
	"math"
	"net/netip"
	"slices"
	"time"

	"github.com/dmarcd/dmarcd/store/internal/codec"
	"github.com/dmarcd/dmarcd/store/internal/zst"
)

// Sealed roll-ups (issue 25): once a domain-day is closed, the seal job
// rewrites its roll-ups compressed, as nothing but a late report changes
// them any more. Both forms decode; ingest writes the plain ones (a late
// report's day goes back to them until the next seal run).
//
// A sealed source segment is sealedSegVersion, then the length of the
// payload (uvarint) and the payload as one zstd frame: the day's sources,
// one entry per IP, laid out in columns (appendSourceColumns).
//
// A sealed day roll-up is sealedDayVersion, then the same head as the plain
// form (reports and the summary's ten totals, varints: what the day totals
// and the disposition chart read without decompressing), then the length
// of the payload and the payload as one zstd frame: the summary's groups
// and the sources in columns (AppendSealedDayRollup), each address as its
// 4 or 16 bytes rather than its text, IPv4 ones delta-coded.
const (
	sealedSegVersion = 4
	sealedDayVersion = 2
)

// maxSealedPayload caps what a sealed value may claim to decompress to, so
// that a corrupt length cannot make a decoder allocate without bound.
const maxSealedPayload = 1 << 30

// appendZstd appends the length of payload and payload compressed.
func appendZstd(e []byte, payload []byte) []byte {
	enc, _ := zst.Codecs()
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
	_, dec := zst.Codecs()
	out, err := dec.DecodeAll(z, make([]byte, 0, n))
	if err != nil || uint64(len(out)) != n {
		return nil, errCorrupt
	}
	return out, nil
}

// AppendSealedSourceSegment encodes the sources of a domain-day as one
// sealed segment: sealedSegVersion and, compressed, the columns of
// appendSourceColumns.
func AppendSealedSourceSegment(e codec.Enc, day DaySources) codec.Enc {
	e = append(e, sealedSegVersion)
	return appendZstd(e, appendSourceColumns(make(codec.Enc, 0, 24*len(day)+64), day))
}

// appendSourceColumns lays the sources of a day out column by column, in
// address order, so that what is alike sits together for the compression
// (measured on generated days: a third smaller than the compressed rows
// of a plain segment):
//
//   - the strings (country codes, AS names, evidence domains: count, then
//     each), referenced as 1 + their index, 0 for none;
//   - the seen spans (count, then each first seen and last minus first,
//     Unix seconds);
//   - the number of sources n, then n addresses: a tag byte (4: the
//     difference from the previous IPv4 address as a uvarint, the sources
//     being in address order; 16: 16 bytes; 0: the row of other sources;
//     0xff: a text that is no canonical address, as a string);
//   - n span indexes;
//   - seven columns of n varints each: messages, and messages minus DMARC
//     passes, aligned SPF passes, aligned DKIM passes and dispositions
//     none (all mostly 0), then quarantined and rejected;
//   - n country references, n ASNs (codec.OptU32), n AS name references;
//   - n evidence counts, then for the m pieces of evidence in source
//     order: m kind bytes, m domain references, m (source messages minus
//     the evidence's messages), m (its messages minus its passes).
func appendSourceColumns(e codec.Enc, day DaySources) codec.Enc {
	srcs := make([]*SourceRollup, 0, len(day))
	for _, s := range day {
		srcs = append(srcs, s)
	}
	addrs := make(map[*SourceRollup]netip.Addr, len(srcs))
	for _, s := range srcs {
		addrs[s] = canonicalAddr(s.SourceIP)
	}
	slices.SortFunc(srcs, func(x, y *SourceRollup) int {
		return compareAddrs(addrs[x], addrs[y], x.SourceIP, y.SourceIP)
	})
	type span struct{ first, last int64 }
	var t strTable
	var spans []span
	spanIdx := map[span]uint64{}
	var refs []uint64 // country, AS name and evidence domain references, in source order
	for _, s := range srcs {
		sp := span{s.FirstSeen.Unix(), s.LastSeen.Unix()}
		if _, ok := spanIdx[sp]; !ok {
			spanIdx[sp] = uint64(len(spans))
			spans = append(spans, sp)
		}
		refs = append(refs, t.opt(s.CountryCode), t.opt(s.ASOrg))
		for _, ev := range s.Evidence {
			refs = append(refs, t.ref(ev.Domain))
		}
	}
	e = e.Uvarint(uint64(len(t.list)))
	for _, str := range t.list {
		e = e.Str(str)
	}
	e = e.Uvarint(uint64(len(spans)))
	for _, sp := range spans {
		e = e.Varint(sp.first).Varint(sp.last - sp.first)
	}
	e = e.Uvarint(uint64(len(srcs)))
	var ac addrColumn
	for _, s := range srcs {
		e = ac.append(e, addrs[s], s.SourceIP)
	}
	for _, s := range srcs {
		e = e.Uvarint(spanIdx[span{s.FirstSeen.Unix(), s.LastSeen.Unix()}])
	}
	for col := range 7 {
		for _, s := range srcs {
			e = e.Varint(countColumn(s, col))
		}
	}
	// refs per source: country, AS name, then one per piece of evidence.
	col := func(fn func(s *SourceRollup, r []uint64) codec.Enc) {
		r := refs
		for _, s := range srcs {
			e = fn(s, r)
			r = r[2+len(s.Evidence):]
		}
	}
	col(func(_ *SourceRollup, r []uint64) codec.Enc { return e.Uvarint(r[0]) })
	col(func(s *SourceRollup, _ []uint64) codec.Enc { return e.OptU32(s.ASN) })
	col(func(_ *SourceRollup, r []uint64) codec.Enc { return e.Uvarint(r[1]) })
	col(func(s *SourceRollup, _ []uint64) codec.Enc { return e.Uvarint(uint64(len(s.Evidence))) })
	col(func(s *SourceRollup, _ []uint64) codec.Enc {
		for _, ev := range s.Evidence {
			e = append(e, evKindByte(ev.Kind))
		}
		return e
	})
	col(func(s *SourceRollup, r []uint64) codec.Enc {
		for i := range s.Evidence {
			e = e.Uvarint(r[2+i])
		}
		return e
	})
	col(func(s *SourceRollup, _ []uint64) codec.Enc {
		for _, ev := range s.Evidence {
			e = e.Varint(s.Messages - ev.Messages)
		}
		return e
	})
	col(func(s *SourceRollup, _ []uint64) codec.Enc {
		for _, ev := range s.Evidence {
			e = e.Varint(ev.Messages - ev.Pass)
		}
		return e
	})
	return e
}

// countColumn is the value of source s in count column col (see
// appendSourceColumns); setCountColumn reverses it, in column order.
func countColumn(s *SourceRollup, col int) int64 {
	switch col {
	case 0:
		return s.Messages
	case 1:
		return s.Messages - s.DMARCPass
	case 2:
		return s.Messages - s.SPFAligned
	case 3:
		return s.Messages - s.DKIMAligned
	case 4:
		return s.Messages - s.Disposition.None
	case 5:
		return s.Disposition.Quarantine
	default:
		return s.Disposition.Reject
	}
}

func setCountColumn(s *SourceRollup, col int, v int64) {
	switch col {
	case 0:
		s.Messages = v
	case 1:
		s.DMARCPass = s.Messages - v
	case 2:
		s.SPFAligned = s.Messages - v
	case 3:
		s.DKIMAligned = s.Messages - v
	case 4:
		s.Disposition.None = s.Messages - v
	case 5:
		s.Disposition.Quarantine = v
	default:
		s.Disposition.Reject = v
	}
}

// decodeSourceColumns reads what appendSourceColumns wrote and calls fn
// with each source, in address order; the sources share their strings
// (the caller may keep them).
func decodeSourceColumns(payload []byte, fn func(*SourceRollup)) error {
	d := codec.NewDec(payload)
	table := make([]string, d.Count())
	for i := range table {
		table[i] = d.Str()
	}
	type span struct{ first, last time.Time }
	spans := make([]span, d.Count())
	for i := range spans {
		f := d.Varint()
		spans[i] = span{time.Unix(f, 0).UTC(), time.Unix(f+d.Varint(), 0).UTC()}
	}
	n := d.Count() // every source takes a byte at least: n is bounded by the payload
	if !d.Ok() {
		return errCorrupt
	}
	ptrs := make([]*string, len(table))
	ref := func() *string {
		k := d.Uvarint()
		switch {
		case k == 0:
			return nil
		case k > uint64(len(table)):
			d.Fail()
			return nil
		}
		if ptrs[k-1] == nil {
			ptrs[k-1] = &table[k-1]
		}
		return ptrs[k-1]
	}
	srcs := make([]SourceRollup, n)
	var ac addrColumn
	for i := range srcs {
		srcs[i].SourceIP = ac.read(&d)
	}
	for i := range srcs {
		k := d.Uvarint()
		if k >= uint64(len(spans)) {
			return errCorrupt
		}
		srcs[i].FirstSeen, srcs[i].LastSeen = spans[k].first, spans[k].last
	}
	for col := range 7 {
		for i := range srcs {
			setCountColumn(&srcs[i], col, d.Varint())
		}
	}
	for i := range srcs {
		srcs[i].CountryCode = ref()
	}
	for i := range srcs {
		srcs[i].ASN = d.OptU32()
	}
	for i := range srcs {
		srcs[i].ASOrg = ref()
	}
	counts := make([]int, n)
	m := 0
	for i := range counts {
		counts[i] = d.Count()
		if counts[i] > maxSourceEvidence {
			return errCorrupt
		}
		m += counts[i]
	}
	if !d.Ok() || m > d.Len() {
		return errCorrupt
	}
	evs := make([]Evidence, m)
	for i := range evs {
		switch d.Byte() {
		case evKindDKIM:
			evs[i].Kind = EvidenceDKIM
		case evKindSPF:
			evs[i].Kind = EvidenceSPF
		default:
			d.Fail()
		}
	}
	for i := range evs {
		if p := ref(); p != nil {
			evs[i].Domain = *p
		} else {
			d.Fail()
		}
	}
	// Each source's evidence, capped so that appending to it (Merge)
	// never writes over the next source's.
	at := 0
	for i := range srcs {
		if c := counts[i]; c > 0 {
			srcs[i].Evidence = evs[at : at+c : at+c]
			at += c
		}
	}
	for i := range srcs {
		for j := range srcs[i].Evidence {
			srcs[i].Evidence[j].Messages = srcs[i].Messages - d.Varint()
		}
	}
	for i := range srcs {
		for j := range srcs[i].Evidence {
			ev := &srcs[i].Evidence[j]
			ev.Pass = ev.Messages - d.Varint()
		}
	}
	if !d.Done() {
		return errCorrupt
	}
	for i := range srcs {
		fn(&srcs[i])
	}
	return nil
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

// AppendSealedDayRollup encodes r in the sealed form. Its payload is the
// summary's groups (appendSummaryGroups), the number of sources n, the
// strings of their countries and AS names (count, then each; referenced
// as 1 + their index, 0 for none), then columns of n: the addresses in
// address order (addrColumn), messages, messages minus passes, messages
// minus passes and failures (0 but for a hostile count), country
// references, ASNs (codec.OptU32) and AS name references.
func AppendSealedDayRollup(e codec.Enc, r *DayRollup) codec.Enc {
	s := r.Sum.Summary()
	e = append(e, sealedDayVersion)
	e = appendSummaryTotals(e.Varint(r.Reports), &s)
	ips := make([]string, 0, len(r.Src))
	addrs := make(map[string]netip.Addr, len(r.Src))
	for ip := range r.Src {
		ips = append(ips, ip)
		addrs[ip] = canonicalAddr(ip)
	}
	slices.SortFunc(ips, func(x, y string) int { return compareAddrs(addrs[x], addrs[y], x, y) })
	var t strTable
	refs := make([]uint64, 0, 2*len(ips))
	for _, ip := range ips {
		c := r.Src[ip]
		refs = append(refs, t.opt(c.CC), t.opt(c.ASOrg))
	}
	p := appendSummaryGroups(make(codec.Enc, 0, 8*len(ips)+256), &s)
	p = p.Uvarint(uint64(len(ips))).Uvarint(uint64(len(t.list)))
	for _, str := range t.list {
		p = p.Str(str)
	}
	var ac addrColumn
	for _, ip := range ips {
		p = ac.append(p, addrs[ip], ip)
	}
	for _, ip := range ips {
		p = p.Varint(r.Src[ip].Messages)
	}
	for _, ip := range ips {
		c := r.Src[ip]
		p = p.Varint(c.Messages - c.Pass)
	}
	for _, ip := range ips {
		c := r.Src[ip]
		p = p.Varint(c.Messages - c.Pass - c.Fail)
	}
	for i := range ips {
		p = p.Uvarint(refs[2*i])
	}
	for _, ip := range ips {
		p = p.OptU32(r.Src[ip].ASN)
	}
	for i := range ips {
		p = p.Uvarint(refs[2*i+1])
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
	n := p.Count() // every source takes a byte at least: n is bounded by the payload
	table := make([]string, p.Count())
	for i := range table {
		table[i] = p.Str()
	}
	if !p.Ok() {
		return nil, errCorrupt
	}
	ref := func() *string {
		k := p.Uvarint()
		switch {
		case k == 0:
			return nil
		case k > uint64(len(table)):
			p.Fail()
			return nil
		}
		return &table[k-1]
	}
	counts := make([]SourceCount, n)
	ips := make([]string, n)
	var ac addrColumn
	for i := range ips {
		ips[i] = ac.read(&p)
	}
	for i := range counts {
		counts[i].Messages = p.Varint()
	}
	for i := range counts {
		counts[i].Pass = counts[i].Messages - p.Varint()
	}
	for i := range counts {
		counts[i].Fail = counts[i].Messages - counts[i].Pass - p.Varint()
	}
	for i := range counts {
		counts[i].CC = ref()
	}
	for i := range counts {
		counts[i].ASN = p.OptU32()
	}
	for i := range counts {
		counts[i].ASOrg = ref()
	}
	if !p.Done() {
		return nil, errCorrupt
	}
	r.Src = make(SourceAcc, n)
	for i, ip := range ips {
		r.Src[ip] = &counts[i]
	}
	if len(r.Src) != n {
		return nil, errCorrupt
	}
	return r, nil
}

// canonicalAddr is the address ip is the canonical text of (as netip
// writes it, without a zone), or the zero Addr.
func canonicalAddr(ip string) netip.Addr {
	a, err := netip.ParseAddr(ip)
	if err != nil || a.Zone() != "" || a.String() != ip {
		return netip.Addr{}
	}
	return a
}

// compareAddrs orders sources by address (IPv4 first), those without a
// canonical one (the other sources, text) last, by their text.
func compareAddrs(x, y netip.Addr, xip, yip string) int {
	return cmp.Or(cmp.Compare(b2i(!x.IsValid()), b2i(!y.IsValid())), x.Compare(y), cmp.Compare(xip, yip))
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// addrColumn writes and reads a column of addresses in address order: an
// IPv4 address is tag 4 and its difference from the column's previous
// IPv4 address (uvarint, modulo 2^32), any other value as codec.Enc.Addr
// writes it (tag 16 and 16 bytes, 0 for the other sources, 0xff and a
// text that is no canonical address).
type addrColumn struct{ prev4 uint32 }

// append appends ip, whose canonical address is a (or the zero Addr).
func (c *addrColumn) append(e codec.Enc, a netip.Addr, ip string) codec.Enc {
	if !a.Is4() {
		return e.Addr(ip)
	}
	v := binary.BigEndian.Uint32(a.AsSlice())
	e = append(e, 4).Uvarint(uint64(v - c.prev4))
	c.prev4 = v
	return e
}

// read reads what append wrote.
func (c *addrColumn) read(d *codec.Dec) string {
	tag := d.Byte()
	if tag != 4 {
		return d.AddrAfter(tag)
	}
	delta := d.Uvarint()
	if delta > math.MaxUint32 {
		d.Fail()
		return ""
	}
	c.prev4 += uint32(delta)
	var b [4]byte
	binary.BigEndian.PutUint32(b[:], c.prev4)
	return netip.AddrFrom4(b).String()
}
