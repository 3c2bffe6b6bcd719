package web_test

import (
	"strings"
	"testing"

	"github.com/dmarcd/dmarcd/alert"
	"github.com/dmarcd/dmarcd/store"
	"github.com/dmarcd/dmarcd/store/storetest"
)

// stageCell returns the overview's stage cell of the domain named name.
func stageCell(t *testing.T, body, name string) string {
	t.Helper()
	i := strings.Index(body, ">"+name+"<")
	if i < 0 {
		t.Fatalf("overview lacks %s", name)
	}
	j := strings.Index(body[i:], `data-label="Stage"`)
	if j < 0 {
		t.Fatalf("overview row of %s lacks a stage cell", name)
	}
	cell := body[i+j:]
	return cell[:strings.Index(cell, "</td>")]
}

// TestOverviewStoredStage ensures the overview shows the stage the
// sender-watch job stored (no advice computed for it), computes one only
// for a domain the job has not evaluated, and prefers a stage the domain
// page has just computed.
func TestOverviewStoredStage(t *testing.T) {
	e := newEnv(t)
	cookie := e.signIn(e.fullA)
	fresh := storetest.MustDomain(t, e.db, e.orgA.ID, "fresh.example")
	// Not what an advice of a domain without reports or record says.
	_, err := e.db.RecordSenderCheck(store.SenderCheck{DomainID: e.domA.ID,
		Next: alert.SenderState{Stage: alert.StageReadyForReject}})
	if err != nil {
		t.Fatal(err)
	}
	p := e.send("GET", "/", cookie, nil)
	if got := stageCell(t, p.body, "alpha.example"); !strings.Contains(got, "ready for reject") {
		t.Errorf("stored stage not shown: %s", got)
	}
	got := stageCell(t, p.body, "fresh.example")
	if strings.Contains(got, "ready for reject") || !strings.Contains(got, "/domains/"+fresh.ID) {
		t.Errorf("domain never evaluated: %s, want a computed stage", got)
	}
	// The domain page computes the stage from the data; the overview then
	// shows that one.
	if p := e.send("GET", "/domains/"+e.domA.ID, cookie, nil); p.status != 200 {
		t.Fatalf("domain page: %d", p.status)
	}
	p = e.send("GET", "/", cookie, nil)
	if got := stageCell(t, p.body, "alpha.example"); strings.Contains(got, "ready for reject") || !strings.Contains(got, "stage") {
		t.Errorf("after the domain page: %s, want its computed stage", got)
	}
}
