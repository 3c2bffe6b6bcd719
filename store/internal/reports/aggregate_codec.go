package reports

import (
	"fmt"
	"math"

	"github.com/dmarcd/dmarcd/store/internal/codec"
)

// Reports, records and roll-ups are stored in a compact binary form rather
// than JSON (package codec's primitives): a large report has a million
// records, and statistics and CSV exports decode them in bulk. Every value
// starts with codec.Version, so that a later layout can be told apart.

// codecVersion is the first byte of every value written here.
const codecVersion = codec.Version

// errCorrupt reports a stored value that does not decode.
var errCorrupt = codec.ErrCorrupt

// Geo presence bits of an encoded record.
const (
	geoPresent = 1 << iota
	geoCountryCode
	geoCountryName
	geoCity
	geoLatitude
	geoLongitude
	geoASN
	geoASOrg
)

// AppendRecord encodes r (its DMARC field is derived, not stored).
func AppendRecord(dst []byte, r *Record) []byte {
	e := codec.Enc(dst)
	e = append(e, codecVersion)
	e = e.Str(r.SourceIP).Varint(r.Count).Sym(r.Disposition).Sym(string(r.DKIM)).Sym(string(r.SPF))
	e = e.Str(r.HeaderFrom).Opt(r.EnvelopeFrom).Opt(r.EnvelopeTo)
	e = e.Uvarint(uint64(len(r.Reasons)))
	for i := range r.Reasons {
		e = e.Sym(r.Reasons[i].Type).Opt(r.Reasons[i].Comment)
	}
	e = e.Uvarint(uint64(len(r.AuthResults.DKIM)))
	for i := range r.AuthResults.DKIM {
		a := &r.AuthResults.DKIM[i]
		e = e.Str(a.Domain).Opt(a.Selector).Sym(a.Result)
	}
	e = e.Uvarint(uint64(len(r.AuthResults.SPF)))
	for i := range r.AuthResults.SPF {
		a := &r.AuthResults.SPF[i]
		e = e.Str(a.Domain).Opt(a.Scope).Sym(a.Result)
	}
	return appendGeo(e, r.Geo)
}

func appendGeo(e codec.Enc, g *Geo) codec.Enc {
	if g == nil {
		return append(e, 0)
	}
	var flags byte = geoPresent
	for _, f := range []struct {
		set bool
		bit byte
	}{
		{g.CountryCode != nil, geoCountryCode}, {g.CountryName != nil, geoCountryName},
		{g.City != nil, geoCity}, {g.Latitude != nil, geoLatitude},
		{g.Longitude != nil, geoLongitude}, {g.ASN != nil, geoASN}, {g.ASOrg != nil, geoASOrg},
	} {
		if f.set {
			flags |= f.bit
		}
	}
	e = append(e, flags)
	if g.CountryCode != nil {
		e = e.Str(*g.CountryCode)
	}
	if g.CountryName != nil {
		e = e.Str(*g.CountryName)
	}
	if g.City != nil {
		e = e.Str(*g.City)
	}
	if g.Latitude != nil {
		e = e.F64(*g.Latitude)
	}
	if g.Longitude != nil {
		e = e.F64(*g.Longitude)
	}
	if g.ASN != nil {
		e = e.Uvarint(uint64(*g.ASN))
	}
	if g.ASOrg != nil {
		e = e.Str(*g.ASOrg)
	}
	return e
}

// DecodeBlock calls fn for each record of a block value: a version byte,
// then each record as uvarint length + AppendRecord bytes. The records'
// strings share one copy of the block.
func DecodeBlock(raw []byte, fn func(*Record) error) error {
	if len(raw) == 0 || raw[0] != codecVersion {
		return errCorrupt
	}
	return DecodeRecords(raw[1:], fn)
}

// DecodeRecords calls fn for each record of raw: records back to back,
// each as uvarint length + AppendRecord bytes (a block without its version
// byte, or a part of one). The records' strings share one copy of raw.
func DecodeRecords(raw []byte, fn func(*Record) error) error {
	d := codec.NewStringDec(raw)
	for d.Len() > 0 {
		sub, ok := d.Sub()
		if !ok {
			return errCorrupt
		}
		r, err := decodeRecordFrom(&sub)
		if err != nil {
			return err
		}
		d.Adopt(&sub)
		if err := fn(r); err != nil {
			return err
		}
	}
	return nil
}

// decodeRecordFrom decodes one record, which must fill d exactly.
func decodeRecordFrom(d *codec.Dec) (*Record, error) {
	if d.Byte() != codecVersion {
		return nil, errCorrupt
	}
	r := &Record{SourceIP: d.Str(), Count: d.Varint(), Disposition: d.Sym(), DKIM: Verdict(d.Sym()), SPF: Verdict(d.Sym())}
	r.HeaderFrom, r.EnvelopeFrom, r.EnvelopeTo = d.Str(), d.Opt(), d.Opt()
	r.Reasons = make([]Reason, d.Count())
	for i := range r.Reasons {
		r.Reasons[i] = Reason{Type: d.Sym(), Comment: d.Opt()}
	}
	r.AuthResults.DKIM = make([]DKIMAuth, d.Count())
	for i := range r.AuthResults.DKIM {
		r.AuthResults.DKIM[i] = DKIMAuth{Domain: d.Str(), Selector: d.Opt(), Result: d.Sym()}
	}
	r.AuthResults.SPF = make([]SPFAuth, d.Count())
	for i := range r.AuthResults.SPF {
		r.AuthResults.SPF[i] = SPFAuth{Domain: d.Str(), Scope: d.Opt(), Result: d.Sym()}
	}
	r.Geo = decodeGeo(d)
	if !d.Done() {
		return nil, errCorrupt
	}
	dkim, spf, derived := r.aligned()
	r.DMARC, r.DMARCDerived = dmarcResult(verdictOf(dkim), verdictOf(spf)), derived
	return r, nil
}

// verdictOf is "pass" for a pass, else "".
func verdictOf(pass bool) string {
	if pass {
		return "pass"
	}
	return ""
}

func decodeGeo(d *codec.Dec) *Geo {
	flags := d.Byte()
	if flags&geoPresent == 0 {
		return nil
	}
	// One allocation for the object and its numbers.
	var box struct {
		g        Geo
		lat, lon float64
		asn      uint32
	}
	b := &box
	g := &b.g
	if flags&geoCountryCode != 0 {
		g.CountryCode = d.Ptr(d.Str())
	}
	if flags&geoCountryName != 0 {
		g.CountryName = d.Ptr(d.Str())
	}
	if flags&geoCity != 0 {
		g.City = d.Ptr(d.Str())
	}
	if flags&geoLatitude != 0 {
		b.lat = d.F64()
		g.Latitude = &b.lat
	}
	if flags&geoLongitude != 0 {
		b.lon = d.F64()
		g.Longitude = &b.lon
	}
	if flags&geoASN != 0 {
		v := d.Uvarint()
		if v > math.MaxUint32 {
			d.Fail()
		}
		b.asn = uint32(v)
		g.ASN = &b.asn
	}
	if flags&geoASOrg != 0 {
		g.ASOrg = d.Ptr(d.Str())
	}
	return g
}

// dmarcResult is "pass" when the evaluated DKIM or SPF result passed.
func dmarcResult[T ~string](dkim, spf T) string {
	if dkim == "pass" || spf == "pass" {
		return "pass"
	}
	return "fail"
}

// AppendReport encodes a report and its summary (the id is the key).
func AppendReport(e codec.Enc, r *Report, s *Summary) codec.Enc {
	e = append(e, codecVersion)
	e = e.Str(r.DomainID).Str(r.Domain).Str(r.OrgID).Str(r.OrgName).Str(r.OrgEmail).Str(r.ExternalReportID)
	e = e.Time(r.DateBegin).Time(r.DateEnd).Time(r.ReceivedAt)
	p := &r.PolicyPublished
	e = e.Str(p.Domain).Sym(p.P).Opt(p.SP).Opt(p.NP).Varint(int64(p.PCT)).Sym(p.ADKIM).Sym(p.ASPF)
	e = e.Varint(r.MessageCount).Varint(r.DMARCPassCount).Varint(r.DMARCFailCount).Uvarint(uint64(r.RecordCount))
	return appendSummary(e, s)
}

// DecodeReport reads what AppendReport wrote; the summary only when asked.
func DecodeReport(id string, raw []byte, withSummary bool) (*Report, *Summary, error) {
	d := codec.NewDec(raw)
	if d.Byte() != codecVersion {
		return nil, nil, fmt.Errorf("report %s: %w", id, errCorrupt)
	}
	r := &Report{ID: id, DomainID: d.Str(), Domain: d.Str(), OrgID: d.Str(), OrgName: d.Str(),
		OrgEmail: d.Str(), ExternalReportID: d.Str(), DateBegin: d.Time(), DateEnd: d.Time(), ReceivedAt: d.Time()}
	r.PolicyPublished = PolicyPublished{Domain: d.Str(), P: d.Sym(), SP: d.Opt(), NP: d.Opt(),
		PCT: int(d.Varint()), ADKIM: d.Sym(), ASPF: d.Sym()}
	r.MessageCount, r.DMARCPassCount, r.DMARCFailCount = d.Varint(), d.Varint(), d.Varint()
	r.RecordCount = int(d.Uvarint())
	var s *Summary
	if withSummary {
		s = new(decodeSummary(&d))
		if d.Len() != 0 {
			d.Fail()
		}
	}
	if !d.Ok() {
		return nil, nil, fmt.Errorf("report %s: %w", id, errCorrupt)
	}
	return r, s, nil
}
