package block

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"fmt"
	"math"
	"net/netip"
	"slices"

	"github.com/dmarcd/dmarcd/store/internal/reports"
)

// Row is one record of a block: the report it belongs to (an index into
// the block's report table), its position within that report, and the
// record.
type Row struct {
	Report uint32
	Index  uint32
	Rec    reports.Record
}

// Columns of a records payload, in the order they are written.
const (
	cReport = iota
	cIndex
	cIPKind
	cIPv4
	cIPv6
	cIPText
	cCount
	cDisposition
	cDKIM
	cSPF
	cDMARC
	cFlags
	cHeaderFrom
	cEnvFrom
	cEnvTo
	cNReasons
	cReasonType
	cReasonComment
	cNDKIM
	cDKIMDomain
	cDKIMSelector
	cDKIMResult
	cNSPF
	cSPFDomain
	cSPFScope
	cSPFResult
	cGeo
	nCols
)

// Kinds of a source address (cIPKind).
const (
	ipText = 1 // not an address in netip's canonical form: its text, a string reference
	ipV4   = 4
	ipV6   = 16
)

// Row flags (cFlags).
const flagDerived = 1

// Geo presence bits of a geo table entry.
const (
	geoCountryCode = 1 << iota
	geoCountryName
	geoCity
	geoLatitude
	geoLongitude
	geoASN
	geoASOrg
)

// geoKey is a geo object by value: the geo table holds each once.
type geoKey struct {
	flags           byte
	cc, cn, city, o uint64
	lat, lon        uint64 // float bits: equal values are equal bits, NaNs included
	asn             uint32
}

// rowKey is what rows are sorted by: the address, then the report and
// the index.
type rowKey struct {
	kind byte
	addr [16]byte
	text string
}

// Encode appends to dst a block of rows whose Report fields index ids.
// rows is not modified (its order is not what the block keeps: rows are
// sorted by source address, then report and index). A row whose Report
// is out of range is an error.
func Encode(dst []byte, ids [][16]byte, rows []Row) ([]byte, error) {
	if uint64(len(ids)) > math.MaxUint32 || uint64(len(rows)) > math.MaxUint32 {
		return nil, fmt.Errorf("block: %d reports, %d rows: too many", len(ids), len(rows))
	}
	keys := make([]rowKey, len(rows))
	order := make([]int, len(rows))
	d := newDict()
	for i := range rows {
		r := &rows[i]
		if int(r.Report) >= len(ids) {
			return nil, fmt.Errorf("block: row %d: report %d of %d", i, r.Report, len(ids))
		}
		order[i] = i
		keys[i] = addrKey(r.Rec.SourceIP)
		if keys[i].kind == ipText {
			d.add(r.Rec.SourceIP)
		}
		countStrings(d, &r.Rec)
	}
	slices.SortFunc(order, func(a, b int) int {
		ka, kb := &keys[a], &keys[b]
		if c := cmp.Compare(ka.kind, kb.kind); c != 0 {
			return c
		}
		if c := bytes.Compare(ka.addr[:], kb.addr[:]); c != 0 {
			return c
		}
		if c := cmp.Compare(ka.text, kb.text); c != 0 {
			return c
		}
		if c := cmp.Compare(rows[a].Report, rows[b].Report); c != 0 {
			return c
		}
		return cmp.Compare(rows[a].Index, rows[b].Index)
	})
	d.freeze()

	var cols [nCols]col
	for i := range cols {
		cols[i] = make(col, 0, len(rows)+16) // most take a byte or so a row: no regrowing
	}
	geoRef := make(map[geoKey]uint64)
	var geoTable []geoKey
	var prev4 uint32
	var prev6 [16]byte
	var prevRow *Row
	var prevKey *rowKey
	for _, i := range order {
		r, k := &rows[i], &keys[i]
		rec := &r.Rec
		cols[cReport].uv(uint64(r.Report))
		// The rows of one address and report follow each other by index:
		// after the first, an index is the difference from the one
		// before, minus one (zigzag: a repeated index is -1).
		if prevRow != nil && prevRow.Report == r.Report && *prevKey == *k {
			cols[cIndex].sv(int64(r.Index) - int64(prevRow.Index) - 1)
		} else {
			cols[cIndex].uv(uint64(r.Index))
		}
		prevRow, prevKey = r, k
		cols[cIPKind].b(k.kind)
		switch k.kind {
		case ipV4:
			v := binary.BigEndian.Uint32(k.addr[12:])
			cols[cIPv4].uv(uint64(v - prev4))
			prev4 = v
		case ipV6:
			shared := 0
			for shared < 16 && k.addr[shared] == prev6[shared] {
				shared++
			}
			cols[cIPv6].b(byte(shared))
			cols[cIPv6] = append(cols[cIPv6], k.addr[shared:]...)
			prev6 = k.addr
		default:
			cols[cIPText].uv(d.of(rec.SourceIP))
		}
		cols[cCount].sv(rec.Count)
		cols[cDisposition].uv(d.of(rec.Disposition))
		cols[cDKIM].uv(d.of(string(rec.DKIM)))
		cols[cSPF].uv(d.of(string(rec.SPF)))
		cols[cDMARC].uv(d.of(rec.DMARC))
		var flags byte
		if rec.DMARCDerived {
			flags |= flagDerived
		}
		cols[cFlags].b(flags)
		cols[cHeaderFrom].uv(d.of(rec.HeaderFrom))
		cols[cEnvFrom].uv(d.opt(rec.EnvelopeFrom))
		cols[cEnvTo].uv(d.opt(rec.EnvelopeTo))
		cols[cNReasons].uv(listLen(rec.Reasons == nil, len(rec.Reasons)))
		for _, x := range rec.Reasons {
			cols[cReasonType].uv(d.of(x.Type))
			cols[cReasonComment].uv(d.opt(x.Comment))
		}
		cols[cNDKIM].uv(listLen(rec.AuthResults.DKIM == nil, len(rec.AuthResults.DKIM)))
		for _, x := range rec.AuthResults.DKIM {
			cols[cDKIMDomain].uv(d.of(x.Domain))
			cols[cDKIMSelector].uv(d.opt(x.Selector))
			cols[cDKIMResult].uv(d.of(x.Result))
		}
		cols[cNSPF].uv(listLen(rec.AuthResults.SPF == nil, len(rec.AuthResults.SPF)))
		for _, x := range rec.AuthResults.SPF {
			cols[cSPFDomain].uv(d.of(x.Domain))
			cols[cSPFScope].uv(d.opt(x.Scope))
			cols[cSPFResult].uv(d.of(x.Result))
		}
		if rec.Geo == nil {
			cols[cGeo].uv(0)
			continue
		}
		gk := geoKeyOf(d, rec.Geo)
		ref, ok := geoRef[gk]
		if !ok {
			geoTable = append(geoTable, gk)
			ref = uint64(len(geoTable))
			geoRef[gk] = ref
		}
		cols[cGeo].uv(ref)
	}

	p := make([]byte, 0, 64+len(rows)*24)
	p = binary.AppendUvarint(p, uint64(len(rows)))
	p = d.appendTo(p)
	p = binary.AppendUvarint(p, uint64(len(geoTable)))
	for _, g := range geoTable {
		p = appendGeo(p, &g)
	}
	p = appendCols(p, cols[:])
	return seal(dst, kindRecords, appendHeader(nil, ids, rows), p), nil
}

// appendHeader writes the report table with the runs of each report's
// indexes the block holds: for each report, the first 8 bytes of its id as
// a big-endian number, as the difference (zigzag varint) from the report
// before (ids are UUIDv7: time-ordered), the last 8 bytes, the number of
// runs, and each run's first index (as the difference from the end of the
// run before) and length.
func appendHeader(h []byte, ids [][16]byte, rows []Row) []byte {
	keys := make([]uint64, len(rows))
	for i := range rows {
		keys[i] = uint64(rows[i].Report)<<32 | uint64(rows[i].Index)
	}
	slices.Sort(keys)
	h = binary.AppendUvarint(h, uint64(len(ids)))
	var prev uint64
	var runs []uint32 // first, count, ...
	for rep := range ids {
		id := &ids[rep]
		hi := binary.BigEndian.Uint64(id[:8])
		h = binary.AppendVarint(h, int64(hi-prev))
		prev = hi
		h = append(h, id[8:]...)
		runs = runs[:0]
		for len(keys) > 0 && keys[0]>>32 == uint64(rep) {
			index := uint32(keys[0])
			if n := len(runs); n > 0 && uint64(runs[n-2])+uint64(runs[n-1]) == uint64(index) {
				runs[n-1]++
			} else {
				runs = append(runs, index, 1)
			}
			keys = keys[1:]
		}
		h = binary.AppendUvarint(h, uint64(len(runs)/2))
		var end uint64
		for i := 0; i < len(runs); i += 2 {
			h = binary.AppendVarint(h, int64(uint64(runs[i])-end))
			h = binary.AppendUvarint(h, uint64(runs[i+1]))
			end = uint64(runs[i]) + uint64(runs[i+1])
		}
	}
	return h
}

// ScanRuns calls fn with each run of records a block holds, reading only
// its header (no decompression, no allocation): report by report in the
// order of the block's report table (with its position in it, which is
// Row.Report), runs by index: the records of indexes first to
// first+count-1 of the report with that id. A report of the table with
// no rows has no run. An error of fn stops the scan and is returned.
func ScanRuns(b []byte, fn func(report uint32, id [16]byte, first, count uint32) error) error {
	h, _, err := openHeader(b, kindRecords)
	if err != nil {
		return err
	}
	r := rd{b: h}
	n := r.count(9)
	var prev uint64
	for rep := range n {
		var id [16]byte
		prev += uint64(r.sv())
		binary.BigEndian.PutUint64(id[:8], prev)
		copy(id[8:], r.bytes(8))
		runs := r.count(2)
		var end uint64
		for range runs {
			first := end + uint64(r.sv())
			count := r.uv()
			end = first + count
			if r.bad || end > math.MaxUint32+1 {
				return corrupt("report %d: runs", rep)
			}
			if err := fn(uint32(rep), id, uint32(first), uint32(count)); err != nil {
				return err
			}
		}
		if r.bad {
			return corrupt("report table")
		}
	}
	if r.bad || len(r.b) != 0 {
		return corrupt("report table")
	}
	return nil
}

// readHeader reads the report table of a header (the runs are checked
// against the rows as they are read, not kept).
func readHeader(h []byte) ([][16]byte, error) {
	r := rd{b: h}
	n := r.count(9)
	ids := make([][16]byte, n)
	var prev uint64
	for rep := range ids {
		prev += uint64(r.sv())
		binary.BigEndian.PutUint64(ids[rep][:8], prev)
		copy(ids[rep][8:], r.bytes(8))
		for range r.count(2) {
			r.sv()
			r.uv()
		}
	}
	if r.bad || len(r.b) != 0 {
		return nil, corrupt("report table")
	}
	return ids, nil
}

// listLen is the stored length of a list: 0 for nil, else its length + 1.
func listLen(isNil bool, n int) uint64 {
	if isNil {
		return 0
	}
	return uint64(n) + 1
}

// addrKey is the sort key of a source address, and how it is stored.
func addrKey(ip string) rowKey {
	a, err := netip.ParseAddr(ip)
	var buf [64]byte
	if err != nil || a.Zone() != "" || string(a.AppendTo(buf[:0])) != ip {
		return rowKey{kind: ipText, text: ip}
	}
	if a.Is4() {
		return rowKey{kind: ipV4, addr: a.As16()}
	}
	return rowKey{kind: ipV6, addr: a.As16()}
}

func countStrings(d *dict, r *reports.Record) {
	d.add(r.Disposition)
	d.add(string(r.DKIM))
	d.add(string(r.SPF))
	d.add(r.DMARC)
	d.add(r.HeaderFrom)
	d.addOpt(r.EnvelopeFrom)
	d.addOpt(r.EnvelopeTo)
	for i := range r.Reasons {
		d.add(r.Reasons[i].Type)
		d.addOpt(r.Reasons[i].Comment)
	}
	for i := range r.AuthResults.DKIM {
		a := &r.AuthResults.DKIM[i]
		d.add(a.Domain)
		d.addOpt(a.Selector)
		d.add(a.Result)
	}
	for i := range r.AuthResults.SPF {
		a := &r.AuthResults.SPF[i]
		d.add(a.Domain)
		d.addOpt(a.Scope)
		d.add(a.Result)
	}
	if g := r.Geo; g != nil {
		d.addOpt(g.CountryCode)
		d.addOpt(g.CountryName)
		d.addOpt(g.City)
		d.addOpt(g.ASOrg)
	}
}

func geoKeyOf(d *dict, g *reports.Geo) geoKey {
	k := geoKey{cc: d.opt(g.CountryCode), cn: d.opt(g.CountryName), city: d.opt(g.City), o: d.opt(g.ASOrg)}
	if g.CountryCode != nil {
		k.flags |= geoCountryCode
	}
	if g.CountryName != nil {
		k.flags |= geoCountryName
	}
	if g.City != nil {
		k.flags |= geoCity
	}
	if g.Latitude != nil {
		k.flags |= geoLatitude
		k.lat = math.Float64bits(*g.Latitude)
	}
	if g.Longitude != nil {
		k.flags |= geoLongitude
		k.lon = math.Float64bits(*g.Longitude)
	}
	if g.ASN != nil {
		k.flags |= geoASN
		k.asn = *g.ASN
	}
	if g.ASOrg != nil {
		k.flags |= geoASOrg
	}
	return k
}

func appendGeo(p []byte, g *geoKey) []byte {
	p = append(p, g.flags)
	if g.flags&geoCountryCode != 0 {
		p = binary.AppendUvarint(p, g.cc)
	}
	if g.flags&geoCountryName != 0 {
		p = binary.AppendUvarint(p, g.cn)
	}
	if g.flags&geoCity != 0 {
		p = binary.AppendUvarint(p, g.city)
	}
	if g.flags&geoLatitude != 0 {
		p = binary.LittleEndian.AppendUint64(p, g.lat)
	}
	if g.flags&geoLongitude != 0 {
		p = binary.LittleEndian.AppendUint64(p, g.lon)
	}
	if g.flags&geoASN != 0 {
		p = binary.AppendUvarint(p, uint64(g.asn))
	}
	if g.flags&geoASOrg != 0 {
		p = binary.AppendUvarint(p, g.o)
	}
	return p
}

func readGeo(r *rd, t *strTable) *reports.Geo {
	flags := r.byte1()
	if flags >= 1<<7 {
		r.fail()
		return nil
	}
	var box struct {
		g        reports.Geo
		lat, lon float64
		asn      uint32
	}
	g := &box.g
	if flags&geoCountryCode != 0 {
		g.CountryCode = t.nonNil(r)
	}
	if flags&geoCountryName != 0 {
		g.CountryName = t.nonNil(r)
	}
	if flags&geoCity != 0 {
		g.City = t.nonNil(r)
	}
	if flags&geoLatitude != 0 {
		box.lat = r.f64()
		g.Latitude = &box.lat
	}
	if flags&geoLongitude != 0 {
		box.lon = r.f64()
		g.Longitude = &box.lon
	}
	if flags&geoASN != 0 {
		v := r.uv()
		if v > math.MaxUint32 {
			r.fail()
		}
		box.asn = uint32(v)
		g.ASN = &box.asn
	}
	if flags&geoASOrg != 0 {
		g.ASOrg = t.nonNil(r)
	}
	return g
}

// nonNil reads a reference to a string that is there, as a pointer.
func (t *strTable) nonNil(r *rd) *string {
	p := t.opt(r)
	if p == nil {
		r.fail()
	}
	return p
}

// Block is a decoded block: its report table and the columns of its rows,
// read row by row on demand. It holds the decompressed payload (the
// records it hands out share its strings) and is safe for concurrent
// reads.
type Block struct {
	size int // bytes held, about
	ids  [][16]byte
	n    int
	strs strTable
	geos []*reports.Geo
	cols [nCols]rd
}

// Decode reads a block Encode made. A block that does not decode is an
// error wrapping ErrCorrupt, never a panic.
func Decode(b []byte) (*Block, error) {
	h, p, err := open(b, kindRecords)
	if err != nil {
		return nil, err
	}
	ids, err := readHeader(h)
	if err != nil {
		return nil, err
	}
	return decodePayload(ids, p)
}

func decodePayload(ids [][16]byte, p []byte) (*Block, error) {
	r := rd{b: p}
	blk := &Block{ids: ids, size: len(p) + 16*len(ids)}
	blk.n = r.count(0)
	blk.strs = readStrTable(&r)
	for _, str := range blk.strs.strs {
		blk.size += len(str) + 24
	}
	ng := r.count(1)
	if r.bad {
		return nil, corrupt("header")
	}
	blk.geos = make([]*reports.Geo, ng+1)
	for i := 1; i <= ng; i++ {
		blk.geos[i] = readGeo(&r, &blk.strs)
	}
	for i := range blk.cols {
		blk.cols[i] = r.sub()
	}
	if r.bad || len(r.b) != 0 {
		return nil, corrupt("columns")
	}
	// Every row takes at least one byte of each per-row column: a row
	// count beyond that is a lie.
	if blk.n > len(blk.cols[cReport].b) || blk.n > len(blk.cols[cFlags].b) {
		return nil, corrupt("%d rows", blk.n)
	}
	return blk, nil
}

// Len returns the number of rows.
func (b *Block) Len() int { return b.n }

// Size returns about how many bytes of memory the block holds (for a
// cache's accounting).
func (b *Block) Size() int { return b.size }

// Find returns the position of a report in the report table.
func (b *Block) Find(id [16]byte) (uint32, bool) {
	for i := range b.ids {
		if b.ids[i] == id {
			return uint32(i), true
		}
	}
	return 0, false
}

// Reports returns the report table (Row.Report indexes it). The caller
// must not modify it.
func (b *Block) Reports() [][16]byte { return b.ids }

// cursor reads the rows of a block in order.
type cursor struct {
	b      *Block
	cols   [nCols]rd
	prev4  uint32
	prev6  [16]byte
	lastIP string // the text of the last address, reused while it repeats
	// the row before: the kind of its address, the reference of its text,
	// its report and index (see cIndex)
	rowKind          byte
	textRef          uint64
	prevRep, prevIdx uint32
	rows             int
	last4            uint32
	last6            [16]byte
	kind             byte
	// scratch lists of the reused row
	reasons []reports.Reason
	dkim    []reports.DKIMAuth
	spf     []reports.SPFAuth
}

func (b *Block) cursor() *cursor {
	return &cursor{b: b, cols: b.cols}
}

// next decodes the next row into row. With fresh, its lists are new;
// else they reuse the cursor's scratch and are valid until the next call.
func (c *cursor) next(row *Row, fresh bool) error {
	if fresh {
		return c.decode(row, anyReport)
	}
	return c.decode(row, noReport)
}

// nextOf is next with new lists for the rows of report only.
func (c *cursor) nextOf(row *Row, report uint32) error { return c.decode(row, int64(report)) }

// Which rows decode gives lists of their own: anyReport, noReport or the
// rows of one report.
const (
	anyReport = -1
	noReport  = -2
)

func (c *cursor) decode(row *Row, freshFor int64) error {
	cols, t := &c.cols, &c.b.strs
	rep := cols[cReport].uv()
	if rep >= uint64(len(c.b.ids)) {
		return corrupt("row report %d", rep)
	}
	row.Report = uint32(rep)
	fresh := freshFor == anyReport || freshFor == int64(rep)
	rec := &row.Rec
	var same bool // the address of the row before
	kind := cols[cIPKind].byte1()
	switch kind {
	case ipV4:
		delta := cols[cIPv4].uv()
		same = c.rowKind == ipV4 && delta == 0
		v := c.prev4 + uint32(delta)
		c.prev4 = v
		if c.kind != ipV4 || v != c.last4 {
			var a [4]byte
			binary.BigEndian.PutUint32(a[:], v)
			c.lastIP, c.last4, c.kind = netip.AddrFrom4(a).String(), v, ipV4
		}
		rec.SourceIP = c.lastIP
	case ipV6:
		col := &cols[cIPv6]
		shared := int(col.byte1())
		if shared > 16 {
			return corrupt("address prefix %d", shared)
		}
		same = c.rowKind == ipV6 && shared == 16
		copy(c.prev6[shared:], col.bytes(uint64(16-shared)))
		if c.kind != ipV6 || c.prev6 != c.last6 {
			c.lastIP, c.last6, c.kind = netip.AddrFrom16(c.prev6).String(), c.prev6, ipV6
		}
		rec.SourceIP = c.lastIP
	case ipText:
		ref := cols[cIPText].uv()
		if ref == 0 || ref >= uint64(len(t.strs)) {
			return corrupt("address %d", ref)
		}
		same = c.rowKind == ipText && ref == c.textRef
		rec.SourceIP, c.textRef = t.strs[ref], ref
	default:
		return corrupt("address kind %d", kind)
	}
	idx := uint64(0)
	if same && c.rows > 0 && rep == uint64(c.prevRep) {
		idx = uint64(int64(c.prevIdx) + 1 + cols[cIndex].sv())
	} else {
		idx = cols[cIndex].uv()
	}
	if idx > math.MaxUint32 {
		return corrupt("row index %d", idx)
	}
	row.Index = uint32(idx)
	c.rowKind, c.prevRep, c.prevIdx = kind, uint32(rep), uint32(idx)
	c.rows++
	rec.Count = cols[cCount].sv()
	rec.Disposition = t.str(&cols[cDisposition])
	rec.DKIM = reports.Verdict(t.str(&cols[cDKIM]))
	rec.SPF = reports.Verdict(t.str(&cols[cSPF]))
	rec.DMARC = t.str(&cols[cDMARC])
	flags := cols[cFlags].byte1()
	if flags&^flagDerived != 0 {
		return corrupt("row flags %#x", flags)
	}
	rec.DMARCDerived = flags&flagDerived != 0
	rec.HeaderFrom = t.str(&cols[cHeaderFrom])
	rec.EnvelopeFrom = t.opt(&cols[cEnvFrom])
	rec.EnvelopeTo = t.opt(&cols[cEnvTo])

	n, isNil := c.listLen(cReasonType)
	rec.Reasons = grow(&c.reasons, n, isNil, fresh)
	for i := range rec.Reasons {
		rec.Reasons[i] = reports.Reason{Type: t.str(&cols[cReasonType]), Comment: t.opt(&cols[cReasonComment])}
	}
	n, isNil = c.listLen(cDKIMDomain)
	rec.AuthResults.DKIM = grow(&c.dkim, n, isNil, fresh)
	for i := range rec.AuthResults.DKIM {
		rec.AuthResults.DKIM[i] = reports.DKIMAuth{Domain: t.str(&cols[cDKIMDomain]),
			Selector: t.opt(&cols[cDKIMSelector]), Result: t.str(&cols[cDKIMResult])}
	}
	n, isNil = c.listLen(cSPFDomain)
	rec.AuthResults.SPF = grow(&c.spf, n, isNil, fresh)
	for i := range rec.AuthResults.SPF {
		rec.AuthResults.SPF[i] = reports.SPFAuth{Domain: t.str(&cols[cSPFDomain]),
			Scope: t.opt(&cols[cSPFScope]), Result: t.str(&cols[cSPFResult])}
	}
	g := cols[cGeo].uv()
	if g >= uint64(len(c.b.geos)) {
		return corrupt("geo %d", g)
	}
	rec.Geo = c.b.geos[g]
	for i := range cols {
		if cols[i].bad {
			return corrupt("column %d", i)
		}
	}
	return nil
}

// listLen reads the length of a list whose items start in column first
// (the column before it holds the lengths). A length the column cannot
// hold (each item takes at least one byte of it) is corrupt.
func (c *cursor) listLen(first int) (int, bool) {
	col := &c.cols[first-1]
	v := col.uv()
	if v == 0 {
		return 0, true
	}
	if v-1 > uint64(len(c.cols[first].b)) {
		col.fail()
		return 0, false
	}
	return int(v - 1), false
}

// grow returns a list of n items: nil when isNil, new when fresh, else
// scratch resized.
func grow[T any](scratch *[]T, n int, isNil, fresh bool) []T {
	switch {
	case isNil:
		return nil
	case fresh:
		return make([]T, n)
	}
	if cap(*scratch) < n || *scratch == nil {
		*scratch = make([]T, n, max(n, 4))
	}
	return (*scratch)[:n]
}

// Each calls fn with each row in the block's order (by source address).
// The row and its lists are reused: fn must not keep them (nor modify
// them) after it returns; the strings and the pointers of a record
// (optional strings, Geo) are the block's and may be kept, read-only.
// An error of fn stops the iteration and is returned.
func (b *Block) Each(fn func(*Row) error) error {
	c := b.cursor()
	var row Row
	for range b.n {
		if err := c.next(&row, false); err != nil {
			return err
		}
		if err := fn(&row); err != nil {
			return err
		}
	}
	return c.done()
}

// done checks that the rows used every byte of every column.
func (c *cursor) done() error {
	for i := range c.cols {
		if len(c.cols[i].b) != 0 {
			return corrupt("column %d: %d bytes left", i, len(c.cols[i].b))
		}
	}
	return nil
}

// Rows returns every row in the block's order, each with lists of its
// own (strings and pointers are still shared, read-only).
func (b *Block) Rows() ([]Row, error) {
	out := make([]Row, b.n)
	c := b.cursor()
	for i := range out {
		if err := c.next(&out[i], true); err != nil {
			return nil, err
		}
	}
	if err := c.done(); err != nil {
		return nil, err
	}
	return out, nil
}

// ReportRows calls fn with the records of one report, in the order of
// their Index (the order they had in the report). The records are fn's
// to keep (read-only strings and pointers shared with the block).
func (b *Block) ReportRows(report uint32, fn func(index uint32, rec *reports.Record) error) error {
	return b.ReportRange(report, 0, math.MaxUint32, fn)
}

// ReportRange is ReportRows for the records of indexes from to to-1 only.
func (b *Block) ReportRange(report, from, to uint32, fn func(index uint32, rec *reports.Record) error) error {
	c := b.cursor()
	var row Row
	var mine []Row
	for range b.n {
		if err := c.nextOf(&row, report); err != nil {
			return err
		}
		if row.Report == report && row.Index >= from && row.Index < to {
			mine = append(mine, row)
		}
	}
	if err := c.done(); err != nil {
		return err
	}
	// Rows are moved by their position, not their bytes.
	order := make([]int32, len(mine))
	for i := range order {
		order[i] = int32(i)
	}
	slices.SortFunc(order, func(x, y int32) int {
		return cmp.Or(cmp.Compare(mine[x].Index, mine[y].Index), cmp.Compare(x, y))
	})
	for _, i := range order {
		if err := fn(mine[i].Index, &mine[i].Rec); err != nil {
			return err
		}
	}
	return nil
}
