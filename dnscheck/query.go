package dnscheck

import (
	"context"
	"fmt"

	"github.com/miekg/dns"
)

// lookup asks the servers in order, each r.attempts times, for the records
// of qtype at name, and returns those of that type from the answer section
// (the recursive server has followed any CNAME). A UDP answer with TC=1 is
// asked again over TCP (RFC 7766 section 5).
func (r *Resolver) lookup(ctx context.Context, name string, qtype uint16) ([]dns.RR, error) {
	fqdn := dns.Fqdn(name)
	what := dns.TypeToString[qtype] + " lookup of " + name
	if _, ok := dns.IsDomainName(fqdn); !ok || len(fqdn) > 254 {
		// A name that cannot be encoded cannot exist either.
		return nil, fmt.Errorf("dnscheck: %s: %w (not a valid DNS name)", what, ErrNotFound)
	}
	reason := "no DNS servers"
	for _, server := range r.servers {
		for range r.attempts {
			if err := ctx.Err(); err != nil {
				return nil, fmt.Errorf("dnscheck: %s: %w (%w)", what, ErrTemporary, err)
			}
			resp, err := r.exchange(ctx, fqdn, qtype, server)
			if err != nil {
				reason = fmt.Sprintf("%s: %v", server, err)
				continue
			}
			switch resp.Rcode {
			case dns.RcodeSuccess:
				rrs := ofType(resp.Answer, qtype)
				if len(rrs) == 0 {
					return nil, fmt.Errorf("dnscheck: %s: %w (NODATA)", what, ErrNotFound)
				}
				return rrs, nil
			case dns.RcodeNameError:
				return nil, fmt.Errorf("dnscheck: %s: %w (NXDOMAIN)", what, ErrNotFound)
			default:
				reason = fmt.Sprintf("%s from %s", dns.RcodeToString[resp.Rcode], server)
			}
		}
	}
	return nil, fmt.Errorf("dnscheck: %s: %w (%s)", what, ErrTemporary, reason)
}

// exchange makes one attempt at server: UDP with EDNS0, then TCP when the
// answer is truncated. Each transport gets the full per-attempt timeout.
func (r *Resolver) exchange(ctx context.Context, fqdn string, qtype uint16, server string) (*dns.Msg, error) {
	m := new(dns.Msg).SetQuestion(fqdn, qtype)
	m.SetEdns0(ednsBufferSize, false)
	resp, err := r.exchangeOver(ctx, "udp", m, server)
	if err != nil || !resp.Truncated {
		return resp, err
	}
	return r.exchangeOver(ctx, "tcp", m, server)
}

func (r *Resolver) exchangeOver(ctx context.Context, network string, m *dns.Msg, server string) (*dns.Msg, error) {
	ctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	c := &dns.Client{Net: network, Timeout: r.timeout}
	resp, _, err := c.ExchangeContext(ctx, m, server)
	if err != nil {
		return nil, err
	}
	if resp.Truncated && network == "tcp" {
		return nil, fmt.Errorf("truncated answer over TCP")
	}
	return resp, nil
}

func ofType(rrs []dns.RR, qtype uint16) []dns.RR {
	var out []dns.RR
	for _, rr := range rrs {
		if rr.Header().Rrtype == qtype {
			out = append(out, rr)
		}
	}
	return out
}
