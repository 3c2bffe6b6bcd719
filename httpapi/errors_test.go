package httpapi

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/dmarcd/dmarcd/store"
)

// TestRangeErrorNamesTheAPIParameters ensures a date range the store
// refuses reaches the client as the API has always said it, naming the
// API's own parameters (the store's message names none), and the other
// range error with the store's words.
func TestRangeErrorNamesTheAPIParameters(t *testing.T) {
	e := apiError(fmt.Errorf("domain statistics: %w", store.ErrRangeReversed))
	if e.Status != http.StatusUnprocessableEntity || e.Code != "validation_failed" || e.Message != "date_to is before date_from" {
		t.Errorf("reversed range: %d %s %q", e.Status, e.Code, e.Message)
	}
	e = apiError(store.ErrRangeTooLong)
	if e.Status != http.StatusUnprocessableEntity || e.Code != "validation_failed" || e.Message != "date range is longer than 366 days" {
		t.Errorf("long range: %d %s %q", e.Status, e.Code, e.Message)
	}
}
