package httpapi

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/julienschmidt/httprouter"
)

// MaxHeaderBytes is the most request header bytes (request line, names and
// values) the API reads; more is 431 with a JSON body. Give http.Server a
// larger MaxHeaderBytes (HTTPServerMaxHeaderBytes), so that this check,
// not net/http's plain-text answer, refuses the usual oversized request.
const MaxHeaderBytes = 64 << 10

// HTTPServerMaxHeaderBytes is the http.Server.MaxHeaderBytes to use with
// this handler: a backstop well above MaxHeaderBytes.
const HTTPServerMaxHeaderBytes = 1 << 20

var errHeadersTooLarge = &Error{Status: http.StatusRequestHeaderFieldsTooLarge, Code: "headers_too_large",
	Message: fmt.Sprintf("request headers are larger than %d bytes; send fewer or shorter headers (cookies?)", MaxHeaderBytes)}

// headerBytes counts a request's header as net/http does, roughly: the
// request line and each "Name: value\r\n".
func headerBytes(r *http.Request) int {
	n := len(r.Method) + len(r.RequestURI) + len(r.Proto) + 4
	for k, vs := range r.Header {
		for _, v := range vs {
			n += len(k) + len(v) + 4
		}
	}
	return n
}

// lowerIDs makes ids case-insensitive (API.md "Dates in queries"): path
// parameters and query parameters named id or *_id are lower-cased, as
// ids are stored. Other parameters keep their case.
func lowerIDs(r *http.Request, p httprouter.Params) {
	for i := range p {
		if p[i].Key == "id" || strings.HasSuffix(p[i].Key, "_id") {
			p[i].Value = strings.ToLower(p[i].Value)
		}
	}
	if !strings.Contains(r.URL.RawQuery, "id=") {
		return
	}
	q := r.URL.Query()
	changed := false
	for k, vs := range q {
		if k != "id" && !strings.HasSuffix(k, "_id") {
			continue
		}
		for i, v := range vs {
			if l := strings.ToLower(v); l != v {
				vs[i], changed = l, true
			}
		}
	}
	if changed {
		r.URL.RawQuery = q.Encode()
	}
}
