package httpapi_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/dmarcd/dmarcd/httpapi"
	"github.com/dmarcd/dmarcd/store/storetest"
	"github.com/dmarcd/dmarcd/web"
)

// TestTLSRPTPathsOutsideTheRouteAreJSON ensures a POST to /tlsrpt/ or
// /tlsrpt/a/b (no route: the local part is one path segment) is the API's
// JSON 404, not the web interface's redirect to its sign-in page (issue 24
// item 12), with the web interface mounted as serve mounts it.
func TestTLSRPTPathsOutsideTheRouteAreJSON(t *testing.T) {
	db := storetest.Open(t)
	api := httpapi.New(httpapi.Config{Store: db})
	ui, err := web.New(web.Config{Store: db})
	if err != nil {
		t.Fatal(err)
	}
	// Side by side on one mux, as serve mounts them.
	mux := http.NewServeMux()
	mux.Handle("/", api.Observe("ui", ui))
	for _, p := range api.Paths() {
		mux.Handle(p, api)
	}
	srv := httptest.NewServer(mux)
	defer srv.Close()
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	for _, path := range []string{"/tlsrpt", "/tlsrpt/", "/tlsrpt/a/b", "/tlsrpt/a/b/"} {
		for _, method := range []string{"POST", "GET"} {
			req, _ := http.NewRequest(method, srv.URL+path, strings.NewReader("{}"))
			req.Header.Set("Content-Type", "application/tlsrpt+json")
			res, err := client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			var body struct {
				Error struct {
					Code, Message string
					Details       []any
				}
			}
			err = json.NewDecoder(res.Body).Decode(&body)
			res.Body.Close()
			if res.StatusCode != http.StatusNotFound || err != nil || body.Error.Code != "not_found" || body.Error.Details == nil {
				t.Errorf("%s %s: %d %s, body %+v (%v)", method, path, res.StatusCode, res.Header.Get("Location"), body, err)
			}
		}
	}
	// The web interface still serves its own paths.
	res, err := client.Get(srv.URL + "/login")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusOK || !strings.HasPrefix(res.Header.Get("Content-Type"), "text/html") {
		t.Errorf("GET /login: %d %s", res.StatusCode, res.Header.Get("Content-Type"))
	}
}
