// Package block is the columnar, compressed form of aggregate records the
// store seals them into: one immutable block holds the records of many
// reports (one organization, domain and UTC day), column by column, and a
// sibling table holds those reports' values. It is pure (no bbolt): the
// store decides which key holds which block.
//
// # API
//
//	type Row struct { Report uint32; Index uint32; Rec reports.Record }
//
//	// Records.
//	func Encode(dst []byte, ids [][16]byte, rows []Row) ([]byte, error)
//	func ScanRuns(b []byte, fn func(report uint32, id [16]byte, first, count uint32) error) error
//	                                                       // the header only: no decompression, no allocation
//	func Decode(b []byte) (*Block, error)
//	func (*Block) Len() int
//	func (*Block) Size() int                               // bytes held, about (cache accounting)
//	func (*Block) Reports() [][16]byte                     // the ids given to Encode, same order
//	func (*Block) Find(id [16]byte) (uint32, bool)         // position in Reports
//	func (*Block) Each(fn func(*Row) error) error          // all rows, block order, row reused
//	func (*Block) Rows() ([]Row, error)                    // all rows, block order, lists owned
//	func (*Block) ReportRows(report uint32, fn func(index uint32, rec *reports.Record) error) error
//	func (*Block) ReportRange(report, from, to uint32, fn func(index uint32, rec *reports.Record) error) error
//
//	// Report tables: opaque values by 16-byte id (the store's report values).
//	func EncodeTable(dst []byte, entries []TableEntry) ([]byte, error)
//	func DecodeTable(b []byte) (*Table, error)
//	func Tag(b []byte) ([TagLen]byte, error)              // the header only
//	func (*Table) Get(id [16]byte) ([]byte, bool)
//	func (*Table) Len() int; ID(i int) [16]byte; Tag() [TagLen]byte; Size() int
//
//	var ErrCorrupt error // wrapped by every decoding error
//	const Version = 1    // first byte of every block
//
// Row.Report indexes the ids table passed to Encode: the binary report
// ids (store's binID, 16 bytes, UUIDv7). Row.Index is the record's
// position within its report; ReportRows gives a report's records back
// in Index order (the order of the report). Encode keeps its own order
// (by source address, then report and index): Each and Rows follow it.
//
// Every field of a record comes back exactly: nil and empty lists and
// strings, pointer presence, DMARC and DMARCDerived as given (the codec
// derives nothing), Geo nil or not, floats bit for bit, any string in
// any field. Decoded records share the block's strings and pointers
// (optional strings, Geo): read-only. Each reuses its Row and the row's
// lists: fn must not keep them. Report metadata times come back in UTC,
// to the nanosecond; the other fields exactly.
//
// ScanRuns tells which records a block holds without decompressing it:
// for each report of its table, the runs of consecutive indexes (first,
// count) it has rows for. A report's records may thus be spread over
// several blocks (a report larger than a block), each holding runs.
//
// A Block is immutable and safe for concurrent reads: a cache may keep it. Encoding and decoding share one
// zstd encoder and decoder for the process.
//
// # Format
//
// A block (either kind) is a frame: Version (1 byte), the CRC-32C
// (4 bytes, little-endian) of the header part, the header part (a kind
// byte, 'R' records or 'V' a report table, the header's length as a
// uvarint and the header), the CRC-32C of the body part, the body part
// (the payload's length, uvarint, and the payload compressed as one zstd
// frame). Decode refuses another version or kind, a wrong checksum, a
// length the compressed bytes cannot hold, and any payload that does not
// add up, with an error wrapping ErrCorrupt: a corrupt block is never a
// panic nor a wrong answer.
//
// The header of a records block is its report table with the runs: the
// number of reports, then for each its id (the first 8 bytes as a
// big-endian number, as the zigzag difference from the report before's:
// UUIDv7 ids are time-ordered; then the last 8 bytes), its number of runs
// and each run (first index, as the difference from the end of the run
// before, and the count).
//
// A records payload is the row count, the dictionary, the geo table, then 27 columns,
// each its length and bytes. The dictionary holds every string of the
// block once, most used first; a string field is a reference k (uvarint)
// to the k-th, 0 for a nil optional string. Enumerated values (results,
// dispositions) are such references: the few a block has get one byte
// each, and a value nobody expected is just another string. The geo table
// holds each distinct Geo once (presence bits, string references, float
// bits, ASN); a row refers to one, 0 for none. The columns, one value per
// row unless said: report, index (for a row of the same address and
// report as the row before, the zigzag difference from its index minus
// one, so that a sender's rows cost nothing; else the index), address kind (4, 16, 1 for text not in
// netip's canonical form), IPv4 (uvarint difference from the previous
// one: rows are sorted by address), IPv6 (bytes shared with the previous
// one, then the rest), address text, count (zigzag varint), disposition,
// DKIM, SPF, DMARC, flags (DMARCDerived), header_from, envelope_from,
// envelope_to, then each list as a column of lengths (0 nil, n+1 for n
// items) and a column per field of its items: reasons (type, comment),
// DKIM results (domain, selector, result), SPF results (domain, scope,
// result); last the geo reference.
//
// A report table ('V') has a header of a random 16-byte tag (each table
// written has its own, so a cache tells two tables under one key apart
// reading the header only) and the entry count; its payload is three
// columns, each its length and bytes (the ids' first 8 bytes as uvarint
// differences, ids being sorted; their last 8 bytes; the values'
// lengths), then the values back to back.
//
// A new layout gets the next Version; readers of this one stay, so that
// blocks written before are read until the store rewrites them.
package block
