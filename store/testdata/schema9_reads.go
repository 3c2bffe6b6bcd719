//go:build ignore

// Command schema9_reads writes schema9-records.db.gz, the older file of the
// migration to schema 10 (TestSchema9Migration), and schema9-reads.json.gz,
// what the code of schema 9 answered on it. Run it in a checkout of the
// code of schema 9 (e3d4822), so that both are what that code wrote and
// read:
//
//	git worktree add /tmp/old e3d4822
//	cp store/testdata/schema9_reads.go /tmp/old/store/testdata/
//	cp store/storetest/reads.go /tmp/old/store/storetest/
//	(cd /tmp/old && go run store/testdata/schema9_reads.go -out /tmp/schema9)
//	gzip -9 -c /tmp/schema9/schema9-records.db > store/testdata/schema9-records.db.gz
//	gzip -9 -c /tmp/schema9/schema9-reads.json > store/testdata/schema9-reads.json.gz
//
// The file is schema8-records.db.gz opened (so migrated to 9) and sealed
// as schema 9 seals: the days of 3 to 5 November in blocks (the report of
// 20,000 records among them), the later days still in rows, so that the
// new code meets both forms of schema 9.
package main

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"flag"
	"io"
	"log"
	"os"
	"path/filepath"
	"time"

	"github.com/dmarcd/dmarcd/store"
	"github.com/dmarcd/dmarcd/store/storetest"
)

func main() {
	out := flag.String("out", "schema9", "folder to write the two files into (made if missing)")
	flag.Parse()
	if err := os.MkdirAll(*out, 0o755); err != nil {
		log.Fatal(err)
	}
	path := filepath.Join(*out, "schema9-records.db")
	gz, err := os.ReadFile("store/testdata/schema8-records.db.gz")
	if err != nil {
		log.Fatal(err)
	}
	zr, err := gzip.NewReader(bytes.NewReader(gz))
	if err != nil {
		log.Fatal(err)
	}
	raw, err := io.ReadAll(zr)
	if err != nil {
		log.Fatal(err)
	}
	if err := os.WriteFile(path, raw, 0o600); err != nil {
		log.Fatal(err)
	}
	db, err := store.Open(path, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	if store.SchemaVersion != 9 {
		log.Fatalf("schema %d: run this in a checkout of schema 9", store.SchemaVersion)
	}
	// At 7 November 00:00 the days up to the 5th are closed.
	now := time.Date(2026, 11, 7, 0, 0, 0, 0, time.UTC)
	st, err := db.SealRecords(context.Background(), store.SealOptions{Now: now})
	if err != nil {
		log.Fatal(err)
	}
	log.Printf("sealed %+v", st)
	reads, err := storetest.Reads(db)
	if err != nil {
		log.Fatal(err)
	}
	b, err := json.Marshal(reads)
	if err != nil {
		log.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(*out, "schema9-reads.json"), b, 0o644); err != nil {
		log.Fatal(err)
	}
}
