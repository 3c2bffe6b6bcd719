package geo

import (
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/oschwald/maxminddb-golang/v2"
)

const (
	testCity     = "../testdata/geo/GeoIP2-City-Test.mmdb"
	testLiteCity = "../testdata/geo/GeoLite2-City-Test.mmdb"
	testASN      = "../testdata/geo/GeoLite2-ASN-Test.mmdb"
	testBroken   = "../testdata/geo/broken/GeoIP2-City-Test-Broken-Double-Format.mmdb"
)

// install puts a copy of src at dst by rename, the way geoipupdate replaces
// a database, so readers of the old file keep a valid mapping.
func install(t *testing.T, src, dst string) {
	t.Helper()
	data, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	tmp := dst + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, dst); err != nil {
		t.Fatal(err)
	}
}

// lookupLoad runs goroutines that look up continuously until stopped,
// recording the two answers the alternating city files give for
// 149.101.100.0 (GeoIP2-City knows it, GeoLite2-City does not).
type lookupLoad struct {
	d       *DB
	gen     atomic.Int64  // bumped by sync after each reload
	acks    chan struct{} // one per worker per generation
	stop    chan struct{}
	failed  chan struct{} // closed at the first failure
	fail    sync.Once
	wg      sync.WaitGroup
	workers []*lookupWorker
}

type lookupWorker struct {
	sawUS, sawEmpty bool // read only after the worker has returned
	err             string
}

func startLoad(d *DB, n int) *lookupLoad {
	l := &lookupLoad{d: d, acks: make(chan struct{}, n), stop: make(chan struct{}), failed: make(chan struct{})}
	for range n {
		w := &lookupWorker{}
		l.workers = append(l.workers, w)
		l.wg.Go(func() { l.run(w) })
	}
	return l
}

func (l *lookupLoad) run(w *lookupWorker) {
	london, probe := netip.MustParseAddr("81.2.69.142"), netip.MustParseAddr("149.101.100.0")
	acked := int64(-1)
	for {
		select {
		case <-l.stop:
			return
		default:
		}
		gen := l.gen.Load()
		if w.err = w.check(l.d, london, probe); w.err != "" {
			l.fail.Do(func() { close(l.failed) })
			return
		}
		if gen > acked {
			acked = gen
			l.acks <- struct{}{}
		}
		// Yield so all workers and the reloading goroutine interleave
		// finely on few cores instead of in 10ms preemption slices.
		runtime.Gosched()
	}
}

// sync returns once every worker has run a whole round of lookups that
// began after the call, so against the databases current at the call.
func (l *lookupLoad) sync() {
	l.gen.Add(1)
	for range l.workers {
		select {
		case <-l.acks:
		case <-l.failed:
			return
		}
	}
}

// finish stops the workers and waits for them, taking any last acks so
// none blocks on a send.
func (l *lookupLoad) finish() {
	close(l.stop)
	done := make(chan struct{})
	go func() { l.wg.Wait(); close(done) }()
	for {
		select {
		case <-done:
			return
		case <-l.acks:
		}
	}
}

func (w *lookupWorker) check(d *DB, london, probe netip.Addr) string {
	info, err := d.LookupErr(london)
	switch {
	case err != nil:
		return "lookup error: " + err.Error()
	case info == nil || info.City == nil || *info.City != "London":
		return "81.2.69.142 is not London"
	}
	info, err = d.LookupErr(probe)
	switch {
	case err != nil:
		return "lookup error: " + err.Error()
	case info == nil || info.ASN == nil || *info.ASN != 6167:
		return "149.101.100.0 lost its ASN"
	case info.CountryCode == nil:
		w.sawEmpty = true
	case *info.CountryCode == "US":
		w.sawUS = true
	default:
		return "149.101.100.0 has country " + *info.CountryCode
	}
	return ""
}

// TestReloadUnderLoad ensures Reload swaps files while 8 goroutines look up
// continuously: no lookup fails or reads a closed file, each sees the new
// data, failed reloads keep the old files serving, and every retired set of
// files is closed in the end.
func TestReloadUnderLoad(t *testing.T) {
	dir := t.TempDir()
	cityPath, asnPath := filepath.Join(dir, "city.mmdb"), filepath.Join(dir, "asn.mmdb")
	install(t, testCity, cityPath)
	install(t, testASN, asnPath)
	d, err := Open(Config{CityPath: cityPath, ASNPath: asnPath})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()

	load := startLoad(d, 8)
	var retired []*readerSet
	for i := range 20 {
		load.sync()
		if i%5 == 2 {
			failReload(t, d, cityPath)
			continue
		}
		install(t, []string{testLiteCity, testCity}[i%2], cityPath)
		old := d.cur.Load()
		if err := d.Reload(); err != nil {
			t.Fatalf("Reload %d: %v", i, err)
		}
		retired = append(retired, old)
	}
	load.sync()
	load.finish()

	for i, w := range load.workers {
		if w.err != "" {
			t.Errorf("worker %d: %s", i, w.err)
		} else if !w.sawUS || !w.sawEmpty {
			t.Errorf("worker %d did not see both databases (US %v, empty %v)", i, w.sawUS, w.sawEmpty)
		}
	}
	for i, s := range retired {
		if n := s.refs.Load(); n != 0 {
			t.Errorf("retired set %d still has %d references", i, n)
		}
	}
	if got := d.Description(); !strings.Contains(got, "GeoIP2-City") {
		t.Errorf("Description() = %q after the last reload of GeoIP2-City", got)
	}
}

// failReload replaces the city file with unusable ones and checks that
// Reload reports each, naming the file, and keeps the current set; it then
// restores a good file for the next round.
func failReload(t *testing.T, d *DB, cityPath string) {
	t.Helper()
	current := d.cur.Load()
	for src, want := range map[string]string{
		"../testdata/geo/LICENSE-MIT": "invalid MaxMind DB",
		testASN:                       "swapped",
		testBroken:                    "corrupt",
	} {
		install(t, src, cityPath)
		err := d.Reload()
		if err == nil || !strings.Contains(err.Error(), cityPath) || !strings.Contains(err.Error(), want) {
			t.Errorf("Reload of %s = %v, want an error naming %s and %q", src, err, cityPath, want)
		}
		if d.cur.Load() != current {
			t.Error("failed Reload replaced the databases")
		}
	}
	install(t, testCity, cityPath)
}

// TestCloseWithLookupInFlight ensures Close and Reload leave files open for
// a lookup still using them and close them when it finishes.
func TestCloseWithLookupInFlight(t *testing.T) {
	for _, op := range []string{"Close", "Reload"} {
		t.Run(op, func(t *testing.T) {
			d, err := Open(Config{CityPath: testCity})
			if err != nil {
				t.Fatal(err)
			}
			defer d.Close()
			inFlight := d.acquire()
			if op == "Close" {
				err = d.Close()
			} else {
				err = d.Reload()
			}
			if err != nil {
				t.Fatalf("%s: %v", op, err)
			}
			london := netip.MustParseAddr("81.2.69.142")
			if info, err := inFlight.lookup(london); err != nil || info.City == nil {
				t.Fatalf("lookup in flight after %s = %v, %v; want London", op, info, err)
			}
			if err := inFlight.release(); err != nil {
				t.Fatalf("release: %v", err)
			}
			if inFlight.acquire() {
				t.Error("a released, retired set can still be acquired")
			}
			var rec locationRecord
			if err := inFlight.city.reader.Lookup(london).Decode(&rec); err == nil {
				t.Error("the retired file is still open after its last lookup")
			}
		})
	}
}

// TestLookupCorruptRecord ensures a record that fails to decode gives null
// fields and an error naming the file and address, while the other database
// still answers.
func TestLookupCorruptRecord(t *testing.T) {
	set := &readerSet{city: rawSource(t, slotCity, testBroken), asn: rawSource(t, slotASN, testASN)}
	set.refs.Store(1)
	d := &DB{}
	d.cur.Store(set)
	defer d.Close()

	ip := netip.MustParseAddr("89.160.20.112")
	info, err := d.LookupErr(ip)
	if err == nil {
		t.Fatal("LookupErr of a corrupt record: no error")
	}
	for _, frag := range []string{"geo: city database", testBroken, "89.160.20.112", "float 64"} {
		if !strings.Contains(err.Error(), frag) {
			t.Errorf("error %q lacks %q", err, frag)
		}
	}
	want := Info{ASN: info.ASN, ASOrg: info.ASOrg}
	if *info != want || info.ASN == nil || *info.ASN != 29518 || info.ASOrg == nil || *info.ASOrg != "Bredband2 AB" {
		t.Errorf("LookupErr = %+v, want only AS29518 Bredband2 AB", *info)
	}
	if got := d.Lookup(ip); got == nil || *got != (Info{ASN: got.ASN, ASOrg: got.ASOrg}) || got.ASN == nil {
		t.Errorf("Lookup = %+v, want only the AS fields", got)
	}
}

// rawSource opens a file without Open's checks, to reach states Open refuses.
func rawSource(t *testing.T, slot, path string) *source {
	t.Helper()
	r, err := maxminddb.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	return &source{slot: slot, path: path, reader: r}
}

// TestSlotOf ensures database types are put in the right slot, including
// third-party names, and unknown types are refused.
func TestSlotOf(t *testing.T) {
	tests := map[string]string{
		"GeoIP2-City":                         slotCity,
		"GeoLite2-City":                       slotCity,
		"GeoIP2-Country":                      slotCity,
		"GeoLite2-Country":                    slotCity,
		"GeoIP2-Enterprise":                   slotCity,
		"DBIP-City-Lite":                      slotCity,
		"DBIP-Country-Lite":                   slotCity,
		"GeoLite2-ASN":                        slotASN,
		"GeoIP2-ISP":                          slotASN,
		"DBIP-ASN-Lite (compat=GeoLite2-ASN)": slotASN,
		"GeoIP2-Anonymous-IP":                 "",
		"GeoIP2-Domain":                       "",
		"GeoIP2-Connection-Type":              "",
		"Cityscape":                           "",
		"":                                    "",
	}
	for dbType, want := range tests {
		if got := slotOf(dbType); got != want {
			t.Errorf("slotOf(%q) = %q, want %q", dbType, got, want)
		}
	}
}
