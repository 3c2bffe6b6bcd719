package dnstest

import (
	"strings"

	"github.com/miekg/dns"
)

const ttl = 60

// answer is what the zone says about one question, copied out under the lock.
type answer struct {
	exists bool // it has data or is an empty non-terminal
	entry  entry
}

// ServeDNS answers one query from the zone; it implements dns.Handler.
func (s *Server) ServeDNS(w dns.ResponseWriter, req *dns.Msg) {
	m := new(dns.Msg)
	if len(req.Question) != 1 {
		m.SetRcodeFormatError(req)
		_ = w.WriteMsg(m) // a failed write looks like a lost packet to the client
		return
	}
	q := req.Question[0]
	a := s.lookup(q.Name)
	if a.entry.drop {
		return
	}
	m.SetReply(req)
	m.Authoritative = true
	udp := w.RemoteAddr().Network() == "udp"
	switch {
	case a.entry.rcode != dns.RcodeSuccess:
		m.Rcode = a.entry.rcode
	case a.entry.truncUDP && udp:
		m.Truncated = true
	case !a.exists:
		m.Rcode = dns.RcodeNameError
	default:
		m.Answer = records(q, &a.entry)
	}
	fit(m, req, udp)
	_ = w.WriteMsg(m) // a failed write looks like a lost packet to the client
}

// lookup counts the query and copies what the zone holds for name.
func (s *Server) lookup(name string) answer {
	k := key(name)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.queries[k]++
	var a answer
	if e := s.names[k]; e != nil {
		a.entry = *e
		a.exists = e.hasData()
	}
	if !a.exists {
		a.exists = s.isEmptyNonTerminalLocked(k)
	}
	return a
}

// isEmptyNonTerminalLocked reports whether some name with data lies below k,
// which makes k exist (RFC 8020) although it holds no records.
func (s *Server) isEmptyNonTerminalLocked(k string) bool {
	for name, e := range s.names {
		if e.hasData() && strings.HasSuffix(name, "."+k) {
			return true
		}
	}
	return k == "."
}

// records builds the answer section for q from e.
func records(q dns.Question, e *entry) []dns.RR {
	hdr := func(t uint16) dns.RR_Header {
		return dns.RR_Header{Name: q.Name, Rrtype: t, Class: dns.ClassINET, Ttl: ttl}
	}
	var rrs []dns.RR
	switch q.Qtype {
	case dns.TypeTXT:
		for _, strs := range e.txt {
			rrs = append(rrs, &dns.TXT{Hdr: hdr(dns.TypeTXT), Txt: strs})
		}
	case dns.TypeA:
		for _, ip := range e.addrs {
			if ip.Is4() {
				rrs = append(rrs, &dns.A{Hdr: hdr(dns.TypeA), A: ip.AsSlice()})
			}
		}
	case dns.TypeAAAA:
		for _, ip := range e.addrs {
			if ip.Is6() {
				rrs = append(rrs, &dns.AAAA{Hdr: hdr(dns.TypeAAAA), AAAA: ip.AsSlice()})
			}
		}
	case dns.TypeMX:
		for i, h := range e.mx {
			rrs = append(rrs, &dns.MX{Hdr: hdr(dns.TypeMX), Preference: uint16(10 * (i + 1)), Mx: dns.Fqdn(h)})
		}
	case dns.TypePTR:
		for _, h := range e.ptr {
			rrs = append(rrs, &dns.PTR{Hdr: hdr(dns.TypePTR), Ptr: dns.Fqdn(h)})
		}
	}
	return rrs
}

// fit echoes EDNS0 and, over UDP, truncates the reply to what the client
// can take: 512 octets without EDNS0 (RFC 1035 section 4.2.1), else its
// advertised size (RFC 6891 section 6.2.5).
func fit(m, req *dns.Msg, udp bool) {
	size := dns.MinMsgSize
	if opt := req.IsEdns0(); opt != nil {
		m.SetEdns0(opt.UDPSize(), false)
		size = max(int(opt.UDPSize()), dns.MinMsgSize)
	}
	if udp {
		m.Truncate(size)
	}
}
