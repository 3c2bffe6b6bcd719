package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"sync"
)

// maxBodyBytes is the largest request body accepted (API.md: 1 MiB).
const maxBodyBytes = 1 << 20

// writeJSON encodes v before writing the header, so an encoding failure can
// still become a 500 instead of a half-written 200.
func writeJSON(w http.ResponseWriter, status int, v any) {
	buf := getBuf()
	defer putBuf(buf)
	if err := json.NewEncoder(buf).Encode(v); err != nil {
		status = http.StatusInternalServerError
		buf.Reset()
		buf.WriteString(`{"error":{"code":"internal","message":"internal error (response encoding)","details":[]}}` + "\n")
	}
	writeBody(w, status, buf.Bytes())
}

// writeBody writes an encoded JSON body.
func writeBody(w http.ResponseWriter, status int, body []byte) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// decodeJSON reads a JSON object body into dst: a JSON content type (or
// none), at most maxBodyBytes, no unknown fields, nothing after the object.
func decodeJSON(w http.ResponseWriter, r *request, dst any) error {
	if ct := r.Header.Get("Content-Type"); ct != "" {
		mt, _, err := mime.ParseMediaType(ct)
		if err != nil || !(mt == "application/json" || strings.HasSuffix(mt, "+json")) {
			return &Error{Status: http.StatusUnsupportedMediaType, Code: "unsupported_media_type",
				Message: fmt.Sprintf("Content-Type %q is not supported; send application/json", ct)}
		}
	}
	body := http.MaxBytesReader(w, r.Body, maxBodyBytes)
	dec := json.NewDecoder(body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(dst); err != nil {
		return jsonError(err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return jsonError(err)
		}
		return errBadRequest("request body must hold a single JSON object")
	}
	return nil
}

// jsonError explains a decoding failure in the client's terms.
func jsonError(err error) error {
	var (
		syntax *json.SyntaxError
		typ    *json.UnmarshalTypeError
		mbe    *http.MaxBytesError
	)
	switch {
	case errors.As(err, &mbe):
		return &Error{Status: http.StatusRequestEntityTooLarge, Code: "payload_too_large",
			Message: fmt.Sprintf("request body is larger than %d bytes", maxBodyBytes)}
	case errors.Is(err, io.EOF):
		return errBadRequest("request body is empty; send a JSON object")
	case errors.Is(err, io.ErrUnexpectedEOF):
		return errBadRequest("request body is truncated JSON")
	case errors.As(err, &syntax):
		return errBadRequest(fmt.Sprintf("request body is not valid JSON (at byte %d)", syntax.Offset))
	case errors.As(err, &typ):
		if typ.Field == "" {
			return errBadRequest("request body must be a JSON object")
		}
		return errBadRequest(fmt.Sprintf("field %s must be of type %s", typ.Field, jsonType(typ.Type.String())),
			FieldError{Field: typ.Field, Message: "must be of type " + jsonType(typ.Type.String())})
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		field := strings.Trim(strings.TrimPrefix(err.Error(), "json: unknown field "), `"`)
		return errBadRequest(fmt.Sprintf("unknown field %q", field), FieldError{Field: field, Message: "unknown field"})
	}
	return errBadRequest("request body could not be decoded: " + err.Error())
}

func jsonType(goType string) string {
	switch strings.TrimPrefix(goType, "*") {
	case "string":
		return "string"
	case "bool":
		return "boolean"
	case "int", "int64", "float64":
		return "number"
	}
	return "object"
}

// page is a validated page/limit pair.
type page struct{ Page, Limit int }

// pagination is the metadata of every list response (API.md).
type pagination struct {
	Page       int `json:"page"`
	Limit      int `json:"limit"`
	Total      int `json:"total"`
	TotalPages int `json:"total_pages"`
}

type listBody struct {
	Data       any        `json:"data"`
	Pagination pagination `json:"pagination"`
}

func (p page) of(total int) pagination {
	return pagination{Page: p.Page, Limit: p.Limit, Total: total, TotalPages: (total + p.Limit - 1) / p.Limit}
}

// parsePage reads page (default 1, >= 1) and limit (default 20, 1..100).
func parsePage(r *request) (page, error) {
	q := r.URL.Query()
	p := page{Page: 1, Limit: 20}
	var err error
	if p.Page, err = intParam(q.Get("page"), "page", 1, 1, 1<<31-1); err != nil {
		return p, err
	}
	if p.Limit, err = intParam(q.Get("limit"), "limit", 20, 1, 100); err != nil {
		return p, err
	}
	return p, nil
}

func intParam(v, name string, def, min, max int) (int, error) {
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < min || n > max {
		msg := fmt.Sprintf("must be an integer from %d to %d", min, max)
		if max == 1<<31-1 {
			msg = fmt.Sprintf("must be an integer >= %d", min)
		}
		return 0, errBadRequest(fmt.Sprintf("query parameter %s %s", name, msg), FieldError{Field: name, Message: msg})
	}
	return n, nil
}

// bufPool recycles response buffers; buffers over 64 KiB are not kept, so
// one large response does not pin its memory.
var bufPool sync.Pool

func getBuf() *bytes.Buffer {
	if b, ok := bufPool.Get().(*bytes.Buffer); ok {
		b.Reset()
		return b
	}
	return new(bytes.Buffer)
}

func putBuf(b *bytes.Buffer) {
	if b.Cap() <= 64<<10 {
		bufPool.Put(b)
	}
}
