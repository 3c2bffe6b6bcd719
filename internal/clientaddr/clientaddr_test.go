package clientaddr

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func request(peer string, xff ...string) *http.Request {
	r := httptest.NewRequest("GET", "/", nil)
	r.RemoteAddr = peer
	for _, v := range xff {
		r.Header.Add("X-Forwarded-For", v)
	}
	return r
}

// TestAddr ensures the client address is the peer's unless the peer is a
// trusted proxy, and then the right-most X-Forwarded-For address that is
// not one: a client cannot choose its address by sending the header itself.
func TestAddr(t *testing.T) {
	p, err := ParseProxies([]string{"10.0.0.0/8", "192.0.2.7", "2001:db8::/32"})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, peer string
		xff        []string
		want       string
	}{
		{"no proxy header", "198.51.100.9:4000", nil, "198.51.100.9"},
		{"untrusted peer's header ignored", "198.51.100.9:4000", []string{"203.0.113.5"}, "198.51.100.9"},
		{"trusted peer, one hop", "10.1.2.3:4000", []string{"203.0.113.5"}, "203.0.113.5"},
		{"forged left part skipped", "10.1.2.3:4000", []string{"1.1.1.1, 203.0.113.5"}, "203.0.113.5"},
		{"chain of trusted proxies", "10.1.2.3:4000", []string{"1.1.1.1, 203.0.113.5, 192.0.2.7, 10.9.9.9"}, "203.0.113.5"},
		{"several header lines", "10.1.2.3:4000", []string{"1.1.1.1", "203.0.113.5", "10.9.9.9"}, "203.0.113.5"},
		{"single trusted address", "192.0.2.7:4000", []string{"203.0.113.5"}, "203.0.113.5"},
		{"IPv6 proxy and client", "[2001:db8::1]:4000", []string{"2001:db8:1::5, 2a00::9"}, "2a00::9"},
		{"mapped IPv4 peer", "[::ffff:10.1.2.3]:4000", []string{"203.0.113.5"}, "203.0.113.5"},
		{"port and brackets in the header", "10.1.2.3:4000", []string{"[2a00::9]:1234"}, "2a00::9"},
		{"IPv4 with port in the header", "10.1.2.3:4000", []string{"203.0.113.5:1234"}, "203.0.113.5"},
		{"trusted peer without header", "10.1.2.3:4000", nil, "10.1.2.3"},
		{"all hops trusted", "10.1.2.3:4000", []string{"10.0.0.1, 10.0.0.2"}, "10.0.0.1"},
		{"garbage stops the walk", "10.1.2.3:4000", []string{"203.0.113.5, unknown, 10.0.0.2"}, "10.0.0.2"},
		{"empty header", "10.1.2.3:4000", []string{""}, "10.1.2.3"},
	} {
		if got := p.Addr(request(c.peer, c.xff...)); got != c.want {
			t.Errorf("%s: Addr = %q, want %q", c.name, got, c.want)
		}
	}
	var none *Proxies
	if got := none.Addr(request("10.1.2.3:4000", "203.0.113.5")); got != "10.1.2.3" {
		t.Errorf("no trusted proxies: %q", got)
	}
	if got := none.Addr(request("pipe")); got != "pipe" {
		t.Errorf("a peer without a port: %q", got)
	}
}

// TestParseProxies ensures CIDRs and single addresses are taken and
// anything else is refused with the value named.
func TestParseProxies(t *testing.T) {
	if p, err := ParseProxies(nil); err != nil || p != nil {
		t.Errorf("no proxies: %v, %v", p, err)
	}
	p, err := ParseProxies([]string{" 127.0.0.1 ", "::1", "172.16.0.0/12"})
	if err != nil || len(p.prefixes) != 3 || p.String() != "127.0.0.1/32,::1/128,172.16.0.0/12" {
		t.Fatalf("%v, %v", p, err)
	}
	for _, bad := range []string{"", "10.0.0.0/33", "proxy.example", "10.0.0.1/8/1"} {
		if _, err := ParseProxies([]string{bad}); err == nil || !strings.Contains(err.Error(), bad) {
			t.Errorf("%q: %v", bad, err)
		}
	}
}

// TestWrapAndOf ensures a wrapped handler and everything below it read the
// one address computed for the request, and an unwrapped request reads its
// peer.
func TestWrapAndOf(t *testing.T) {
	p, _ := ParseProxies([]string{"10.0.0.0/8"})
	var got string
	h := p.Wrap(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) { got = Of(r) }))
	h.ServeHTTP(httptest.NewRecorder(), request("10.1.2.3:4000", "203.0.113.5"))
	if got != "203.0.113.5" {
		t.Errorf("wrapped: %q", got)
	}
	if got := Of(request("10.1.2.3:4000", "203.0.113.5")); got != "10.1.2.3" {
		t.Errorf("unwrapped: %q", got)
	}
}
