package aggregate

import (
	"bytes"
	"errors"
	"fmt"
	"io"

	"github.com/dmarcd/dmarcd/dmarc/container"
)

// aggNode says what an open element is, given its parent: the decoder is a
// state machine over the path from <feedback> down. Elements are matched by
// local name whatever their namespace prefix, as encoding/xml matches a
// field tag without a namespace.
type aggNode uint8

const (
	aggNone   aggNode = iota // outside <feedback>
	aggIgnore                // inside <feedback>, not read (extensions, unknown)
	aggFeedback
	aggMeta
	aggDateRange
	aggPolicy
	aggRecord
	aggRow
	aggPolEval
	aggReason
	aggIdent
	aggAuth
	aggAuthDKIM
	aggAuthSPF

	// Leaves: their text is the value.
	aggVersion
	aggOrgName
	aggEmail
	aggExtra
	aggReportID
	aggBegin
	aggEnd
	aggError
	aggGenerator
	aggPolDomain
	aggP
	aggSP
	aggNP
	aggPct
	aggADKIM
	aggASPF
	aggFO
	aggTesting
	aggDiscovery
	aggSourceIP
	aggCount
	aggDisposition
	aggEvalDKIM
	aggEvalSPF
	aggReasonType
	aggReasonComment
	aggHeaderFrom
	aggEnvFrom
	aggEnvTo
	aggDKIMDomain
	aggDKIMSelector
	aggDKIMResult
	aggDKIMHuman
	aggSPFDomain
	aggSPFScope
	aggSPFResult
	aggSPFHuman

	aggNodeCount // the number of kinds
)

func (k aggNode) leaf() bool { return k >= aggVersion }

// aggChild returns the kind of an element named local inside a parent.
func aggChild(parent aggNode, local []byte) aggNode {
	switch parent {
	case aggFeedback:
		switch string(local) {
		case "version":
			return aggVersion
		case "report_metadata":
			return aggMeta
		case "policy_published":
			return aggPolicy
		case "record":
			return aggRecord
		}
	case aggMeta:
		switch string(local) {
		case "org_name":
			return aggOrgName
		case "email":
			return aggEmail
		case "extra_contact_info":
			return aggExtra
		case "report_id":
			return aggReportID
		case "date_range":
			return aggDateRange
		case "error":
			return aggError
		case "generator":
			return aggGenerator
		}
	case aggDateRange:
		switch string(local) {
		case "begin":
			return aggBegin
		case "end":
			return aggEnd
		}
	case aggPolicy:
		return aggPolicyChild(local)
	case aggRecord:
		switch string(local) {
		case "row":
			return aggRow
		case "identifiers":
			return aggIdent
		case "auth_results":
			return aggAuth
		}
	case aggRow:
		switch string(local) {
		case "source_ip":
			return aggSourceIP
		case "count":
			return aggCount
		case "policy_evaluated":
			return aggPolEval
		}
	case aggPolEval:
		switch string(local) {
		case "disposition":
			return aggDisposition
		case "dkim":
			return aggEvalDKIM
		case "spf":
			return aggEvalSPF
		case "reason":
			return aggReason
		}
	case aggReason:
		switch string(local) {
		case "type":
			return aggReasonType
		case "comment":
			return aggReasonComment
		}
	case aggIdent:
		switch string(local) {
		case "header_from":
			return aggHeaderFrom
		case "envelope_from":
			return aggEnvFrom
		case "envelope_to":
			return aggEnvTo
		}
	case aggAuth:
		switch string(local) {
		case "dkim":
			return aggAuthDKIM
		case "spf":
			return aggAuthSPF
		}
	case aggAuthDKIM:
		switch string(local) {
		case "domain":
			return aggDKIMDomain
		case "selector":
			return aggDKIMSelector
		case "result":
			return aggDKIMResult
		case "human_result":
			return aggDKIMHuman
		}
	case aggAuthSPF:
		switch string(local) {
		case "domain":
			return aggSPFDomain
		case "scope":
			return aggSPFScope
		case "result":
			return aggSPFResult
		case "human_result":
			return aggSPFHuman
		}
	}
	return aggIgnore
}

func aggPolicyChild(local []byte) aggNode {
	switch string(local) {
	case "domain":
		return aggPolDomain
	case "p":
		return aggP
	case "sp":
		return aggSP
	case "np":
		return aggNP
	case "pct":
		return aggPct
	case "adkim":
		return aggADKIM
	case "aspf":
		return aggASPF
	case "fo":
		return aggFO
	case "testing":
		return aggTesting
	case "discovery_method":
		return aggDiscovery
	}
	return aggIgnore
}

// aggNSDecl is a namespace declaration on an element before <feedback>,
// kept only to resolve the namespace of <feedback> itself.
type aggNSDecl struct {
	depth  int
	prefix string
	uri    string
}

// aggDecoder turns scanner tokens into the header and records.
type aggDecoder struct {
	s   xsScanner
	lim container.Limits
	in  aggInterner

	// The open elements: their names (for end-tag matching) and kinds.
	names []byte
	offs  []int
	kinds []aggNode
	ns    []aggNSDecl

	version   string
	namespace string
	meta      aggWireMeta
	policy    aggWirePolicy
	rec       aggRecordBuilder
	records   int // <record> elements seen

	inFeedback    bool
	sawFeedback   bool
	sawRecord     bool
	recordStarted bool // a <record> was opened by the last step
	recordDone    bool // a record is complete in rec
	done          bool // </feedback> seen
}

func (d *aggDecoder) init(r io.Reader, lim container.Limits) {
	d.s.reset(r)
	d.lim = lim
}

// step handles one token.
func (d *aggDecoder) step() error {
	tok, err := d.s.next()
	if err != nil {
		return d.readError(err)
	}
	switch tok {
	case xsTokStart:
		return d.start()
	case xsTokEnd:
		return d.end()
	}
	if !d.sawFeedback {
		return container.NoReport("dmarc: no <feedback> element in the XML")
	}
	return fmt.Errorf("dmarc: report cut short at byte %d (no </feedback>): %w: %w",
		d.s.offset(), container.ErrMalformed, io.ErrUnexpectedEOF)
}

func (d *aggDecoder) readError(err error) error {
	if errors.Is(err, container.ErrMalformed) || errors.Is(err, container.ErrTooLarge) || errors.Is(err, container.ErrNoReport) {
		return err
	}
	return fmt.Errorf("dmarc: reading XML at byte %d: %w", d.s.offset(), err)
}

func (d *aggDecoder) start() error {
	s := &d.s
	if len(d.kinds) >= xsMaxDepth {
		return fmt.Errorf("dmarc: XML nested deeper than %d elements at byte %d: %w", xsMaxDepth, s.offset(), container.ErrMalformed)
	}
	if len(s.name) > xsMaxName {
		return fmt.Errorf("dmarc: XML element name longer than %d bytes at byte %d: %w", xsMaxName, s.offset(), container.ErrMalformed)
	}
	prefix, local := xsSplitName(s.name)
	k := aggNone
	if d.inFeedback {
		k = d.admit(aggChild(d.kinds[len(d.kinds)-1], local))
	} else {
		d.declareNS(s.attrs)
		if string(local) == "feedback" {
			k = aggFeedback
			d.namespace = d.resolveNS(string(prefix))
			d.inFeedback, d.sawFeedback = true, true
			d.ns = nil
		}
	}
	d.offs = append(d.offs, len(d.names))
	d.names = append(d.names, s.name...)
	d.kinds = append(d.kinds, k)
	if err := d.open(k); err != nil {
		return err
	}
	if s.empty {
		d.popTo(len(d.kinds) - 1)
	}
	return nil
}

// aggMaxRepeat bounds the repeated elements kept: <error>s of a report,
// <reason>s, <dkim>s and <spf>s of a record. Real reports have a handful;
// past the bound they are ignored, so that a record of a million empty
// <dkim/> costs no memory. The reference applies the same bound.
const aggMaxRepeat = 100

// admit turns a repeated element past aggMaxRepeat into an ignored one.
func (d *aggDecoder) admit(k aggNode) aggNode {
	n := 0
	switch k {
	case aggError:
		n = len(d.meta.Errors)
	case aggReason:
		n = len(d.rec.reasons)
	case aggAuthDKIM:
		n = len(d.rec.dkim)
	case aggAuthSPF:
		n = len(d.rec.spf)
	}
	if n >= aggMaxRepeat {
		return aggIgnore
	}
	return k
}

// open starts an element of kind k.
func (d *aggDecoder) open(k aggNode) error {
	switch k {
	case aggMeta, aggPolicy:
		if d.sawRecord {
			return fmt.Errorf("dmarc: <%s> after the first <record> at byte %d: %w", d.s.name, d.s.offset(), container.ErrMalformed)
		}
	case aggRecord:
		d.records++
		if d.records > d.lim.MaxRecords {
			return fmt.Errorf("dmarc: report has more than %d records: %w", d.lim.MaxRecords, container.ErrTooLarge)
		}
		d.sawRecord, d.recordStarted = true, true
		d.rec.reset()
	case aggReason:
		d.rec.reasons = append(d.rec.reasons, PolicyReason{})
	case aggAuthDKIM:
		d.rec.dkim = append(d.rec.dkim, DKIMResult{})
	case aggAuthSPF:
		d.rec.spf = append(d.rec.spf, SPFResult{})
	}
	if k.leaf() {
		d.s.val = d.s.val[:0]
	}
	d.s.capture = k.leaf()
	return nil
}

// end closes the innermost open element with the end tag's name, and every
// element left open inside it. An end tag that matches no open element is
// ignored.
func (d *aggDecoder) end() error {
	name := d.s.name
	if n := len(d.kinds); n > 0 && string(d.names[d.offs[n-1]:]) == string(name) {
		d.popTo(n - 1) // the common case: the innermost element ends
		return nil
	}
	for i := len(d.kinds) - 2; i >= 0; i-- {
		if bytes.Equal(d.names[d.offs[i]:d.nameEnd(i)], name) {
			d.popTo(i)
			return nil
		}
	}
	return nil
}

func (d *aggDecoder) nameEnd(i int) int {
	if i+1 < len(d.offs) {
		return d.offs[i+1]
	}
	return len(d.names)
}

// popTo closes open elements until n remain.
func (d *aggDecoder) popTo(n int) {
	for len(d.kinds) > n {
		last := len(d.kinds) - 1
		k := d.kinds[last]
		d.names = d.names[:d.offs[last]]
		d.offs = d.offs[:last]
		d.kinds = d.kinds[:last]
		d.close(k)
	}
	if !d.inFeedback {
		for len(d.ns) > 0 && d.ns[len(d.ns)-1].depth >= n {
			d.ns = d.ns[:len(d.ns)-1]
		}
	}
	d.s.capture = n > 0 && d.kinds[n-1].leaf()
}

// close ends an element of kind k.
func (d *aggDecoder) close(k aggNode) {
	switch {
	case k.leaf():
		d.assign(k, d.s.val)
	case k == aggRecord:
		d.recordDone = true
	case k == aggFeedback:
		d.done = true
		d.inFeedback = false
	}
}

// assign stores the value of a leaf. The header keeps raw strings, converted
// once at the end by aggBuildHeader, exactly as the encoding/xml reference
// does; record values are converted at once (aggRecordBuilder.set).
func (d *aggDecoder) assign(k aggNode, v []byte) {
	m, p := &d.meta, &d.policy
	switch k {
	case aggVersion:
		if !d.sawRecord {
			d.version = string(v)
		}
	case aggOrgName:
		m.OrgName = string(v)
	case aggEmail:
		m.Email = string(v)
	case aggExtra:
		m.ExtraContactInfo = string(v)
	case aggReportID:
		m.ReportID = string(v)
	case aggBegin:
		m.DateRange.Begin = string(v)
	case aggEnd:
		m.DateRange.End = string(v)
	case aggError:
		m.Errors = append(m.Errors, string(v))
	case aggGenerator:
		m.Generator = string(v)
	case aggPolDomain:
		p.Domain = string(v)
	case aggP:
		p.P = string(v)
	case aggSP:
		p.SP = string(v)
	case aggNP:
		p.NP = string(v)
	case aggPct:
		p.PCT = string(v)
	case aggADKIM:
		p.ADKIM = string(v)
	case aggASPF:
		p.ASPF = string(v)
	case aggFO:
		p.FO = string(v)
	case aggTesting:
		p.Testing = string(v)
	case aggDiscovery:
		p.DiscoveryMethod = string(v)
	default:
		d.rec.set(k, v, &d.in)
	}
}

// declareNS records the xmlns declarations of an element before <feedback>.
func (d *aggDecoder) declareNS(attrs []byte) {
	if !bytes.Contains(attrs, []byte("xmlns")) {
		return
	}
	for _, a := range xsParseAttrs(attrs) {
		prefix, local := xsSplitName(a.name)
		switch {
		case prefix == nil && string(local) == "xmlns":
			d.ns = append(d.ns, aggNSDecl{depth: len(d.kinds), prefix: "", uri: string(a.value)})
		case string(prefix) == "xmlns":
			d.ns = append(d.ns, aggNSDecl{depth: len(d.kinds), prefix: string(local), uri: string(a.value)})
		}
	}
}

// resolveNS maps an element prefix to its namespace as encoding/xml does:
// "xmlns" stays, "xml" is the XML namespace, an undeclared prefix stays.
func (d *aggDecoder) resolveNS(prefix string) string {
	switch prefix {
	case "xmlns":
		return prefix
	case "xml":
		return "http://www.w3.org/XML/1998/namespace"
	}
	for i := len(d.ns) - 1; i >= 0; i-- {
		if d.ns[i].prefix == prefix {
			return d.ns[i].uri
		}
	}
	return prefix
}
