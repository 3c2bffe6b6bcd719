package tlsrpt

import (
	"encoding/json"
	"fmt"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// decode reads a report's JSON into the raw structs in one pass, checking
// the syntax and the limits as it goes: nesting (lim.MaxDepth), the
// elements of any array (lim.MaxArray), unknown members included. It
// replaces encoding/json, which was four fifths of what a stored TLS
// report cost (reflection, a validity pass before decoding, one more pass
// for the limits): this knows the schema. Member names are matched
// exactly, as RFC 8460 spells them (encoding/json ignored case); the last
// of repeated members wins; invalid UTF-8 in strings becomes U+FFFD, as
// encoding/json does.
func decode(data []byte, lim Limits) (*rawReport, error) {
	d := &decoder{data: data, lim: lim, pi: -1, fi: -1}
	raw := &rawReport{}
	d.ws()
	if d.pos >= len(d.data) {
		return nil, d.eof()
	}
	switch c := d.data[d.pos]; {
	case c == '{':
		if err := d.object(d.report(raw)); err != nil {
			return nil, err
		}
	case c == 'n':
		if err := d.literal("null"); err != nil {
			return nil, err
		}
	default:
		if err := d.skip(); err != nil {
			return nil, err
		}
		return nil, malformed("report: a JSON %s where the schema wants a object", kindName(c))
	}
	d.ws()
	if d.pos < len(d.data) {
		return nil, malformed("invalid character %q after top-level value at byte %d", d.data[d.pos], d.pos)
	}
	return raw, nil
}

type decoder struct {
	data  []byte
	pos   int
	depth int
	lim   Limits
	buf   []byte // scratch for unescaping
	// pi and fi are the policy and failure detail being read (-1: none),
	// for the paths in errors, formatted only when there is an error.
	pi, fi int
}

// path names field of the policy and failure detail being read.
func (d *decoder) path(field string) string {
	switch {
	case d.fi >= 0:
		return fmt.Sprintf("policies[%d].failure-details[%d].%s", d.pi, d.fi, field)
	case d.pi >= 0:
		return fmt.Sprintf("policies[%d].%s", d.pi, field)
	}
	return field
}

func (d *decoder) eof() error { return malformed("unexpected end of JSON input") }

func (d *decoder) invalid(what string) error {
	if d.pos >= len(d.data) {
		return d.eof()
	}
	return malformed("invalid character %q %s at byte %d", d.data[d.pos], what, d.pos)
}

func (d *decoder) ws() {
	for d.pos < len(d.data) {
		switch d.data[d.pos] {
		case ' ', '\t', '\r', '\n':
			d.pos++
		default:
			return
		}
	}
}

// peek returns the first byte of the next value, after white space; 0 at
// the end.
func (d *decoder) peek() byte {
	d.ws()
	if d.pos >= len(d.data) {
		return 0
	}
	return d.data[d.pos]
}

func kindName(c byte) string {
	switch c {
	case '{':
		return "object"
	case '[':
		return "array"
	case '"':
		return "string"
	case 't', 'f':
		return "bool"
	case 'n':
		return "null"
	}
	return "number"
}

// typeErr skips the value at hand and words the mismatch.
func (d *decoder) typeErr(field, want string) error {
	c := d.peek()
	if err := d.skip(); err != nil {
		return err
	}
	return malformed("%s: a JSON %s where the schema wants a %s", d.path(field), kindName(c), want)
}

func (d *decoder) enter() error {
	d.depth++
	if d.depth > d.lim.MaxDepth {
		return tooLarge("nesting deeper than %d levels", d.lim.MaxDepth)
	}
	return nil
}

// object reads an object whose '{' is at hand, calling member for each
// member with its name (valid until the next read) positioned at its
// value, which member must consume.
func (d *decoder) object(member func(name []byte) error) error {
	if err := d.enter(); err != nil {
		return err
	}
	d.pos++ // '{'
	if d.peek() == '}' {
		d.pos++
		d.depth--
		return nil
	}
	for {
		if d.peek() != '"' {
			return d.invalid("looking for beginning of object key string")
		}
		name, err := d.rawString()
		if err != nil {
			return err
		}
		if d.peek() != ':' {
			return d.invalid("after object key")
		}
		d.pos++
		d.ws()
		if err := member(name); err != nil {
			return err
		}
		switch d.peek() {
		case ',':
			d.pos++
		case '}':
			d.pos++
			d.depth--
			return nil
		default:
			return d.invalid("after object key:value pair")
		}
	}
}

// array reads an array whose '[' is at hand, calling elem for each
// element, positioned at it.
func (d *decoder) array(elem func(i int) error) error {
	if err := d.enter(); err != nil {
		return err
	}
	d.pos++ // '['
	if d.peek() == ']' {
		d.pos++
		d.depth--
		return nil
	}
	for i := 0; ; i++ {
		if i >= d.lim.MaxArray {
			return tooLarge("an array of more than %d elements", d.lim.MaxArray)
		}
		if d.peek() == 0 {
			return d.eof()
		}
		if err := elem(i); err != nil {
			return err
		}
		switch d.peek() {
		case ',':
			d.pos++
		case ']':
			d.pos++
			d.depth--
			return nil
		default:
			return d.invalid("after array element")
		}
	}
}

// skip reads any value.
func (d *decoder) skip() error {
	switch c := d.peek(); c {
	case '{':
		return d.object(func([]byte) error { return d.skip() })
	case '[':
		return d.array(func(int) error { return d.skip() })
	case '"':
		_, err := d.rawString()
		return err
	case 't':
		return d.literal("true")
	case 'f':
		return d.literal("false")
	case 'n':
		return d.literal("null")
	case 0:
		return d.eof()
	default:
		_, err := d.number()
		return err
	}
}

func (d *decoder) literal(word string) error {
	for i := 0; i < len(word); i++ {
		if d.pos >= len(d.data) {
			return d.eof()
		}
		if d.data[d.pos] != word[i] {
			return d.invalid("in literal " + word)
		}
		d.pos++
	}
	return nil
}

// null consumes a null at hand and reports whether there was one.
func (d *decoder) null() (bool, error) {
	if d.peek() != 'n' {
		return false, nil
	}
	return true, d.literal("null")
}

// number reads a JSON number and returns its text.
func (d *decoder) number() (string, error) {
	start := d.pos
	if d.pos < len(d.data) && d.data[d.pos] == '-' {
		d.pos++
	}
	switch {
	case d.pos >= len(d.data):
		return "", d.eof()
	case d.data[d.pos] == '0':
		d.pos++
	case '1' <= d.data[d.pos] && d.data[d.pos] <= '9':
		d.digits()
	default:
		return "", d.invalid("looking for beginning of value")
	}
	if d.pos < len(d.data) && d.data[d.pos] == '.' {
		d.pos++
		if d.digits() == 0 {
			return "", d.invalid("after decimal point in numeric literal")
		}
	}
	if d.pos < len(d.data) && (d.data[d.pos] == 'e' || d.data[d.pos] == 'E') {
		d.pos++
		if d.pos < len(d.data) && (d.data[d.pos] == '+' || d.data[d.pos] == '-') {
			d.pos++
		}
		if d.digits() == 0 {
			return "", d.invalid("in exponent of numeric literal")
		}
	}
	return string(d.data[start:d.pos]), nil
}

func (d *decoder) digits() int {
	n := 0
	for d.pos < len(d.data) && '0' <= d.data[d.pos] && d.data[d.pos] <= '9' {
		d.pos++
		n++
	}
	return n
}

// rawString reads a string whose '"' is at hand and returns its content,
// unescaped and valid UTF-8: a slice of the input when it needs no
// change, else of a scratch buffer; valid until the next read.
func (d *decoder) rawString() ([]byte, error) {
	d.pos++ // '"'
	start := d.pos
	ascii := true
	for d.pos < len(d.data) {
		c := d.data[d.pos]
		switch {
		case c == '"':
			s := d.data[start:d.pos]
			d.pos++
			if ascii || utf8.Valid(s) {
				return s, nil
			}
			d.buf = appendValid(d.buf[:0], s)
			return d.buf, nil
		case c == '\\':
			return d.escaped(start)
		case c < 0x20:
			return nil, d.invalid("in string literal")
		case c >= 0x80:
			ascii = false
		}
		d.pos++
	}
	return nil, d.eof()
}

// escaped finishes a string that has escapes, from its start.
func (d *decoder) escaped(start int) ([]byte, error) {
	b := appendValid(d.buf[:0], d.data[start:d.pos])
	for d.pos < len(d.data) {
		c := d.data[d.pos]
		switch {
		case c == '"':
			d.pos++
			d.buf = b
			return b, nil
		case c < 0x20:
			return nil, d.invalid("in string literal")
		case c != '\\':
			end := d.pos
			for end < len(d.data) && d.data[end] != '"' && d.data[end] != '\\' && d.data[end] >= 0x20 {
				end++
			}
			b = appendValid(b, d.data[d.pos:end])
			d.pos = end
			continue
		}
		d.pos++
		if d.pos >= len(d.data) {
			return nil, d.eof()
		}
		e := d.data[d.pos]
		d.pos++
		switch e {
		case '"', '\\', '/':
			b = append(b, e)
		case 'b':
			b = append(b, '\b')
		case 'f':
			b = append(b, '\f')
		case 'n':
			b = append(b, '\n')
		case 'r':
			b = append(b, '\r')
		case 't':
			b = append(b, '\t')
		case 'u':
			r, ok := d.hex4()
			if !ok {
				return nil, d.invalid("in \\u hexadecimal character escape")
			}
			if utf16.IsSurrogate(r) {
				r2 := rune(-1)
				if d.pos+1 < len(d.data) && d.data[d.pos] == '\\' && d.data[d.pos+1] == 'u' {
					save := d.pos
					d.pos += 2
					var ok2 bool
					if r2, ok2 = d.hex4(); !ok2 {
						return nil, d.invalid("in \\u hexadecimal character escape")
					}
					if dec := utf16.DecodeRune(r, r2); dec != utf8.RuneError {
						r, r2 = dec, -1
					} else {
						d.pos = save // the second escape stands alone
						r2 = -1
						r = utf8.RuneError
					}
				} else {
					r = utf8.RuneError
				}
			}
			b = utf8.AppendRune(b, r)
		default:
			d.pos--
			return nil, d.invalid("in string escape code")
		}
	}
	return nil, d.eof()
}

func (d *decoder) hex4() (rune, bool) {
	if d.pos+4 > len(d.data) {
		return 0, false
	}
	v, err := strconv.ParseUint(string(d.data[d.pos:d.pos+4]), 16, 32)
	if err != nil {
		return 0, false
	}
	d.pos += 4
	return rune(v), true
}

// appendValid appends s with each byte of invalid UTF-8 as U+FFFD.
func appendValid(b, s []byte) []byte {
	for len(s) > 0 {
		r, n := utf8.DecodeRune(s)
		if r == utf8.RuneError && n == 1 {
			b = utf8.AppendRune(b, utf8.RuneError)
		} else {
			b = append(b, s[:n]...)
		}
		s = s[n:]
	}
	return b
}

// optString reads a string or null (nil).
func (d *decoder) optString(field string) (*string, error) {
	switch d.peek() {
	case '"':
		s, err := d.rawString()
		if err != nil {
			return nil, err
		}
		v := string(s)
		return &v, nil
	case 'n':
		return nil, d.literal("null")
	}
	return nil, d.typeErr(field, "string")
}

// optNumber reads a number or null (nil).
func (d *decoder) optNumber(field string) (*json.Number, error) {
	switch c := d.peek(); {
	case c == '-' || '0' <= c && c <= '9':
		s, err := d.number()
		if err != nil {
			return nil, err
		}
		n := json.Number(s)
		return &n, nil
	case c == 'n':
		return nil, d.literal("null")
	}
	return nil, d.typeErr(field, "number")
}

// strList reads a list of strings, one bare string, or null; null
// elements are skipped (see strList).
func (d *decoder) strList(field string) (strList, error) {
	switch d.peek() {
	case 'n':
		return nil, d.literal("null")
	case '"':
		s, err := d.rawString()
		return strList{string(s)}, err
	case '[':
		out := strList{}
		err := d.array(func(int) error {
			switch d.peek() {
			case 'n':
				return d.literal("null")
			case '"':
				s, err := d.rawString()
				out = append(out, string(s))
				return err
			}
			if err := d.skip(); err != nil {
				return err
			}
			return malformed("%s must be a string or an array of strings", d.path(field))
		})
		return out, err
	}
	if err := d.skip(); err != nil {
		return nil, err
	}
	return nil, malformed("%s must be a string or an array of strings", d.path(field))
}

// objectOrNull runs member over an object, or accepts null (present
// false).
func (d *decoder) objectOrNull(field string, member func(name []byte) error) (present bool, err error) {
	switch d.peek() {
	case '{':
		return true, d.object(member)
	case 'n':
		return false, d.literal("null")
	}
	return false, d.typeErr(field, "object")
}

func (d *decoder) report(r *rawReport) func([]byte) error {
	return func(name []byte) error {
		var err error
		switch string(name) {
		case "organization-name":
			r.OrganizationName, err = d.optString("organization-name")
		case "contact-info":
			r.ContactInfo, err = d.optString("contact-info")
		case "report-id":
			r.ReportID, err = d.optString("report-id")
		case "date-range":
			dr := &rawDate{}
			var ok bool
			ok, err = d.objectOrNull("date-range", func(name []byte) error {
				var err error
				switch string(name) {
				case "start-datetime":
					dr.Start, err = d.optString("date-range.start-datetime")
				case "end-datetime":
					dr.End, err = d.optString("date-range.end-datetime")
				default:
					err = d.skip()
				}
				return err
			})
			r.DateRange = nil
			if ok {
				r.DateRange = dr
			}
		case "policies":
			r.Policies = nil
			switch d.peek() {
			case 'n':
				err = d.literal("null")
			case '[':
				pols := []*rawPolicy{}
				err = d.array(func(i int) error {
					if isNull, err := d.null(); isNull || err != nil {
						pols = append(pols, nil)
						return err
					}
					p := &rawPolicy{}
					if d.peek() != '{' {
						return d.typeErr(fmt.Sprintf("policies[%d]", i), "object")
					}
					pols = append(pols, p)
					d.pi = i
					err := d.object(d.policy(p))
					d.pi = -1
					return err
				})
				r.Policies = &pols
			default:
				err = d.typeErr("policies", "array")
			}
		default:
			err = d.skip()
		}
		return err
	}
}

type rawPolicyHead = struct {
	Type    *string `json:"policy-type"`
	Strings strList `json:"policy-string"`
	Domain  *string `json:"policy-domain"`
	MXHost  strList `json:"mx-host"`
}

type rawSummary = struct {
	Successful *json.Number `json:"total-successful-session-count"`
	Failed     *json.Number `json:"total-failure-session-count"`
}

func (d *decoder) policy(p *rawPolicy) func([]byte) error {
	return func(name []byte) error {
		var err error
		switch string(name) {
		case "policy":
			h := &rawPolicyHead{}
			var ok bool
			ok, err = d.objectOrNull("policy", func(name []byte) error {
				var err error
				switch string(name) {
				case "policy-type":
					h.Type, err = d.optString("policy.policy-type")
				case "policy-string":
					h.Strings, err = d.strList("policy.policy-string")
				case "policy-domain":
					h.Domain, err = d.optString("policy.policy-domain")
				case "mx-host":
					h.MXHost, err = d.strList("policy.mx-host")
				default:
					err = d.skip()
				}
				return err
			})
			p.Policy = nil
			if ok {
				p.Policy = h
			}
		case "summary":
			s := &rawSummary{}
			var ok bool
			ok, err = d.objectOrNull("summary", func(name []byte) error {
				var err error
				switch string(name) {
				case "total-successful-session-count":
					s.Successful, err = d.optNumber("summary.total-successful-session-count")
				case "total-failure-session-count":
					s.Failed, err = d.optNumber("summary.total-failure-session-count")
				default:
					err = d.skip()
				}
				return err
			})
			p.Summary = nil
			if ok {
				p.Summary = s
			}
		case "failure-details":
			p.Failures = nil
			switch d.peek() {
			case 'n':
				err = d.literal("null")
			case '[':
				fs := []*rawFailure{}
				err = d.array(func(j int) error {
					if isNull, err := d.null(); isNull || err != nil {
						fs = append(fs, nil)
						return err
					}
					if d.peek() != '{' {
						return d.typeErr(fmt.Sprintf("failure-details[%d]", j), "object")
					}
					f := &rawFailure{}
					fs = append(fs, f)
					d.fi = j
					err := d.object(d.failure(f))
					d.fi = -1
					return err
				})
				p.Failures = fs
			default:
				err = d.typeErr("failure-details", "array")
			}
		default:
			err = d.skip()
		}
		return err
	}
}

func (d *decoder) failure(f *rawFailure) func([]byte) error {
	return func(name []byte) error {
		var err error
		field := string(name)
		switch field {
		case "result-type":
			f.ResultType, err = d.optString(field)
		case "sending-mta-ip":
			f.SendingMTAIP, err = d.optString(field)
		case "receiving-mx-hostname":
			f.ReceivingMXHostname, err = d.optString(field)
		case "receiving-mx-helo":
			f.ReceivingMXHelo, err = d.optString(field)
		case "receiving-ip":
			f.ReceivingIP, err = d.optString(field)
		case "failed-session-count":
			f.FailedSessions, err = d.optNumber(field)
		case "additional-information":
			f.AdditionalInformation, err = d.optString(field)
		case "failure-reason-code":
			f.FailureReasonCode, err = d.optString(field)
		default:
			err = d.skip()
		}
		return err
	}
}
