// Package clickhouse streams every report dmarcd stores into ClickHouse
// (docs/clickhouse.md): it creates its tables when they are missing, then
// exports the stored reports in storage order from a durable cursor kept
// in dmarcd's own file (store.ExportCursor), in batches of up to 50,000
// rows or one second, retried with backoff while ClickHouse is down. It
// speaks ClickHouse's HTTP interface with net/http (INSERT ... FORMAT
// RowBinary), through the dialer of internal/egress.
package clickhouse

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"time"

	"github.com/dmarcd/dmarcd/internal/egress"
)

// Endpoint is where the sink writes: ClickHouse's HTTP interface, the user
// and database, and the password (never printed: Endpoint's String and
// every error leave it out).
type Endpoint struct {
	base     *url.URL // scheme and host only
	User     string
	password string
	Database string
	// Cluster, when set, is the ClickHouse cluster (remote_servers) the
	// tables are spread over: the sink creates the local tables
	// (<name>_local) on its server and a Distributed table over them,
	// sharded by organization and domain, and inserts into that.
	Cluster string
}

var identRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,63}$`)

// ParseEndpoint reads --export-clickhouse: http(s)://[user@]host[:port]/[?database=NAME].
// The password comes from password (a file or the environment), never
// from the URL: a URL with one is refused, so it never sits in a process
// list or a log. The database defaults to "default"; database and
// cluster must be plain identifiers.
func ParseEndpoint(raw, password, cluster string) (*Endpoint, error) {
	u, err := url.Parse(raw)
	if err != nil {
		// url's error quotes the whole URL, password included: say less.
		return nil, errors.New("clickhouse: the URL does not parse (want http://user@host:8123/?database=NAME)")
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, fmt.Errorf("clickhouse: URL scheme %q: want http or https (ClickHouse's HTTP interface)", u.Scheme)
	}
	if u.Host == "" || u.Hostname() == "" {
		return nil, errors.New("clickhouse: URL without a host")
	}
	if _, set := u.User.Password(); set {
		return nil, errors.New("clickhouse: the URL carries a password: give it with --export-clickhouse-password-file or DMARCD_CLICKHOUSE_PASSWORD")
	}
	if u.Path != "" && u.Path != "/" {
		return nil, fmt.Errorf("clickhouse: URL path %q: the HTTP interface is at /", u.Path)
	}
	if u.Fragment != "" {
		return nil, errors.New("clickhouse: URL with a fragment")
	}
	q, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		return nil, errors.New("clickhouse: URL parameters do not parse (want ?database=NAME)")
	}
	for k := range q {
		if k != "database" {
			return nil, fmt.Errorf("clickhouse: URL parameter %q: only database is taken", k)
		}
	}
	e := &Endpoint{base: &url.URL{Scheme: u.Scheme, Host: u.Host, Path: "/"}, User: "default",
		password: password, Database: "default", Cluster: cluster}
	if u.User != nil && u.User.Username() != "" {
		e.User = u.User.Username()
	}
	if db := q.Get("database"); db != "" {
		e.Database = db
	}
	if !identRE.MatchString(e.Database) {
		return nil, fmt.Errorf("clickhouse: database %q: letters, digits and _ only", e.Database)
	}
	if cluster != "" && !identRE.MatchString(cluster) {
		return nil, fmt.Errorf("clickhouse: cluster %q: letters, digits and _ only", cluster)
	}
	if strings.ContainsAny(e.User, "\r\n") {
		return nil, errors.New("clickhouse: bad user name")
	}
	return e, nil
}

// String is the endpoint without its password, as logs and status show it.
func (e *Endpoint) String() string {
	u := *e.base
	u.User = url.User(e.User)
	u.RawQuery = url.Values{"database": {e.Database}}.Encode()
	return u.String()
}

// client talks to one Endpoint.
type client struct {
	ep   *Endpoint
	http *http.Client
}

// newClient returns a client whose connections go through egress under
// policy (ClickHouse lives on the operator's own network: the caller
// allows private addresses, see docs/clickhouse.md).
func newClient(ep *Endpoint, r egress.Resolver, policy egress.Policy, timeout time.Duration) *client {
	tr := egress.NewTransport(r, policy, 10*time.Second)
	tr.MaxIdleConnsPerHost = 4
	return &client{ep: ep, http: &http.Client{Transport: tr, Timeout: timeout,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

// maxErrorBody is how much of an error answer is kept in the error.
const maxErrorBody = 1 << 10

// exec runs query with body (nil for none) and returns the answer's body.
// The query goes in the URL, the data in the body.
func (c *client) exec(ctx context.Context, query string, body io.Reader) ([]byte, error) {
	u := *c.ep.base
	u.RawQuery = url.Values{"query": {query}}.Encode() // statements name their database
	method := http.MethodPost
	if body == nil {
		body = http.NoBody
	}
	req, err := http.NewRequestWithContext(ctx, method, u.String(), body)
	if err != nil {
		return nil, fmt.Errorf("clickhouse: %w", err)
	}
	req.SetBasicAuth(c.ep.User, c.ep.password)
	req.Header.Set("Content-Type", "application/octet-stream")
	resp, err := c.http.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // the URL is ours and long; the cause is what matters
		}
		return nil, fmt.Errorf("clickhouse %s: %w", c.ep.base.Host, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
		return nil, &ServerError{Status: resp.StatusCode, Msg: strings.TrimSpace(c.redact(string(msg)))}
	}
	out, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return nil, fmt.Errorf("clickhouse %s: %w", c.ep.base.Host, err)
	}
	return out, nil
}

// redact removes the password from text ClickHouse sent back.
func (c *client) redact(s string) string {
	if c.ep.password == "" {
		return s
	}
	return strings.ReplaceAll(s, c.ep.password, "[redacted]")
}

// ServerError is an answer of ClickHouse other than 200: its status and
// the start of its message.
type ServerError struct {
	Status int
	Msg    string
}

func (e *ServerError) Error() string {
	return fmt.Sprintf("clickhouse: HTTP %d: %s", e.Status, e.Msg)
}
