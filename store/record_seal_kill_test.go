package store_test

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dmarcd/dmarcd/store"
	"github.com/dmarcd/dmarcd/store/storetest"
)

// killRecord is record j of the kill test's report i.
func killRecord(i, j int) *store.Record {
	r := testRecord(j)
	r.Count = int64((i*31+j)%1000 + 1)
	r.HeaderFrom = fmt.Sprintf("h%d.example.com", i)
	return r
}

// killRecords is how many records the kill test's report i has.
func killRecords(i int) int { return 1 + (i*7919)%3000 }

// TestSealKillChild is the child of TestSealKilled: with
// DMARCD_SEAL_KILL_DB set it ingests reports and seals them, forever,
// until it is killed.
func TestSealKillChild(t *testing.T) {
	path := os.Getenv("DMARCD_SEAL_KILL_DB")
	if path == "" {
		t.Skip("the child of TestSealKilled")
	}
	db, err := store.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	dom, err := db.AllDomains()
	if err != nil || len(dom) != 1 {
		t.Fatal(err)
	}
	next, _ := strconv.Atoi(os.Getenv("DMARCD_SEAL_KILL_NEXT"))
	ing := db.NewIngester()
	for batch := 0; ; batch++ {
		var b store.IngestBatch
		for range 5 {
			i := next
			next++
			d := mustDraft(t, db, dom[0], fmt.Sprint("k-", i), reportDay(1+i%6), 0)
			for j := range killRecords(i) {
				d.Add(killRecord(i, j))
			}
			d.Finish()
			b.Reports = append(b.Reports, d)
		}
		if _, err := ing.Commit(&b); err != nil {
			t.Fatal(err)
		}
		if batch%4 == 3 {
			if _, err := db.SealRecords(context.Background(), store.SealOptions{All: true}); err != nil {
				t.Fatal(err)
			}
			fmt.Println("sealed")
		}
	}
}

// TestSealKilled ensures sealing interrupted by kill -9 at random points
// loses nothing and doubles nothing: a child process ingests and seals
// reports until it is killed, several times over one file; after each
// kill the file checks clean (tx.Check), every stored report has each of
// its records exactly once (in rows or in a block) and reads back exactly
// what was ingested, and sealing the rest changes no read.
func TestSealKilled(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns processes")
	}
	path := filepath.Join(t.TempDir(), "dmarcd.db")
	db, err := store.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	org := storetest.MustOrganization(t, db, "acme", store.PlanUnlimited)
	storetest.MustDomain(t, db, org.ID, "example.com")
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 25))
	next := 0
	var sealedSeen bool
	for round := range 6 {
		cmd := exec.Command(os.Args[0], "-test.run=^TestSealKillChild$", "-test.count=1")
		cmd.Env = append(os.Environ(), "DMARCD_SEAL_KILL_DB="+path, "DMARCD_SEAL_KILL_NEXT="+strconv.Itoa(next))
		var out strings.Builder
		cmd.Stderr = &out
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		// Once the child has sealed once (however slow the machine), kill
		// it at a random point of what follows: commits and sealing.
		sealedOnce := make(chan struct{})
		go func() {
			sc := bufio.NewScanner(stdout)
			once := false
			for sc.Scan() {
				if sc.Text() == "sealed" && !once {
					once = true
					close(sealedOnce)
				}
			}
		}()
		select {
		case <-sealedOnce:
		case <-time.After(2 * time.Minute):
			_ = cmd.Process.Kill()
			t.Fatalf("round %d: the child did not seal within 2 minutes\n%s", round, out.String())
		}
		time.Sleep(time.Duration(rng.IntN(1500)) * time.Millisecond)
		_ = cmd.Process.Signal(syscall.SIGKILL)
		if err := cmd.Wait(); err == nil || !strings.Contains(err.Error(), "killed") {
			t.Fatalf("round %d: the child ended on its own: %v\n%s", round, err, out.String())
		}
		db, err := store.Open(path, nil)
		if err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		if _, err := db.DiscardPendingReports(); err != nil {
			t.Fatal(err)
		}
		checkStored(t, db, org.ID)
		_, sealed, _ := store.RecordsStored(db)
		sealedSeen = sealedSeen || len(sealed) > 0
		before := checkKillReports(t, db, org.ID)
		next = max(next, before) + 5
		if round == 5 {
			snap := snapshot(t, db, org.ID)
			if _, err := db.SealRecords(context.Background(), store.SealOptions{All: true}); err != nil {
				t.Fatal(err)
			}
			checkStored(t, db, org.ID)
			n := checkKillReports(t, db, org.ID)
			// All sealed: most values now point to their report tables
			// (checkStored checked they agree); a block whose reports are
			// too few for a table keeps their full form.
			_, total, err := db.ListReports(org.ID, store.ReportFilter{Page: store.Page{Page: 1, Limit: 1}})
			if err != nil {
				t.Fatal(err)
			}
			if f, err := store.CheckReportTables(db); err != nil || f.Full+f.Pointers != total || f.Pointers < total/2 || f.Tables == 0 {
				t.Fatalf("report forms after sealing the rest: %+v, %v; want %d reports, most as pointers (reports up to %d)", f, err, total, n)
			}
			if got := snapshot(t, db, org.ID); !reflect.DeepEqual(got, snap) {
				t.Fatal("reads differ after sealing the rest")
			}
		}
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if !sealedSeen {
		t.Fatal("no round sealed anything: the test proved nothing")
	}
}

// checkKillReports checks each stored report's records against what the
// child ingested and returns one past the highest report number.
func checkKillReports(t *testing.T, db *store.DB, orgID string) int {
	t.Helper()
	reps, _, err := db.ListReports(orgID, store.ReportFilter{Page: store.Page{Page: 1, Limit: 1000}})
	if err != nil {
		t.Fatal(err)
	}
	top := 0
	for _, r := range reps {
		i, err := strconv.Atoi(strings.TrimPrefix(r.ExternalReportID, "k-"))
		if err != nil {
			t.Fatalf("report id %q", r.ExternalReportID)
		}
		top = max(top, i+1)
		j := 0
		err = db.ReportRecords(orgID, r.ID, func(rec *store.Record) error {
			want := killRecord(i, j)
			if rec.Count != want.Count || rec.HeaderFrom != want.HeaderFrom || rec.SourceIP != want.SourceIP {
				return fmt.Errorf("record %d of report %d is %+v, want %+v", j, i, rec, want)
			}
			j++
			return nil
		})
		if err != nil || j != killRecords(i) {
			t.Fatalf("report %d: %d records, %v; want %d", i, j, err, killRecords(i))
		}
	}
	return top
}
