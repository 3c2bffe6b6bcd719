package cli

import (
	"context"
	"log/slog"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/dmarcd/dmarcd/admin"
	"github.com/dmarcd/dmarcd/app"
)

// linkLine finds the one-time link printed on a line of its own.
var linkLine = regexp.MustCompile(`(?m)^(https?://[^\s/]+)/invite/([A-Za-z0-9_-]{43})$`)

// TestUserCommandsOffline runs 'dmarcd user add|list|role|reset|remove'
// on the file with no server, and uses the printed links.
func TestUserCommandsOffline(t *testing.T) {
	dir := newDataDir(t) // organization acme
	dd := "--data-dir=" + dir
	code, out, errOut := run(t, nil, dd, "user", "add", "Owner@Example.com", "--org", "acme", "--role", "owner")
	m := linkLine.FindStringSubmatch(out)
	if code != 0 || m == nil || m[1] != "http://127.0.0.1:8080" || !strings.Contains(out, "owner@example.com") {
		t.Fatalf("user add: exit %d\n%s%s", code, out, errOut)
	}
	ownerLink := m[2]
	code, out, _ = run(t, nil, dd, "user", "add", "viewer@example.com", "--public-url", "https://dmarc.example.net/")
	if m := linkLine.FindStringSubmatch(out); code != 0 || m == nil || m[1] != "https://dmarc.example.net" {
		t.Fatalf("user add --public-url (the only organization): exit %d\n%s", code, out)
	}
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"user", "add", "x@example.com", "--role", "boss"}, 2, "--role must be owner, admin or viewer"},
		{[]string{"user", "add", "not-an-address", "--role", "viewer"}, 1, "email"},
		{[]string{"user", "add", "viewer@example.com"}, 1, "member already"},
		{[]string{"user", "add", "x@example.com", "--org", "nobody"}, 1, "no organization nobody"},
		{[]string{"user", "role", "owner@example.com", "viewer"}, 1, "at least one owner"},
		{[]string{"user", "remove", "owner@example.com"}, 1, "at least one owner"},
		{[]string{"user", "remove", "ghost@example.com"}, 1, "no member ghost@example.com"},
		{[]string{"user", "role", "viewer@example.com", "king"}, 2, "owner, admin or viewer"},
	} {
		code, out, errOut := run(t, nil, append([]string{dd}, c.args...)...)
		if code != c.code || !strings.Contains(errOut, c.want) {
			t.Errorf("dmarcd %s: exit %d, want %d with %q\n%s%s", strings.Join(c.args, " "), code, c.code, c.want, out, errOut)
		}
	}
	if code, out, _ := run(t, nil, dd, "user", "role", "viewer@example.com", "admin"); code != 0 || !strings.Contains(out, "viewer@example.com is now admin") {
		t.Errorf("user role: %d %s", code, out)
	}
	code, out, _ = run(t, nil, dd, "user", "reset", "viewer@example.com")
	resetM := linkLine.FindStringSubmatch(out)
	if code != 0 || resetM == nil {
		t.Fatalf("user reset: %d %s", code, out)
	}
	code, out, _ = run(t, nil, dd, "user", "list")
	if code != 0 || !strings.Contains(out, "owner@example.com") || !regexp.MustCompile(`viewer@example.com\s+admin\s+acme\s+invited`).MatchString(out) {
		t.Errorf("user list:\n%s", out)
	}
	// The links work, once, on the file the commands wrote.
	db, err := (&globalOptions{DataDir: dir}).openStore(false)
	if err != nil {
		t.Fatal(err)
	}
	a := app.New(app.Config{Store: db})
	if _, actor, err := a.AcceptInvitation("192.0.2.1", ownerLink, "a long password"); err != nil || actor.Role() != app.RoleOwner {
		t.Errorf("the owner's link: %v %v", err, actor.Role())
	}
	if _, _, err := a.AcceptInvitation("192.0.2.1", ownerLink, "a long password"); app.KindOf(err) != app.NotFound {
		t.Errorf("the owner's link again: %v", err)
	}
	if v, err := a.Invitation(resetM[2]); err != nil || !v.Reset {
		t.Errorf("the reset link: %+v %v", v, err)
	}
	db.Close()
	if code, out, _ := run(t, nil, dd, "user", "remove", "viewer@example.com", "--org", "acme"); code != 0 || !strings.Contains(out, "Removed viewer@example.com") {
		t.Errorf("user remove: %d %s", code, out)
	}
	if code, out, _ := run(t, nil, dd, "--json", "user", "list", "--org", "acme"); code != 0 || strings.Contains(out, "viewer@") || !strings.Contains(out, `"role": "owner"`) && !strings.Contains(out, `"role":"owner"`) {
		t.Errorf("user list after remove:\n%s", out)
	}
}

// TestUserCommandsThroughSocket runs 'dmarcd user' against a running
// server's admin socket: the link starts with the server's URL.
func TestUserCommandsThroughSocket(t *testing.T) {
	dataDir := newDataDir(t)
	g := &globalOptions{DataDir: dataDir}
	db, err := g.openStore(false)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	a := app.New(app.Config{Store: db})
	ln, err := admin.Listen(g.socketPath())
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: admin.Handler(&admin.Local{DB: db, App: a, WebURL: "https://dmarc.example.net"}, slog.New(slog.DiscardHandler))}
	go hs.Serve(ln)
	defer hs.Close()

	dd := "--data-dir=" + dataDir
	code, out, errOut := run(t, nil, dd, "user", "add", "sock@example.com", "--org", "acme", "--role", "owner")
	m := linkLine.FindStringSubmatch(out)
	if code != 0 || m == nil || m[1] != "https://dmarc.example.net" {
		t.Fatalf("add through the socket: exit %d\n%s%s", code, out, errOut)
	}
	if _, _, err := a.AcceptInvitation("192.0.2.1", m[2], "a long password"); err != nil {
		t.Fatalf("the link: %v", err)
	}
	if code, out, _ := run(t, nil, dd, "user", "add", "two@example.com", "--role", "admin"); code != 0 || !linkLine.MatchString(out) {
		t.Fatalf("second add: %d %s", code, out)
	}
	token, _, err := a.SignInPassword("192.0.2.1", "sock@example.com", "a long password", "")
	if err != nil {
		t.Fatal(err)
	}
	if code, _, errOut := run(t, nil, dd, "user", "role", "sock@example.com", "viewer"); code != 1 || !strings.Contains(errOut, "at least one owner") {
		t.Errorf("demote the last owner through the socket: %d %s", code, errOut)
	}
	if code, out, _ := run(t, nil, dd, "user", "reset", "sock@example.com"); code != 0 || !linkLine.MatchString(out) {
		t.Errorf("reset through the socket: %d %s", code, out)
	}
	if _, _, err := a.Session(token); app.KindOf(err) != app.Unauthenticated {
		t.Errorf("the session after a reset through the socket: %v", err)
	}
	if code, out, _ := run(t, nil, dd, "user", "list", "--org", "acme"); code != 0 || !strings.Contains(out, "two@example.com") || !strings.Contains(out, "sock@example.com") {
		t.Errorf("list through the socket:\n%s", out)
	}
	if code, out, _ := run(t, nil, dd, "user", "remove", "two@example.com"); code != 0 || !strings.Contains(out, "Removed") {
		t.Errorf("remove through the socket: %d %s", code, out)
	}
	c, err := admin.Dial(context.Background(), g.socketPath())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if us, err := c.ListUsers(context.Background(), ""); err != nil || len(us) != 1 {
		t.Errorf("ListUsers over the socket: %d %v", len(us), err)
	}
}
