package admin

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"testing"

	"github.com/dmarcd/dmarcd/store"
	"github.com/dmarcd/dmarcd/store/storetest"
)

// serveSocket serves a Local over a real Unix socket and returns a client.
func serveSocket(t *testing.T) (*store.DB, *Client, string) {
	t.Helper()
	db := storetest.Open(t)
	c, path := serveLocal(t, &Local{DB: db})
	return db, c, path
}

// serveLocal serves l over a real Unix socket and returns a client and
// the socket's path.
func serveLocal(t *testing.T, l *Local) (*Client, string) {
	t.Helper()
	c := serveHandler(t, Handler(l, slog.New(slog.DiscardHandler)))
	return c, c.path
}

// TestSocketIsPrivate ensures the socket is mode 0600, a second server is
// refused, and a stale socket file is replaced.
func TestSocketIsPrivate(t *testing.T) {
	_, _, path := serveSocket(t)
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("socket mode %v, want 0600", fi.Mode().Perm())
	}
	if _, err := Listen(path); err == nil {
		t.Error("a second Listen on a live socket succeeded")
	}
	stale := filepath.Join(t.TempDir(), "stale.sock")
	ln, err := net.Listen("unix", stale)
	if err != nil {
		t.Fatal(err)
	}
	ln.(*net.UnixListener).SetUnlinkOnClose(false)
	ln.Close() // leaves the file, as a crashed server does
	ln2, err := Listen(stale)
	if err != nil {
		t.Fatalf("stale socket not replaced: %v", err)
	}
	ln2.Close()
	if _, err := Dial(context.Background(), filepath.Join(t.TempDir(), "none.sock")); err == nil {
		t.Error("Dial succeeded with no server")
	}
}

// TestClientMatchesLocal ensures every operation works over the socket and
// errors keep their kind, so the CLI reports them alike either way.
func TestClientMatchesLocal(t *testing.T) {
	db, c, _ := serveSocket(t)
	ctx := context.Background()
	org, err := c.CreateOrganization(ctx, "acme corp/eu", store.PlanStarter)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateOrganization(ctx, "ACME corp/eu", store.PlanStarter); !errors.Is(err, store.ErrConflict) {
		t.Errorf("duplicate org over the socket: %v", err)
	}
	if org, err = c.SetOrganizationPlan(ctx, "acme corp/eu", store.PlanBusiness); err != nil || org.Plan != store.PlanBusiness {
		t.Fatalf("set plan: %v %v", org, err)
	}
	key, secret, err := c.CreateAPIKey(ctx, org.ID, "ci", store.ScopeRead)
	if err != nil || key.Scope != store.ScopeRead || len(secret) != 36 {
		t.Fatalf("create key: %v %q %v", key, secret, err)
	}
	if _, _, err := db.Authenticate(secret); err != nil {
		t.Fatalf("key made over the socket does not authenticate: %v", err)
	}
	for i := 0; i < 4; i++ {
		if _, _, err := c.CreateAPIKey(ctx, org.Name, "more", store.ScopeFull); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, err := c.CreateAPIKey(ctx, org.Name, "sixth", store.ScopeFull); !errors.Is(err, store.ErrLimit) {
		t.Errorf("6th key: %v, want ErrLimit", err)
	}
	if _, err := c.ListAPIKeys(ctx, "nobody"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("unknown org: %v, want ErrNotFound", err)
	}
	if _, err := c.RevokeAPIKey(ctx, key.ID); err != nil {
		t.Fatal(err)
	}
	if _, _, err := db.Authenticate(secret); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("revoked over the socket but still valid: %v", err)
	}
	keys, err := c.ListAPIKeys(ctx, org.ID)
	if err != nil || len(keys) != 5 {
		t.Fatalf("list: %d keys, %v", len(keys), err)
	}
	orgs, err := c.ListOrganizations(ctx)
	if err != nil || len(orgs) != 1 {
		t.Fatalf("orgs: %v %v", orgs, err)
	}

	var buf bytes.Buffer
	if _, err := c.Backup(ctx, &buf); err != nil {
		t.Fatal(err)
	}
	copyPath := filepath.Join(t.TempDir(), "copy.db")
	os.WriteFile(copyPath, buf.Bytes(), 0o600)
	if err := store.VerifyFile(copyPath); err != nil {
		t.Fatalf("backup over the socket is not a sound database: %v", err)
	}
}
