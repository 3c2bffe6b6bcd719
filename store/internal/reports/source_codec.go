package reports

import (
	"time"

	"github.com/dmarcd/dmarcd/store/internal/codec"
)

// A segment (segVersion, its first byte) is blocks, each with a table of
// its strings: a block's sources mostly share a few AS names and
// evidence domains, and an address takes its 4 or 16 bytes, not its text.
//
// A block is the first and last seen times (Unix seconds, the second as a
// delta), the number of entries n, the number of strings and the strings,
// then n entries: the address (a tag byte: 0 for the row of other
// sources, 4 or 16 followed by as many bytes, 0xff followed by the text of
// one that is not in canonical form), the seven counts, the country code
// and AS name as string references (0: none, k: the k-th string), the AS
// number, and the evidence, each a kind byte (evKindDKIM, evKindSPF), a
// domain reference and its messages and passes.
//
// Version 3 is schema 8's: versions 1 and 2 kept (kind, domain, result)
// auth entries, split by result and cut at eight per source and day, so
// that a source's verified signature could be lost behind its failing
// SPF results; the migration rebuilt every segment from the records.
const segVersion = 3

// Evidence kinds as a byte.
const (
	evKindDKIM = 1
	evKindSPF  = 2
)

func evKindByte(kind string) byte {
	if kind == EvidenceDKIM {
		return evKindDKIM
	}
	return evKindSPF
}

// strTable numbers the strings of a block, in the order first used. A
// block mostly has a handful (a country, an AS name, two auth domains), so
// they are looked up in the list itself; a map is made only past
// strTableScan of them, as a merged segment of a busy day may have
// hundreds.
type strTable struct {
	list []string
	idx  map[string]uint64 // nil until the list grows past strTableScan
	s    SourceRollup      // appendSourceBlock's scratch, which get fills in
	refs []uint64          // appendSourceBlock's references, in the order it makes them
}

// strTableScan is how many strings are looked up by going through them.
const strTableScan = 16

func (t *strTable) reset() {
	clear(t.list) // a pooled table keeps no strings of the last block
	t.list, t.refs = t.list[:0], t.refs[:0]
	if t.idx != nil {
		clear(t.idx)
	}
}

// ref returns the reference of s, adding it.
func (t *strTable) ref(s string) uint64 {
	if len(t.list) <= strTableScan {
		for i, have := range t.list {
			if have == s {
				return uint64(i + 1)
			}
		}
	} else if i, ok := t.idx[s]; ok {
		return i
	}
	t.list = append(t.list, s)
	i := uint64(len(t.list))
	switch {
	case len(t.list) == strTableScan+1:
		if t.idx == nil {
			t.idx = make(map[string]uint64, 2*strTableScan)
		}
		for k, have := range t.list {
			t.idx[have] = uint64(k + 1)
		}
	case len(t.list) > strTableScan+1:
		t.idx[s] = i
	}
	return i
}

func (t *strTable) opt(s *string) uint64 {
	if s == nil {
		return 0
	}
	return t.ref(*s)
}

// appendSourceBlock appends a block of the n sources get gives, seen
// from first to last. get is called twice for each: for the table, then
// for the entry; what it fills in must stay the same. The first pass keeps
// the references it looked up, in order, for the second.
func appendSourceBlock(e codec.Enc, t *strTable, first, last int64, n int, get func(i int, s *SourceRollup)) codec.Enc {
	t.reset()
	s := &t.s
	for i := range n {
		get(i, s)
		t.refs = append(t.refs, t.opt(s.CountryCode), t.opt(s.ASOrg))
		for _, ev := range s.Evidence {
			t.refs = append(t.refs, t.ref(ev.Domain))
		}
	}
	e = appendBlockHeader(e, first, last, n)
	e = e.Uvarint(uint64(len(t.list)))
	for _, str := range t.list {
		e = e.Str(str)
	}
	refs := t.refs
	for i := range n {
		get(i, s)
		e = e.Addr(s.SourceIP) // OtherSources is "": no address
		e = e.Varint(s.Messages).Varint(s.DMARCPass).Varint(s.SPFAligned).Varint(s.DKIMAligned)
		e = e.Varint(s.Disposition.None).Varint(s.Disposition.Quarantine).Varint(s.Disposition.Reject)
		e = e.Uvarint(refs[0]).OptU32(s.ASN).Uvarint(refs[1])
		refs = refs[2:]
		e = e.Uvarint(uint64(len(s.Evidence)))
		for _, ev := range s.Evidence {
			e = append(e, evKindByte(ev.Kind))
			e = e.Uvarint(refs[0]).Varint(ev.Messages).Varint(ev.Pass)
			refs = refs[1:]
		}
	}
	return e
}

// decodeSourceBlock reads one block and calls fn with each of its
// sources, which share their strings (the caller may keep them).
func decodeSourceBlock(d *codec.Dec, fn func(*SourceRollup)) error {
	f := d.Varint()
	first, last := time.Unix(f, 0).UTC(), time.Unix(f+d.Varint(), 0).UTC()
	n := d.Count()
	table := make([]string, d.Count())
	for i := range table {
		table[i] = d.Str()
	}
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
	for range n {
		s := &SourceRollup{SourceIP: d.Addr(), Messages: d.Varint(), DMARCPass: d.Varint(),
			SPFAligned: d.Varint(), DKIMAligned: d.Varint(), FirstSeen: first, LastSeen: last}
		s.Disposition = DispositionCount{None: d.Varint(), Quarantine: d.Varint(), Reject: d.Varint()}
		s.CountryCode = ref()
		s.ASN = d.OptU32()
		s.ASOrg = ref()
		ne := d.Count()
		if ne > maxSourceEvidence {
			return errCorrupt
		}
		if ne > 0 {
			s.Evidence = make([]Evidence, ne)
			for i := range s.Evidence {
				ev := &s.Evidence[i]
				switch d.Byte() {
				case evKindDKIM:
					ev.Kind = EvidenceDKIM
				case evKindSPF:
					ev.Kind = EvidenceSPF
				default:
					d.Fail()
				}
				if p := ref(); p != nil {
					ev.Domain = *p
				} else {
					d.Fail()
				}
				ev.Messages, ev.Pass = d.Varint(), d.Varint()
			}
		}
		if !d.Ok() {
			return errCorrupt
		}
		fn(s)
	}
	return nil
}
