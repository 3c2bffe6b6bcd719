package cli

import (
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/dmarcd/dmarcd/internal/egress"
	"github.com/dmarcd/dmarcd/web"
)

// oidcOptions are the single sign-on flags of serve (--oidc-*).
type oidcOptions struct {
	Issuer           string
	ClientID         string
	ClientSecretFile string
	Only             bool
	Name             string
	AllowPrivate     bool
	CAFile           string
}

func (o *oidcOptions) AddFlags(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringVar(&o.Issuer, "oidc-issuer", "", "OpenID Connect provider's issuer URL (https), e.g. https://auth.example.net/application/o/dmarcd/: people sign in to the web interface through it (needs --public-url; register <public-url>/login/oidc/callback as its redirect URL)")
	f.StringVar(&o.ClientID, "oidc-client-id", "", "client ID of dmarcd at the OpenID Connect provider")
	f.StringVar(&o.ClientSecretFile, "oidc-client-secret-file", "", "file holding the client secret of dmarcd at the OpenID Connect provider (read at start; never logged)")
	f.BoolVar(&o.Only, "oidc-only", false, "turn password sign-in off: people sign in through the OpenID Connect provider only")
	f.StringVar(&o.Name, "oidc-name", "", `provider name on the sign-in button, e.g. "Authentik" (default: the issuer's host)`)
	f.BoolVar(&o.AllowPrivate, "oidc-allow-private", false, "let the OpenID Connect provider be on a loopback, private or link-local address (an identity provider on the local network)")
	f.StringVar(&o.CAFile, "oidc-ca-file", "", "PEM file of certificate authorities trusted for the OpenID Connect provider, besides the system's")
}

// oidcTimeout bounds each request to the provider.
const oidcTimeout = 10 * time.Second

// config checks the flags and returns the web interface's OpenID Connect
// configuration, nil without --oidc-issuer. The provider is reached
// through the egress policy: public addresses only unless
// --oidc-allow-private, https, no redirects, no proxy.
func (o *oidcOptions) config(publicURL string, resolver egress.Resolver) (*web.OIDCConfig, error) {
	if o.Issuer == "" {
		if o.Only || o.ClientID != "" || o.ClientSecretFile != "" {
			return nil, usagef("--oidc-only, --oidc-client-id and --oidc-client-secret-file need --oidc-issuer")
		}
		return nil, nil
	}
	p := egress.Policy{AllowPrivate: o.AllowPrivate}
	if err := egress.CheckURL(o.Issuer, p); err != nil {
		return nil, usagef("--oidc-issuer %q: %v", o.Issuer, err)
	}
	if o.ClientID == "" || o.ClientSecretFile == "" {
		return nil, usagef("--oidc-issuer needs --oidc-client-id and --oidc-client-secret-file")
	}
	if publicURL == "" {
		return nil, usagef("--oidc-issuer needs --public-url: the provider sends people back to <public-url>/login/oidc/callback, a URL registered with it")
	}
	b, err := os.ReadFile(o.ClientSecretFile)
	if err != nil {
		return nil, usagef("--oidc-client-secret-file: %v", err)
	}
	secret := strings.TrimSpace(string(b))
	if secret == "" {
		return nil, usagef("--oidc-client-secret-file %s is empty", o.ClientSecretFile)
	}
	if o.CAFile != "" {
		pool, err := egress.LoadCAFile(o.CAFile)
		if err != nil {
			return nil, usagef("--oidc-ca-file: %v", err)
		}
		p.RootCAs = pool
	}
	client := &http.Client{Transport: egress.NewTransport(resolver, p, oidcTimeout), Timeout: oidcTimeout,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	return &web.OIDCConfig{Issuer: o.Issuer, ClientID: o.ClientID, ClientSecret: secret, Only: o.Only,
		Name: o.Name, HTTPClient: client}, nil
}

// oidcDiscoveryBudget bounds the discovery at start-up.
const oidcDiscoveryBudget = 5 * time.Second
