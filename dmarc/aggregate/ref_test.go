package aggregate

import (
	"bytes"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/dmarcd/dmarcd/dmarc/container"

	"golang.org/x/text/transform"
)

// The encoding/xml reference decoder. It applies the same documented rules
// as Reader (first <feedback> at any depth, header before records,
// per-field conversions of aggregate_convert.go), but gets the XML
// structure from encoding/xml: tokenizing, entity decoding, which text
// belongs to which field, how repeated elements merge. FuzzAggregate
// checks that both agree on every input encoding/xml accepts.

type aggRefReason struct {
	Type    string `xml:"type"`
	Comment string `xml:"comment"`
}

type aggRefAuth struct {
	Domain      string `xml:"domain"`
	Selector    string `xml:"selector"`
	Scope       string `xml:"scope"`
	Result      string `xml:"result"`
	HumanResult string `xml:"human_result"`
}

type aggRefRecord struct {
	Row struct {
		SourceIP        string `xml:"source_ip"`
		Count           string `xml:"count"`
		PolicyEvaluated struct {
			Disposition string         `xml:"disposition"`
			DKIM        string         `xml:"dkim"`
			SPF         string         `xml:"spf"`
			Reasons     []aggRefReason `xml:"reason"`
		} `xml:"policy_evaluated"`
	} `xml:"row"`
	Identifiers struct {
		HeaderFrom   string `xml:"header_from"`
		EnvelopeFrom string `xml:"envelope_from"`
		EnvelopeTo   string `xml:"envelope_to"`
	} `xml:"identifiers"`
	AuthResults struct {
		DKIM []aggRefAuth `xml:"dkim"`
		SPF  []aggRefAuth `xml:"spf"`
	} `xml:"auth_results"`
}

// aggRefResult is what a decoder made of a report.
type aggRefResult struct {
	Header  *Header
	Records []Record
	Skipped int
}

// aggRefParse decodes a whole report with encoding/xml.
func aggRefParse(r io.Reader, lim container.Limits) (*aggRefResult, error) {
	lim = lim.WithDefaults()
	dec := xml.NewDecoder(r)
	dec.CharsetReader = func(label string, in io.Reader) (io.Reader, error) {
		if enc := xsCharset(label); enc != nil {
			return transform.NewReader(in, enc.NewDecoder()), nil
		}
		return in, nil
	}
	namespace, err := aggRefFindFeedback(dec)
	if err != nil {
		return nil, err
	}
	var (
		version  string
		meta     aggWireMeta
		policy   aggWirePolicy
		res      aggRefResult
		records  int
		finished bool
		b        aggRecordBuilder
	)
	header := func() error {
		if res.Header != nil {
			return nil
		}
		h, err := aggBuildHeader(version, namespace, &meta, &policy)
		res.Header = h
		return err
	}
	for !finished {
		tok, err := dec.Token()
		if err != nil {
			return nil, fmt.Errorf("ref: %w: %w", container.ErrMalformed, err)
		}
		switch t := tok.(type) {
		case xml.Directive:
			return nil, fmt.Errorf("ref: directive: %w", container.ErrMalformed)
		case xml.EndElement:
			finished = true
		case xml.StartElement:
			switch t.Name.Local {
			case "version":
				var s string
				err = dec.DecodeElement(&s, &t)
				if records == 0 {
					version = s
				}
			case "report_metadata":
				if records > 0 {
					return nil, fmt.Errorf("ref: metadata after record: %w", container.ErrMalformed)
				}
				err = dec.DecodeElement(&meta, &t)
			case "policy_published":
				if records > 0 {
					return nil, fmt.Errorf("ref: policy after record: %w", container.ErrMalformed)
				}
				err = dec.DecodeElement(&policy, &t)
			case "record":
				if records++; records > lim.MaxRecords {
					return nil, fmt.Errorf("ref: records: %w", container.ErrTooLarge)
				}
				if err := header(); err != nil {
					return nil, err
				}
				var w aggRefRecord
				if err = dec.DecodeElement(&w, &t); err == nil {
					if rec := aggRefConvert(&b, &w); rec != nil {
						res.Records = append(res.Records, *rec)
					} else {
						res.Skipped++
					}
				}
			default:
				err = dec.Skip()
			}
			if err != nil {
				return nil, fmt.Errorf("ref: %w: %w", container.ErrMalformed, err)
			}
		}
	}
	if err := header(); err != nil {
		return nil, err
	}
	return &res, nil
}

// aggRefFindFeedback reads up to the first <feedback> start tag and returns
// its namespace.
func aggRefFindFeedback(dec *xml.Decoder) (string, error) {
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			return "", fmt.Errorf("ref: no feedback: %w", container.ErrNoReport)
		}
		if err != nil {
			return "", fmt.Errorf("ref: %w: %w", container.ErrMalformed, err)
		}
		switch t := tok.(type) {
		case xml.Directive:
			return "", fmt.Errorf("ref: directive: %w", container.ErrMalformed)
		case xml.StartElement:
			if t.Name.Local == "feedback" {
				return t.Name.Space, nil
			}
		}
	}
}

// aggRefConvert applies the per-field conversions to a decoded record.
func aggRefConvert(b *aggRecordBuilder, w *aggRefRecord) *Record {
	b.reset()
	set := func(k aggNode, s string) { b.set(k, []byte(s), nil) }
	set(aggSourceIP, w.Row.SourceIP)
	set(aggCount, w.Row.Count)
	set(aggDisposition, w.Row.PolicyEvaluated.Disposition)
	set(aggEvalDKIM, w.Row.PolicyEvaluated.DKIM)
	set(aggEvalSPF, w.Row.PolicyEvaluated.SPF)
	for _, r := range aggFirst(w.Row.PolicyEvaluated.Reasons) {
		b.reasons = append(b.reasons, PolicyReason{})
		set(aggReasonType, r.Type)
		set(aggReasonComment, r.Comment)
	}
	set(aggHeaderFrom, w.Identifiers.HeaderFrom)
	set(aggEnvFrom, w.Identifiers.EnvelopeFrom)
	set(aggEnvTo, w.Identifiers.EnvelopeTo)
	for _, d := range aggFirst(w.AuthResults.DKIM) {
		b.dkim = append(b.dkim, DKIMResult{})
		set(aggDKIMDomain, d.Domain)
		set(aggDKIMSelector, d.Selector)
		set(aggDKIMResult, d.Result)
		set(aggDKIMHuman, d.HumanResult)
	}
	for _, s := range aggFirst(w.AuthResults.SPF) {
		b.spf = append(b.spf, SPFResult{})
		set(aggSPFDomain, s.Domain)
		set(aggSPFScope, s.Scope)
		set(aggSPFResult, s.Result)
		set(aggSPFHuman, s.HumanResult)
	}
	rec, _ := b.finish()
	return rec
}

// aggFirst returns at most aggMaxRepeat elements of s.
func aggFirst[T any](s []T) []T { return s[:min(len(s), aggMaxRepeat)] }

// aggStreamParse decodes a whole report with Reader, in the shape
// of aggRefParse.
func aggStreamParse(r io.Reader, lim container.Limits) (*aggRefResult, error) {
	a, err := NewReader(r, lim)
	if err != nil {
		return nil, err
	}
	res := &aggRefResult{Header: a.Header()}
	for {
		rec, err := a.Next()
		if err == io.EOF {
			res.Skipped = a.Skipped()
			return res, nil
		}
		if err != nil {
			return nil, err
		}
		res.Records = append(res.Records, *rec)
	}
}

// aggRefComparable reports whether the two decoders are meant to agree on
// data. They differ on purpose when:
//   - a byte order mark is present: we honour it (UTF-16, or UTF-8 over a
//     conflicting declaration); encoding/xml reads the bytes as they are;
//   - an <?xml ...?> declaration sits anywhere but at the start (or after
//     more white space than we peek at): encoding/xml switches character
//     sets in the middle of a document, we do not;
//   - there is a DTD construct: we refuse it everywhere, encoding/xml
//     silently skips one inside an element it decodes;
//   - elements nest deeper than xsMaxDepth or have names longer than
//     xsMaxName.
func aggRefComparable(data []byte, ourErr error) bool {
	if bytes.HasPrefix(data, []byte{0xEF, 0xBB, 0xBF}) || bytes.HasPrefix(data, []byte{0xFE, 0xFF}) ||
		bytes.HasPrefix(data, []byte{0xFF, 0xFE}) {
		return false
	}
	if i := bytes.Index(data, []byte("<?xml")); i >= 0 {
		lead := bytes.TrimLeft(data[:i], " \t\r\n")
		if len(lead) > 0 || i > xsDeclPeek/2 || bytes.Count(data, []byte("<?xml")) > 1 {
			return false
		}
	}
	for rest := data; ; {
		i := bytes.Index(rest, []byte("<!"))
		if i < 0 {
			break
		}
		rest = rest[i:]
		if !bytes.HasPrefix(rest, []byte("<!--")) && !bytes.HasPrefix(rest, []byte("<![CDATA[")) {
			return false
		}
		rest = rest[2:]
	}
	return ourErr == nil || !strings.Contains(ourErr.Error(), "nested deeper") && !strings.Contains(ourErr.Error(), "name longer")
}

// aggIsSentinel reports whether err wraps one of the package's sentinels.
func aggIsSentinel(err error) bool {
	return errors.Is(err, container.ErrNoReport) || errors.Is(err, container.ErrMalformed) || errors.Is(err, container.ErrTooLarge)
}
