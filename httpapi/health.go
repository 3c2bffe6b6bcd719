package httpapi

import (
	_ "embed"
	"net/http"
)

//go:embed openapi.json
var openAPIDocument []byte

func (s *Server) healthz(w http.ResponseWriter, _ *request) error {
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok", "version": s.cfg.Version})
	return nil
}

// readyz answers 503 until the database is open and the listeners serve.
func (s *Server) readyz(w http.ResponseWriter, _ *request) error {
	if s.cfg.Ready != nil {
		if err := s.cfg.Ready(); err != nil {
			return &Error{Status: http.StatusServiceUnavailable, Code: "not_ready", Message: "not ready: " + err.Error()}
		}
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ready"})
	return nil
}

func (s *Server) metrics(w http.ResponseWriter, r *request) error {
	s.cfg.Metrics.Handler().ServeHTTP(w, r.Request)
	return nil
}

func (s *Server) openAPI(w http.ResponseWriter, _ *request) error {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "public, max-age=300")
	_, _ = w.Write(openAPIDocument)
	return nil
}
