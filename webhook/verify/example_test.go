package verify_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"time"

	"github.com/dmarcd/dmarcd/webhook/verify"
)

// ExampleVerifyRequest shows a receiver's handler: verify first, parse after.
func ExampleVerifyRequest() {
	handle := func(w http.ResponseWriter, r *http.Request) {
		body, err := verify.VerifyRequest(secret, r, 1<<20, time.Now())
		if err != nil {
			http.Error(w, "invalid signature", http.StatusUnauthorized)
			return
		}
		var ev struct {
			ID   string `json:"id"`
			Type string `json:"type"`
		}
		if err := json.Unmarshal(body, &ev); err != nil {
			http.Error(w, "bad body", http.StatusBadRequest)
			return
		}
		fmt.Println("received", ev.Type, ev.ID)
		w.WriteHeader(http.StatusNoContent)
	}

	body := `{"id":"evt_0b5f3c2e-8a4d-4c1e-9f7a-2d6b1e8c4a90","type":"alert.created"}`
	ts := strconv.FormatInt(time.Now().Unix(), 10)
	for _, sig := range []string{sign(secret, ts, []byte(body)), sign("whsec_other", ts, []byte(body))} {
		r := httptest.NewRequest(http.MethodPost, "/dmarc", strings.NewReader(body))
		r.Header.Set("X-Webhook-Timestamp", ts)
		r.Header.Set("X-Webhook-Signature", sig)
		w := httptest.NewRecorder()
		handle(w, r)
		fmt.Println(w.Code)
	}
	// Output:
	// received alert.created evt_0b5f3c2e-8a4d-4c1e-9f7a-2d6b1e8c4a90
	// 204
	// 401
}
