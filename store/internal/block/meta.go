package block

import (
	"encoding/binary"
	"encoding/hex"
	"time"

	"github.com/dmarcd/dmarcd/store/internal/reports"
)

// Columns of a report table payload (EncodeReports), in the order they
// are written.
const (
	mIDKind = iota // 1: a canonical UUID, in mIDHi and mIDLo; 0: text, in mIDText
	mIDHi
	mIDLo
	mIDText
	mDomainID
	mDomain
	mOrgID
	mOrgName
	mOrgEmail
	mExternalID
	mTimeFlags // which of the three times are the zero time
	mDateBegin // seconds, as the difference from the report before
	mDateEnd   // seconds after date_begin
	mReceived  // seconds after date_end
	mNanos     // the nanoseconds of each time that is not zero
	mPolDomain
	mPolP
	mPolSP
	mPolNP
	mPolPCT
	mPolADKIM
	mPolASPF
	mMessages
	mPass
	mFail
	mRecords
	nMetaCols
)

// EncodeReports appends to dst a table of report metadata, columnar as a
// records block: the strings that repeat (domain, reporter, policy)
// through a dictionary, ids in binary, times as differences. Times are
// kept to the nanosecond and come back in UTC; everything else exactly.
func EncodeReports(dst []byte, list []reports.Report) []byte {
	d := newDict()
	for i := range list {
		r := &list[i]
		for _, s := range []string{r.DomainID, r.Domain, r.OrgID, r.OrgName, r.OrgEmail,
			r.PolicyPublished.Domain, r.PolicyPublished.P, r.PolicyPublished.ADKIM, r.PolicyPublished.ASPF} {
			d.add(s)
		}
		d.addOpt(r.PolicyPublished.SP)
		d.addOpt(r.PolicyPublished.NP)
	}
	d.freeze()
	var cols [nMetaCols]col
	var prevHi uint64
	var prevBegin int64
	for i := range list {
		r := &list[i]
		if id, ok := parseUUID(r.ID); ok {
			cols[mIDKind].b(1)
			hi := binary.BigEndian.Uint64(id[:8])
			cols[mIDHi].sv(int64(hi - prevHi))
			prevHi = hi
			cols[mIDLo] = append(cols[mIDLo], id[8:]...)
		} else {
			cols[mIDKind].b(0)
			cols[mIDText].uv(uint64(len(r.ID)))
			cols[mIDText] = append(cols[mIDText], r.ID...)
		}
		cols[mDomainID].uv(d.of(r.DomainID))
		cols[mDomain].uv(d.of(r.Domain))
		cols[mOrgID].uv(d.of(r.OrgID))
		cols[mOrgName].uv(d.of(r.OrgName))
		cols[mOrgEmail].uv(d.of(r.OrgEmail))
		cols[mExternalID].uv(uint64(len(r.ExternalReportID)))
		cols[mExternalID] = append(cols[mExternalID], r.ExternalReportID...)

		var flags byte
		begin, end, recv := r.DateBegin.Unix(), r.DateEnd.Unix(), r.ReceivedAt.Unix()
		for k, t := range []time.Time{r.DateBegin, r.DateEnd, r.ReceivedAt} {
			if t.IsZero() {
				flags |= 1 << k
			} else {
				cols[mNanos].uv(uint64(t.Nanosecond()))
			}
		}
		cols[mTimeFlags].b(flags)
		// A zero time takes the value of the one it is counted from, so
		// that it costs a zero.
		if flags&1 != 0 {
			begin = prevBegin
		}
		if flags&2 != 0 {
			end = begin
		}
		if flags&4 != 0 {
			recv = end
		}
		cols[mDateBegin].sv(begin - prevBegin)
		cols[mDateEnd].sv(end - begin)
		cols[mReceived].sv(recv - end)
		prevBegin = begin

		p := &r.PolicyPublished
		cols[mPolDomain].uv(d.of(p.Domain))
		cols[mPolP].uv(d.of(p.P))
		cols[mPolSP].uv(d.opt(p.SP))
		cols[mPolNP].uv(d.opt(p.NP))
		cols[mPolPCT].sv(int64(p.PCT))
		cols[mPolADKIM].uv(d.of(p.ADKIM))
		cols[mPolASPF].uv(d.of(p.ASPF))
		cols[mMessages].sv(r.MessageCount)
		cols[mPass].sv(r.DMARCPassCount)
		cols[mFail].sv(r.DMARCFailCount)
		cols[mRecords].sv(int64(r.RecordCount))
	}
	p := binary.AppendUvarint(nil, uint64(len(list)))
	p = d.appendTo(p)
	p = appendCols(p, cols[:])
	return seal(dst, kindReports, nil, p)
}

// DecodeReports reads what EncodeReports wrote, in the same order. A
// table that does not decode is an error wrapping ErrCorrupt.
func DecodeReports(b []byte) ([]reports.Report, error) {
	h, p, err := open(b, kindReports)
	if err != nil {
		return nil, err
	}
	if len(h) != 0 {
		return nil, corrupt("report table header")
	}
	return decodeReportsPayload(p)
}

func decodeReportsPayload(p []byte) ([]reports.Report, error) {
	r := rd{b: p}
	n := r.count(0)
	t := readStrTable(&r)
	var cols [nMetaCols]rd
	for i := range cols {
		cols[i] = r.sub()
	}
	if r.bad || len(r.b) != 0 {
		return nil, corrupt("report table")
	}
	if n > len(cols[mIDKind].b) {
		return nil, corrupt("%d reports", n)
	}
	// Ids and report ids of the reporters are each copied.
	str := func(c *rd) string {
		l := c.uv()
		if l > uint64(len(c.b)) {
			c.fail()
			return ""
		}
		s := string(c.b[:l])
		c.b = c.b[l:]
		return s
	}
	list := make([]reports.Report, n)
	var prevHi uint64
	var prevBegin int64
	for i := range list {
		rep := &list[i]
		switch cols[mIDKind].byte1() {
		case 1:
			var id [16]byte
			prevHi += uint64(cols[mIDHi].sv())
			binary.BigEndian.PutUint64(id[:8], prevHi)
			copy(id[8:], cols[mIDLo].bytes(8))
			rep.ID = formatUUID(id)
		case 0:
			rep.ID = str(&cols[mIDText])
		default:
			return nil, corrupt("report %d: id kind", i)
		}
		rep.DomainID = t.str(&cols[mDomainID])
		rep.Domain = t.str(&cols[mDomain])
		rep.OrgID = t.str(&cols[mOrgID])
		rep.OrgName = t.str(&cols[mOrgName])
		rep.OrgEmail = t.str(&cols[mOrgEmail])
		rep.ExternalReportID = str(&cols[mExternalID])

		flags := cols[mTimeFlags].byte1()
		if flags >= 1<<3 {
			return nil, corrupt("report %d: time flags %#x", i, flags)
		}
		begin := prevBegin + cols[mDateBegin].sv()
		end := begin + cols[mDateEnd].sv()
		recv := end + cols[mReceived].sv()
		prevBegin = begin
		for k, at := range []*time.Time{&rep.DateBegin, &rep.DateEnd, &rep.ReceivedAt} {
			if flags&(1<<k) != 0 {
				continue
			}
			ns := cols[mNanos].uv()
			if ns >= 1e9 {
				return nil, corrupt("report %d: nanoseconds", i)
			}
			*at = time.Unix([]int64{begin, end, recv}[k], int64(ns)).UTC()
		}

		pol := &rep.PolicyPublished
		pol.Domain = t.str(&cols[mPolDomain])
		pol.P = t.str(&cols[mPolP])
		pol.SP = copyOpt(t.opt(&cols[mPolSP]))
		pol.NP = copyOpt(t.opt(&cols[mPolNP]))
		pol.PCT = int(cols[mPolPCT].sv())
		pol.ADKIM = t.str(&cols[mPolADKIM])
		pol.ASPF = t.str(&cols[mPolASPF])
		rep.MessageCount = cols[mMessages].sv()
		rep.DMARCPassCount = cols[mPass].sv()
		rep.DMARCFailCount = cols[mFail].sv()
		rep.RecordCount = int(cols[mRecords].sv())
	}
	for i := range cols {
		if cols[i].bad || len(cols[i].b) != 0 {
			return nil, corrupt("report table column %d", i)
		}
	}
	return list, nil
}

// copyOpt returns a pointer of the caller's own: reports are handed out
// one by one and may be modified, unlike records.
func copyOpt(s *string) *string {
	if s == nil {
		return nil
	}
	v := *s
	return &v
}

// parseUUID reads an id in canonical lowercase text form (what
// store.NewID makes), which formatUUID gives back exactly.
func parseUUID(s string) ([16]byte, bool) {
	var id [16]byte
	if len(s) != 36 || s[8] != '-' || s[13] != '-' || s[18] != '-' || s[23] != '-' {
		return id, false
	}
	var h [32]byte
	copy(h[0:8], s[0:8])
	copy(h[8:12], s[9:13])
	copy(h[12:16], s[14:18])
	copy(h[16:20], s[19:23])
	copy(h[20:32], s[24:36])
	for _, c := range h {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return id, false
		}
	}
	if _, err := hex.Decode(id[:], h[:]); err != nil {
		return id, false
	}
	return id, true
}

func formatUUID(b [16]byte) string {
	var s [36]byte
	hex.Encode(s[0:8], b[0:4])
	s[8] = '-'
	hex.Encode(s[9:13], b[4:6])
	s[13] = '-'
	hex.Encode(s[14:18], b[6:8])
	s[18] = '-'
	hex.Encode(s[19:23], b[8:10])
	s[23] = '-'
	hex.Encode(s[24:], b[10:])
	return string(s[:])
}
