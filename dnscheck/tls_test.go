package dnscheck

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/dmarcd/dmarcd/internal/dnstest"
	"github.com/dmarcd/dmarcd/internal/egress"
)

// testCA makes a CA and a server certificate it signs for names.
func testCA(t *testing.T, names ...string) (*x509.CertPool, tls.Certificate) {
	t.Helper()
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "dmarcd test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: names[0]}, DNSNames: names,
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	return pool, tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// tlsEnv is a loopback DNS server and an HTTPS server with a test CA
// serving policy as mta-sts.example.com's policy file.
type tlsEnv struct {
	dns     *dnstest.Server
	checker *TLSChecker
	policy  string
	status  int
	ctype   string
}

func newTLSEnv(t *testing.T) *tlsEnv {
	e := &tlsEnv{dns: dnstest.Start(t), status: 200, ctype: "text/plain"}
	pool, cert := testCA(t, "mta-sts.example.com")
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/.well-known/mta-sts.txt" || r.Host == "" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", e.ctype)
		w.WriteHeader(e.status)
		w.Write([]byte(e.policy))
	}))
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	p, _ := strconv.Atoi(port)
	res := quickResolver(t, e.dns)
	client := egress.NewClient(res, egress.Policy{AllowPrivate: true, RootCAs: pool}).WithTimeout(MTASTSBudget)
	e.checker = &TLSChecker{Resolver: res, Fetcher: client, Port: p}
	e.dns.SetA("mta-sts.example.com", "127.0.0.1")
	return e
}

func (e *tlsEnv) check(t *testing.T) *TLSResult {
	t.Helper()
	res, err := e.checker.CheckTLS(context.Background(), "example.com")
	if err != nil {
		t.Fatal(err)
	}
	return res
}

const goodPolicy = "version: STSv1\r\nmode: enforce\r\nmx: mx1.example.com\r\nmx: *.example.net\r\nmax_age: 604800\r\n"

// TestCheckTLSGood ensures a correct set-up reads back fully with no
// findings: the TLS-RPT record and its rua, the MTA-STS record, and the
// policy file fetched over HTTPS with a certificate the test CA signed.
func TestCheckTLSGood(t *testing.T) {
	e := newTLSEnv(t)
	e.dns.AddTXT("_smtp._tls.example.com", "v=TLSRPTv1; rua=mailto:tls@example.net,https://r.example.net/tlsrpt")
	e.dns.AddTXT("_smtp._tls.example.com", "something else")
	e.dns.AddTXT("_mta-sts.example.com", "v=STSv1; id=20261120T000000")
	e.policy = goodPolicy
	res := e.check(t)
	r := res.TLSRPT
	if !r.Found || *r.Record != "v=TLSRPTv1; rua=mailto:tls@example.net,https://r.example.net/tlsrpt" ||
		len(r.RUA) != 2 || len(r.Errors)+len(r.Warnings) != 0 {
		t.Errorf("tlsrpt %+v", r)
	}
	m := res.MTASTS
	if !m.Found || *m.ID != "20261120T000000" || m.Policy == nil || len(m.Errors)+len(m.Warnings) != 0 {
		t.Fatalf("mta-sts %+v", m)
	}
	if p := m.Policy; p.Version != "STSv1" || p.Mode != "enforce" || len(p.MX) != 2 || p.MX[1] != "*.example.net" || *p.MaxAge != 604800 {
		t.Errorf("policy %+v", p)
	}
}

// TestCheckTLSProblems ensures each kind of problem is named.
func TestCheckTLSProblems(t *testing.T) {
	cases := []struct {
		name           string
		setup          func(e *tlsEnv)
		rptErr, stsErr string
		stsWarn        string
	}{
		{"nothing published", func(e *tlsEnv) {}, "no TLS-RPT record", "", "no MTA-STS record"},
		{"two TLS-RPT records", func(e *tlsEnv) {
			e.dns.AddTXT("_smtp._tls.example.com", "v=TLSRPTv1; rua=mailto:a@example.net")
			e.dns.AddTXT("_smtp._tls.example.com", "v=TLSRPTv1; rua=mailto:b@example.net")
		}, "2 TLS-RPT records", "", ""},
		{"bad rua", func(e *tlsEnv) {
			e.dns.AddTXT("_smtp._tls.example.com", "v=TLSRPTv1; rua=http://r.example.net/")
		}, "must be mailto: or https:", "", ""},
		{"no rua", func(e *tlsEnv) { e.dns.AddTXT("_smtp._tls.example.com", "v=TLSRPTv1") }, "no rua", "", ""},
		{"bad id", func(e *tlsEnv) {
			e.dns.AddTXT("_mta-sts.example.com", "v=STSv1; id=not-valid!")
			e.policy = goodPolicy
		}, "", "must be 1 to 32 letters and digits", ""},
		{"policy 404", func(e *tlsEnv) {
			e.dns.AddTXT("_mta-sts.example.com", "v=STSv1; id=1")
			e.status = 404
		}, "", "HTTP 404", ""},
		{"policy host unknown", func(e *tlsEnv) {
			e.dns.AddTXT("_mta-sts.example.com", "v=STSv1; id=1")
			e.dns.SetA("mta-sts.example.com")
			e.dns.SetRcode("mta-sts.example.com", dns.RcodeNameError)
		}, "", "could not be resolved", ""},
		{"broken policy", func(e *tlsEnv) {
			e.dns.AddTXT("_mta-sts.example.com", "v=STSv1; id=1")
			e.policy = "version: STSv2\nmode: strict\nmax_age: 99999999999\ngarbage"
		}, "", "not enforce, testing or none", ""},
		{"testing mode, short max_age, wrong type", func(e *tlsEnv) {
			e.dns.AddTXT("_mta-sts.example.com", "v=STSv1; id=1")
			e.policy = "version: STSv1\nmode: testing\nmx: mx.example.com\nmax_age: 60\n"
			e.ctype = "text/html"
		}, "", "", "mode is testing"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := newTLSEnv(t)
			c.setup(e)
			res := e.check(t)
			if c.rptErr != "" && !hasText(res.TLSRPT.Errors, c.rptErr) {
				t.Errorf("tlsrpt errors %q, want %q", res.TLSRPT.Errors, c.rptErr)
			}
			if c.stsErr != "" && !hasText(res.MTASTS.Errors, c.stsErr) {
				t.Errorf("mta-sts errors %q, want %q", res.MTASTS.Errors, c.stsErr)
			}
			if c.stsWarn != "" && !hasText(res.MTASTS.Warnings, c.stsWarn) {
				t.Errorf("mta-sts warnings %q, want %q", res.MTASTS.Warnings, c.stsWarn)
			}
		})
	}
}

// TestCheckTLSAddressPolicy ensures the policy file is fetched under the
// webhook address policy: without AllowPrivate a loopback host is refused,
// and a certificate from an unknown CA is not trusted.
func TestCheckTLSAddressPolicy(t *testing.T) {
	e := newTLSEnv(t)
	e.dns.AddTXT("_mta-sts.example.com", "v=STSv1; id=1")
	e.policy = goodPolicy
	strict := *e.checker
	strict.Fetcher = egress.NewClient(strict.Resolver, egress.Policy{})
	res, err := strict.CheckTLS(context.Background(), "example.com")
	if err != nil || res.MTASTS.Policy != nil || !hasText(res.MTASTS.Errors, "refused by policy") {
		t.Errorf("loopback without AllowPrivate: %+v, %v", res.MTASTS, err)
	}
	otherPool, _ := testCA(t, "mta-sts.example.com")
	untrusting := *e.checker
	untrusting.Fetcher = egress.NewClient(strict.Resolver, egress.Policy{AllowPrivate: true, RootCAs: otherPool})
	res, err = untrusting.CheckTLS(context.Background(), "example.com")
	if err != nil || res.MTASTS.Policy != nil || !hasText(res.MTASTS.Errors, "certificate") {
		t.Errorf("unknown CA: %+v, %v", res.MTASTS, err)
	}
}

// TestCheckTLSTemporary ensures a DNS failure is an error wrapping
// ErrTemporary, not a finding.
func TestCheckTLSTemporary(t *testing.T) {
	e := newTLSEnv(t)
	e.dns.SetRcode("_smtp._tls.example.com", dns.RcodeServerFailure)
	if res, err := e.checker.CheckTLS(context.Background(), "example.com"); !errors.Is(err, ErrTemporary) || res != nil {
		t.Fatalf("res %+v, err %v", res, err)
	}
}

// TestTLSRPTRecord ensures the record to publish names the address.
func TestTLSRPTRecord(t *testing.T) {
	got := TLSRPTRecord("example.com", "abc@reports.example.net")
	if got != (DNSRecord{Type: "TXT", Name: "_smtp._tls.example.com", Value: "v=TLSRPTv1; rua=mailto:abc@reports.example.net"}) {
		t.Errorf("%+v", got)
	}
}
