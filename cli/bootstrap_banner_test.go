package cli

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dmarcd/dmarcd/store/storetest"
)

// TestBootstrapNamesTheWebInterface ensures the first-start text names the
// web interface's URL beside the curl example, on a terminal and on a
// pipe: the loopback address for an unspecified --listen, --public-url
// when set (issue 24 item 14).
func TestBootstrapNamesTheWebInterface(t *testing.T) {
	for _, c := range []struct{ listen, public, want string }{
		{"0.0.0.0:8080", "", "Web interface: http://127.0.0.1:8080/"},
		{"127.0.0.1:9090", "https://dmarc.example.net", "Web interface: https://dmarc.example.net/"},
	} {
		db := storetest.Open(t)
		var out bytes.Buffer
		g := &globalOptions{DataDir: t.TempDir(), stdout: &out}
		k, err := bootstrap(db, g, slog.New(slog.DiscardHandler))
		if err != nil {
			t.Fatal(err)
		}
		if out.Len() != 0 {
			t.Errorf("bootstrap printed before the server was up: %q", out.String())
		}
		if err := k.announce(g, c.listen, c.public, false); err != nil {
			t.Fatal(err)
		}
		text := out.String()
		web, try := strings.Index(text, c.want), strings.Index(text, "Try it")
		if web < 0 || try < 0 || web > try {
			t.Errorf("listen %s, public URL %q: want %q before the curl example:\n%s", c.listen, c.public, c.want, text)
		}
		// On a terminal the key itself is shown; the same lines follow.
		out.Reset()
		k.secret, k.file = "dmk_"+strings.Repeat("a", 32), ""
		if err := k.announce(g, c.listen, c.public, true); err != nil {
			t.Fatal(err)
		}
		if text := out.String(); !strings.Contains(text, c.want) || !strings.Contains(text, "sign in with the key") ||
			!strings.Contains(text, " domain add example.com") ||
			!strings.Contains(text, demoDomain) || !strings.Contains(text, "X-API-Key: dmk_") {
			t.Errorf("terminal text:\n%s", text)
		}
	}
	var none *firstKey
	if err := none.announce(&globalOptions{stdout: &bytes.Buffer{}}, "127.0.0.1:1", "", false); err != nil {
		t.Errorf("nothing to announce: %v", err)
	}
}

// syncWriter is one output the server's goroutines and the test share,
// so the order of stdout and log lines is the order they were written.
type syncWriter struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (w *syncWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

func (w *syncWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}

// TestDemoKeyAfterDemo ensures that with --demo the first-start text
// comes after the demo's reports are loaded and the server has started,
// so it is the last thing on the screen, not above the demo's log lines
// (issue 24 item 14).
func TestDemoKeyAfterDemo(t *testing.T) {
	o, err := parseServe(t, "--reporting-domain", "reports.test", "--listen", "127.0.0.1:0", "--smtp-listen", "", "--demo",
		"--dns-server", "127.0.0.1:1", "--dns-timeout", "50ms")
	if err != nil {
		t.Fatal(err)
	}
	var both syncWriter
	g := &globalOptions{DataDir: t.TempDir(), stdout: &both, stderr: &both}
	s, err := newServer(g, o)
	if err != nil {
		t.Fatal(err)
	}
	defer s.close()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.run(ctx) }()
	deadline := time.Now().Add(60 * time.Second)
	for !strings.Contains(both.String(), "Try it") && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	text := both.String()
	loaded, started, banner := strings.Index(text, "--demo: sample reports loaded"), strings.Index(text, "dmarcd started"), strings.Index(text, "this is a new database")
	if loaded < 0 || started < 0 || banner < 0 || banner < loaded || banner < started {
		t.Errorf("demo loaded at %d, started at %d, first-start text at %d; want the text last:\n%s", loaded, started, banner, text)
	}
}

// TestHelpNamesTheWebInterface ensures the root help and serve's help say
// that a web interface is served and where (issue 24 item 14).
func TestHelpNamesTheWebInterface(t *testing.T) {
	for _, args := range [][]string{{"--help"}, {"serve", "--help"}} {
		code, out, _ := run(t, nil, args...)
		if code != 0 || !strings.Contains(out, "web interface") || !strings.Contains(out, "http://127.0.0.1:8080/") {
			t.Errorf("dmarcd %s does not name the web interface and its address:\n%s", strings.Join(args, " "), out)
		}
	}
}
