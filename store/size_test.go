package store_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dmarcd/dmarcd/ingest"
	"github.com/dmarcd/dmarcd/internal/reportgen"
	"github.com/dmarcd/dmarcd/store"
)

// TestBucketSizes prints what each bucket costs per record for the shapes
// of issue 25 (reports x records), after ingest, after sealing and after
// compaction. It is a measuring tool, not a test: it runs only with
// DMARCD_SIZE_SHAPES set, e.g. "2000x50,20000x5,1x1000000".
func TestBucketSizes(t *testing.T) {
	shapes := os.Getenv("DMARCD_SIZE_SHAPES")
	if shapes == "" {
		t.Skip("set DMARCD_SIZE_SHAPES=2000x50,20000x5,1x1000000 to measure")
	}
	for _, shape := range strings.Split(shapes, ",") {
		var reps, recs int
		if _, err := fmt.Sscanf(shape, "%dx%d", &reps, &recs); err != nil {
			t.Fatal(err)
		}
		t.Run(shape, func(t *testing.T) { measureShape(t, reps, recs) })
	}
}

func measureShape(t *testing.T, reps, recs int) {
	dir := t.TempDir()
	path := filepath.Join(dir, "dmarcd.db")
	db, err := store.Open(path, &store.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	org, err := db.CreateOrganization("acme", store.PlanUnlimited)
	if err != nil {
		t.Fatal(err)
	}
	dom := &store.Domain{OrgID: org.ID, Name: "example.com", ReportingEmail: "r@reports.example.net"}
	if err := db.CreateDomain(dom); err != nil {
		t.Fatal(err)
	}
	p, err := ingest.New(ingest.Config{Store: db})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = p.Run(ctx) }()
	begin := time.Now().UTC().Truncate(24*time.Hour).AddDate(0, 0, -60)
	for i := range reps {
		raw := reportgen.Generate(int64(i+1), recs, reportgen.Options{Domain: "example.com", Begin: begin.AddDate(0, 0, i*60/reps)})
		if _, err := p.Ingest(ctx, bytes.NewReader(raw), ingest.Arrival{Source: ingest.SourceImport, OrgID: org.ID, Name: strconv.Itoa(i)}); err != nil {
			t.Fatal(err)
		}
	}
	cancel()
	<-done
	total := float64(reps * recs)
	report("ingested", t, db, path, total)
	if _, err := db.SealRecords(context.Background(), store.SealOptions{All: true}); err != nil {
		t.Fatal(err)
	}
	report("sealed", t, db, path, total)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := store.CompactFile(path, time.Second, nil); err != nil {
		t.Fatal(err)
	}
	db, err = store.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = db.Close() }()
	report("compacted", t, db, path, total)
	if keep := os.Getenv("DMARCD_SIZE_KEEP"); keep != "" {
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
		raw, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(keep, fmt.Sprintf("%dx%d.db", reps, recs)), raw, 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

func report(stage string, t *testing.T, db *store.DB, path string, records float64) {
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	sizes, err := store.BucketBytes(db)
	if err != nil {
		t.Fatal(err)
	}
	names := make([]string, 0, len(sizes))
	for n := range sizes {
		names = append(names, n)
	}
	sort.Slice(names, func(i, j int) bool { return sizes[names[i]][0] > sizes[names[j]][0] })
	var b strings.Builder
	alloc := fi.Size()
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		alloc = st.Blocks * 512
	}
	fmt.Fprintf(&b, "%s: file %.1f B/record allocated (%d bytes, size %d)\n", stage, float64(alloc)/records, alloc, fi.Size())
	for _, n := range names {
		if sizes[n][0] == 0 {
			continue
		}
		fmt.Fprintf(&b, "  %-28s alloc %8.2f B/record  in use %8.2f  keys %d\n", n, float64(sizes[n][0])/records, float64(sizes[n][1])/records, sizes[n][2])
	}
	t.Log(b.String())
}
