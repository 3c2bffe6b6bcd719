package web

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/dmarcd/dmarcd/store/storetest"
)

// TestPageTemplatesMadeAtFirstRender: New parses every page (a broken one
// stops the start) but keeps none of them; a page's template set is made
// when it is first shown, once, and the other pages stay without one.
func TestPageTemplatesMadeAtFirstRender(t *testing.T) {
	h, err := New(Config{Store: storetest.Open(t)})
	if err != nil {
		t.Fatal(err)
	}
	if len(h.pages) != len(pageNames) {
		t.Fatalf("%d pages, want %d", len(h.pages), len(pageNames))
	}
	for name, p := range h.pages {
		if p.t != nil {
			t.Fatalf("page %s held before it was shown", name)
		}
	}
	for range 2 {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest("GET", "/login", nil))
		if w.Code != http.StatusOK || !strings.Contains(w.Body.String(), "<form") {
			t.Fatalf("GET /login: %d %.200s", w.Code, w.Body.String())
		}
	}
	first := h.pages["login"].t
	if first == nil {
		t.Fatal("the sign-in page has no template after it was shown")
	}
	if again, err := h.page("login"); err != nil || again != first {
		t.Fatalf("the sign-in page's template made again (%v)", err)
	}
	for name, p := range h.pages {
		if name != "login" && p.t != nil {
			t.Errorf("page %s made by showing the sign-in page", name)
		}
	}
	if _, err := h.page("no such page"); err == nil {
		t.Error("a page that does not exist has a template")
	}
}
