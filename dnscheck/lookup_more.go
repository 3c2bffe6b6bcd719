package dnscheck

import (
	"context"
	"net/netip"
	"slices"
	"strings"

	"github.com/miekg/dns"
)

// LookupMX returns the exchange host names of name's MX records, most
// preferred first, without trailing dots. Errors as LookupTXT.
func (r *Resolver) LookupMX(ctx context.Context, name string) ([]string, error) {
	rrs, err := r.lookup(ctx, name, dns.TypeMX)
	if err != nil {
		return nil, err
	}
	mxs := make([]*dns.MX, 0, len(rrs))
	for _, rr := range rrs {
		mxs = append(mxs, rr.(*dns.MX))
	}
	slices.SortStableFunc(mxs, func(a, b *dns.MX) int { return int(a.Preference) - int(b.Preference) })
	out := make([]string, 0, len(mxs))
	for _, mx := range mxs {
		out = append(out, strings.TrimSuffix(mx.Mx, "."))
	}
	return out, nil
}

// LookupPTR returns the names of the PTR records of ip's reverse name,
// without trailing dots. Errors as LookupTXT.
func (r *Resolver) LookupPTR(ctx context.Context, ip netip.Addr) ([]string, error) {
	rev, err := dns.ReverseAddr(ip.Unmap().String())
	if err != nil {
		return nil, err
	}
	rrs, err := r.lookup(ctx, rev, dns.TypePTR)
	if err != nil {
		return nil, err
	}
	out := make([]string, 0, len(rrs))
	for _, rr := range rrs {
		out = append(out, strings.TrimSuffix(rr.(*dns.PTR).Ptr, "."))
	}
	return out, nil
}
