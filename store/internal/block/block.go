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
	geoRef := make(map[geoKey]uint64)
	var geoTable []geoKey
	var prev4 uint32
	var prev6 [16]byte
	for _, i := range order {
		r, k := &rows[i], &keys[i]
		rec := &r.Rec
		cols[cReport].uv(uint64(r.Report))
		cols[cIndex].uv(uint64(r.Index))
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

	p := make([]byte, 0, 64+len(ids)*16+len(rows)*24)
	p = binary.AppendUvarint(p, uint64(len(rows)))
	p = appendIDs(p, ids)
	p = d.appendTo(p)
	p = binary.AppendUvarint(p, uint64(len(geoTable)))
	for _, g := range geoTable {
		p = appendGeo(p, &g)
	}
	p = appendCols(p, cols[:])
	return seal(dst, kindRecords, p), nil
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
	if err != nil || a.Zone() != "" || a.String() != ip {
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

// appendIDs writes the report table: the first 8 bytes of each id as a
// big-endian number, as the difference from the one before (ids are
// UUIDv7: time-ordered), then the last 8 bytes of each as they are.
func appendIDs(p []byte, ids [][16]byte) []byte {
	p = binary.AppendUvarint(p, uint64(len(ids)))
	var prev uint64
	for _, id := range ids {
		hi := binary.BigEndian.Uint64(id[:8])
		p = binary.AppendVarint(p, int64(hi-prev))
		prev = hi
	}
	for _, id := range ids {
		p = append(p, id[8:]...)
	}
	return p
}

func readIDs(r *rd) [][16]byte {
	n := r.count(9) // each takes at least 1 + 8 bytes
	ids := make([][16]byte, n)
	var prev uint64
	for i := range ids {
		prev += uint64(r.sv())
		binary.BigEndian.PutUint64(ids[i][:8], prev)
	}
	for i := range ids {
		copy(ids[i][8:], r.bytes(8))
	}
	return ids
}

// Block is a decoded block: its report table and the columns of its rows,
// read row by row on demand. It holds the decompressed payload (the
// records it hands out share its strings) and is safe for concurrent
// reads.
type Block struct {
	ids  [][16]byte
	n    int
	strs strTable
	geos []*reports.Geo
	cols [nCols]rd
}

// Decode reads a block Encode made. A block that does not decode is an
// error wrapping ErrCorrupt, never a panic.
func Decode(b []byte) (*Block, error) {
	p, err := open(b, kindRecords)
	if err != nil {
		return nil, err
	}
	return decodePayload(p)
}

func decodePayload(p []byte) (*Block, error) {
	whole := string(p) // the records' strings share this one copy
	r := rd{b: p}
	blk := &Block{}
	blk.n = r.count(0)
	blk.ids = readIDs(&r)
	blk.strs = readStrTable(&r, whole, len(p))
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
	last4  uint32
	last6  [16]byte
	kind   byte
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
	cols, t := &c.cols, &c.b.strs
	rep, idx := cols[cReport].uv(), cols[cIndex].uv()
	if rep >= uint64(len(c.b.ids)) || idx > math.MaxUint32 {
		return corrupt("row report %d index %d", rep, idx)
	}
	row.Report, row.Index = uint32(rep), uint32(idx)
	rec := &row.Rec
	switch kind := cols[cIPKind].byte1(); kind {
	case ipV4:
		v := c.prev4 + uint32(cols[cIPv4].uv())
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
		copy(c.prev6[shared:], col.bytes(uint64(16-shared)))
		if c.kind != ipV6 || c.prev6 != c.last6 {
			c.lastIP, c.last6, c.kind = netip.AddrFrom16(c.prev6).String(), c.prev6, ipV6
		}
		rec.SourceIP = c.lastIP
	case ipText:
		rec.SourceIP = t.str(&cols[cIPText])
	default:
		return corrupt("address kind %d", kind)
	}
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
	c := b.cursor()
	var row Row
	var mine []Row
	for range b.n {
		if err := c.next(&row, false); err != nil {
			return err
		}
		if row.Report == report {
			r := row
			r.Rec.Reasons = cloneList(row.Rec.Reasons)
			r.Rec.AuthResults.DKIM = cloneList(row.Rec.AuthResults.DKIM)
			r.Rec.AuthResults.SPF = cloneList(row.Rec.AuthResults.SPF)
			mine = append(mine, r)
		}
	}
	if err := c.done(); err != nil {
		return err
	}
	slices.SortStableFunc(mine, func(x, y Row) int { return cmp.Compare(x.Index, y.Index) })
	for i := range mine {
		if err := fn(mine[i].Index, &mine[i].Rec); err != nil {
			return err
		}
	}
	return nil
}

// cloneList copies l, keeping nil nil and empty empty.
func cloneList[T any](l []T) []T {
	if l == nil {
		return nil
	}
	return append(make([]T, 0, len(l)), l...)
}
