package admin

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"time"

	"github.com/dmarcd/dmarcd/ingest"
	"github.com/dmarcd/dmarcd/store"
)

// The socket speaks HTTP/1.1 with JSON bodies. It is not a public API: the
// CLI of the same version is its only client.

// Listen opens the admin socket at path with mode 0600, so only the user
// running the server (and root) can administer it. A socket file left by a
// server that died is replaced; one that still answers is an error.
func Listen(path string) (net.Listener, error) {
	if _, err := os.Lstat(path); err == nil {
		if c, err := net.DialTimeout("unix", path, time.Second); err == nil {
			c.Close()
			return nil, fmt.Errorf("admin: another server already answers on %s", path)
		}
		if err := os.Remove(path); err != nil {
			return nil, fmt.Errorf("admin: removing stale socket: %w", err)
		}
	}
	l, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("admin: %w", err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		l.Close()
		return nil, fmt.Errorf("admin: %w", err)
	}
	return l, nil
}

// Handler serves l, the server's own service, on the admin socket.
func Handler(l *Local, log *slog.Logger) http.Handler {
	h := &handler{svc: l, log: log}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/ping", func(w http.ResponseWriter, _ *http.Request) { reply(w, map[string]bool{"ok": true}) })
	mux.HandleFunc("GET /v1/orgs", h.listOrgs)
	mux.HandleFunc("POST /v1/orgs", h.createOrg)
	mux.HandleFunc("PUT /v1/orgs/{ref}/plan", h.setPlan)
	h.organizationRoutes(mux)
	h.reportRoutes(mux)
	mux.HandleFunc("GET /v1/orgs/{ref}/keys", h.listKeys)
	mux.HandleFunc("POST /v1/orgs/{ref}/keys", h.createKey)
	mux.HandleFunc("POST /v1/keys/{id}/revoke", h.revokeKey)
	mux.HandleFunc("GET /v1/backup", h.backup)
	h.importRoutes(mux)
	h.quarantineRoutes(mux)
	h.mailboxRoutes(mux)
	h.domainRoutes(mux)
	h.mailRoutes(mux)
	h.exportRoutes(mux)
	h.digestRoutes(mux)
	mux.HandleFunc("GET /v1/domains/{domain}/senders", h.senders)
	return mux
}

type handler struct {
	svc *Local
	log *slog.Logger
}

type createOrgRequest struct {
	Name string     `json:"name"`
	Plan store.Plan `json:"plan"`
}

type planRequest struct {
	Plan store.Plan `json:"plan"`
}

type createKeyRequest struct {
	Name  string      `json:"name"`
	Scope store.Scope `json:"scope"`
}

type createKeyResponse struct {
	Key    *store.APIKey `json:"key"`
	Secret string        `json:"secret"`
}

func (h *handler) listOrgs(w http.ResponseWriter, r *http.Request) {
	orgs, err := h.svc.ListOrganizations(r.Context())
	h.answer(w, orgs, err)
}

func (h *handler) createOrg(w http.ResponseWriter, r *http.Request) {
	var in createOrgRequest
	if !h.decode(w, r, &in) {
		return
	}
	org, err := h.svc.CreateOrganization(r.Context(), in.Name, in.Plan)
	h.answer(w, org, err)
}

func (h *handler) setPlan(w http.ResponseWriter, r *http.Request) {
	var in planRequest
	if !h.decode(w, r, &in) {
		return
	}
	org, err := h.svc.SetOrganizationPlan(r.Context(), r.PathValue("ref"), in.Plan)
	h.answer(w, org, err)
}

func (h *handler) listKeys(w http.ResponseWriter, r *http.Request) {
	keys, err := h.svc.ListAPIKeys(r.Context(), r.PathValue("ref"))
	h.answer(w, keys, err)
}

func (h *handler) createKey(w http.ResponseWriter, r *http.Request) {
	var in createKeyRequest
	if !h.decode(w, r, &in) {
		return
	}
	key, secret, err := h.svc.CreateAPIKey(r.Context(), r.PathValue("ref"), in.Name, in.Scope)
	if err == nil {
		h.log.Info("API key created", "key_id", key.ID, "prefix", key.Prefix, "org_id", key.OrgID, "via", "admin socket")
	}
	h.answer(w, createKeyResponse{Key: key, Secret: secret}, err)
}

func (h *handler) revokeKey(w http.ResponseWriter, r *http.Request) {
	key, err := h.svc.RevokeAPIKey(r.Context(), r.PathValue("id"))
	if err == nil {
		h.log.Info("API key revoked", "key_id", key.ID, "prefix", key.Prefix, "via", "admin socket")
	}
	h.answer(w, key, err)
}

// backup streams the copy. A failure after the first byte can only cut the
// stream short, which the client detects by checking the file it wrote.
func (h *handler) backup(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/octet-stream")
	if _, err := h.svc.Backup(r.Context(), w); err != nil {
		h.log.Error("backup over admin socket failed", "error", err)
	}
}

func (h *handler) decode(w http.ResponseWriter, r *http.Request, dst any) bool {
	dec := json.NewDecoder(io.LimitReader(r.Body, 1<<20))
	dec.DisallowUnknownFields()
	if err := dec.Decode(dst); err != nil {
		writeErr(w, &store.Error{Kind: store.ErrInvalid, Msg: "bad request: " + err.Error()})
		return false
	}
	return true
}

func (h *handler) answer(w http.ResponseWriter, v any, err error) {
	if err != nil {
		var se *store.Error
		if !errors.As(err, &se) {
			h.log.Error("admin request failed", "error", err)
		}
		writeErr(w, err)
		return
	}
	reply(w, v)
}

func reply(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

// wireError carries a store error kind across the socket.
type wireError struct {
	Kind    string `json:"kind"`
	Message string `json:"message"`
}

var kinds = map[string]error{
	"not_found": store.ErrNotFound,
	"conflict":  store.ErrConflict,
	"invalid":   store.ErrInvalid,
	"limit":     store.ErrLimit,
}

// ErrServerGone means the server stopped answering on its socket: it was
// stopped or killed, or is shutting down (its pipeline stopped). What was
// acknowledged before is stored; the operation in flight may or may not be.
var ErrServerGone = errors.New("the dmarcd server went away")

func writeErr(w http.ResponseWriter, err error) {
	we, status := wireErrorOf(err)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(we)
}

// wireErrorOf is err as it crosses the socket, with its HTTP status.
func wireErrorOf(err error) (wireError, int) {
	we := wireError{Kind: "internal", Message: err.Error()}
	status := http.StatusInternalServerError
	if errors.Is(err, ingest.ErrStopped) {
		we.Kind, status = "stopping", http.StatusServiceUnavailable
	}
	var se *store.Error
	if errors.As(err, &se) {
		for name, kind := range kinds {
			if errors.Is(err, kind) {
				we.Kind, status = name, http.StatusBadRequest
			}
		}
		we.Message = se.Msg
	}
	return we, status
}

// Client is the Service of a running server, reached over its socket.
type Client struct {
	http *http.Client
	path string
}

var _ Service = (*Client)(nil)

// Dial connects to the admin socket at path and checks that a server
// answers. It fails fast when no server runs.
func Dial(ctx context.Context, path string) (*Client, error) {
	c := &Client{path: path, http: &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", path)
		},
	}}}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	var ok map[string]bool
	if err := c.do(ctx, "GET", "/v1/ping", nil, &ok); err != nil {
		return nil, err
	}
	return c, nil
}

// Close releases idle connections.
func (c *Client) Close() { c.http.CloseIdleConnections() }

func (c *Client) do(ctx context.Context, method, path string, in, out any) error {
	resp, err := c.send(ctx, method, path, in)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	return json.NewDecoder(resp.Body).Decode(out)
}

func (c *Client) send(ctx context.Context, method, path string, in any) (*http.Response, error) {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return nil, err
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, "http://dmarcd"+path, body)
	if err != nil {
		return nil, err
	}
	return c.roundTrip(req)
}

// roundTrip sends req and turns an error answer back into the error the
// server's Service returned, with its store kind.
func (c *Client) roundTrip(req *http.Request) (*http.Response, error) {
	resp, err := c.http.Do(req)
	if err != nil {
		if req.Context().Err() != nil {
			return nil, fmt.Errorf("admin socket %s: %w", c.path, err)
		}
		return nil, fmt.Errorf("admin socket %s: %w: %w", c.path, ErrServerGone, err)
	}
	if resp.StatusCode != http.StatusOK {
		defer resp.Body.Close()
		var we wireError
		if err := json.NewDecoder(resp.Body).Decode(&we); err != nil {
			return nil, fmt.Errorf("admin socket: status %s", resp.Status)
		}
		return nil, we.err()
	}
	return resp, nil
}

// err turns a wire error back into the error the server's Service
// returned, with its store kind.
func (we *wireError) err() error {
	if kind, ok := kinds[we.Kind]; ok {
		return &store.Error{Kind: kind, Msg: we.Message}
	}
	if we.Kind == "stopping" {
		return fmt.Errorf("server: %w: %s", ErrServerGone, we.Message)
	}
	return fmt.Errorf("server: %s", we.Message)
}

// CreateOrganization implements Service.
func (c *Client) CreateOrganization(ctx context.Context, name string, plan store.Plan) (*store.Organization, error) {
	var org store.Organization
	return &org, c.do(ctx, "POST", "/v1/orgs", createOrgRequest{Name: name, Plan: plan}, &org)
}

// ListOrganizations implements Service.
func (c *Client) ListOrganizations(ctx context.Context) ([]*store.Organization, error) {
	var orgs []*store.Organization
	return orgs, c.do(ctx, "GET", "/v1/orgs", nil, &orgs)
}

// SetOrganizationPlan implements Service.
func (c *Client) SetOrganizationPlan(ctx context.Context, orgRef string, plan store.Plan) (*store.Organization, error) {
	var org store.Organization
	return &org, c.do(ctx, "PUT", "/v1/orgs/"+url.PathEscape(orgRef)+"/plan", planRequest{Plan: plan}, &org)
}

// CreateAPIKey implements Service.
func (c *Client) CreateAPIKey(ctx context.Context, orgRef, name string, scope store.Scope) (*store.APIKey, string, error) {
	var out createKeyResponse
	if err := c.do(ctx, "POST", "/v1/orgs/"+url.PathEscape(orgRef)+"/keys", createKeyRequest{Name: name, Scope: scope}, &out); err != nil {
		return nil, "", err
	}
	return out.Key, out.Secret, nil
}

// ListAPIKeys implements Service.
func (c *Client) ListAPIKeys(ctx context.Context, orgRef string) ([]*store.APIKey, error) {
	var keys []*store.APIKey
	return keys, c.do(ctx, "GET", "/v1/orgs/"+url.PathEscape(orgRef)+"/keys", nil, &keys)
}

// RevokeAPIKey implements Service.
func (c *Client) RevokeAPIKey(ctx context.Context, id string) (*store.APIKey, error) {
	var key store.APIKey
	return &key, c.do(ctx, "POST", "/v1/keys/"+url.PathEscape(id)+"/revoke", nil, &key)
}

// Backup implements Service: the server streams its hot copy.
func (c *Client) Backup(ctx context.Context, w io.Writer) (int64, error) {
	resp, err := c.send(ctx, "GET", "/v1/backup", nil)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	return io.Copy(w, resp.Body)
}
