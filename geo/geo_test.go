package geo_test

import (
	"encoding/json"
	"errors"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/dmarcd/dmarcd/geo"
)

// Test databases: MaxMind-DB test data, see ../testdata/geo/README.md.
const (
	cityDB    = "../testdata/geo/GeoIP2-City-Test.mmdb"
	liteDB    = "../testdata/geo/GeoLite2-City-Test.mmdb"
	countryDB = "../testdata/geo/GeoIP2-Country-Test.mmdb"
	asnDB     = "../testdata/geo/GeoLite2-ASN-Test.mmdb"
	ispDB     = "../testdata/geo/GeoIP2-ISP-Test.mmdb"
	brokenDir = "../testdata/geo/broken/"
)

func str(s string) *string     { return &s }
func num(f float64) *float64   { return &f }
func asn(n uint32) *uint32     { return &n }
func addr(s string) netip.Addr { return netip.MustParseAddr(s) }

// place builds the location part of an expected Info.
func place(cc, country, city string, lat, lon float64) geo.Info {
	info := geo.Info{CountryCode: str(cc), CountryName: str(country), Latitude: num(lat), Longitude: num(lon)}
	if city != "" {
		info.City = str(city)
	}
	return info
}

// withAS adds AS fields to an expected Info; an empty org stays null.
func withAS(info geo.Info, n uint32, org string) geo.Info {
	info.ASN = asn(n)
	if org != "" {
		info.ASOrg = str(org)
	}
	return info
}

func mustOpen(tb testing.TB, cfg geo.Config) *geo.DB {
	tb.Helper()
	db, err := geo.Open(cfg)
	if err != nil {
		tb.Fatalf("Open(%+v): %v", cfg, err)
	}
	tb.Cleanup(func() {
		if err := db.Close(); err != nil {
			tb.Errorf("Close: %v", err)
		}
	})
	return db
}

// show renders an Info for failure messages (pointers would print as addresses).
func show(info *geo.Info) string {
	b, _ := json.Marshal(info)
	return string(b)
}

// TestLookupCanonical ensures the documented lookups of the test databases
// come back field for field, for every kind of database and address.
func TestLookupCanonical(t *testing.T) {
	london := place("GB", "United Kingdom", "London", 51.5142, -0.0931)
	linkoping := place("SE", "Sweden", "Linköping", 58.4167, 15.6167)
	milton := place("US", "United States", "Milton", 47.2513, -122.3149)
	sanDiego := place("US", "United States", "San Diego", 32.7203, -117.1552)
	configs := map[string]geo.Config{
		"city+asn": {CityPath: cityDB, ASNPath: asnDB},
		"lite":     {CityPath: liteDB},
		"country":  {CityPath: countryDB},
		"asn":      {ASNPath: asnDB},
		"isp":      {ASNPath: ispDB},
	}
	tests := []struct {
		config, ip string
		want       geo.Info
	}{
		{"city+asn", "81.2.69.142", london},
		{"city+asn", "89.160.20.112", withAS(linkoping, 29518, "Bredband2 AB")},
		{"city+asn", "216.160.83.56", withAS(milton, 209, "")},
		{"city+asn", "2001:480:10::1", sanDiego},
		{"city+asn", "::ffff:81.2.69.142", london},
		{"city+asn", "2002:5102:458e::1", london}, // 6to4 alias of 81.2.69.142
		{"city+asn", "175.16.199.0", place("CN", "China", "Changchun", 43.88, 125.3228)},
		{"city+asn", "202.196.224.0", place("PH", "Philippines", "", 13, 122)},
		{"city+asn", "214.1.1.0", withAS(geo.Info{}, 721, "DoD Network Information Center")}, // anycast: no country
		{"city+asn", "1.0.0.1", withAS(geo.Info{}, 15169, "Google Inc.")},
		{"city+asn", "10.0.0.1", geo.Info{}},
		{"city+asn", "127.0.0.1", geo.Info{}},
		{"city+asn", "192.0.2.1", geo.Info{}},
		{"city+asn", "2001:db8::1", geo.Info{}},
		{"lite", "2001:480:10::1", sanDiego}, // 2001:480::/43 in this one
		{"lite", "149.101.100.0", geo.Info{}},
		{"lite", "81.2.69.142", london},
		{"country", "81.2.69.142", geo.Info{CountryCode: str("GB"), CountryName: str("United Kingdom")}},
		{"country", "50.114.0.1", geo.Info{CountryCode: str("US"), CountryName: str("United States")}},
		{"country", "2001:218::1", geo.Info{CountryCode: str("JP"), CountryName: str("Japan")}},
		{"country", "10.0.0.1", geo.Info{}},
		{"asn", "89.160.20.112", withAS(geo.Info{}, 29518, "Bredband2 AB")},
		{"asn", "1.128.0.0", withAS(geo.Info{}, 1221, "Telstra Pty Ltd")},
		{"asn", "81.2.69.142", geo.Info{}},
		{"isp", "89.160.20.112", withAS(geo.Info{}, 29518, "Bredband2 AB")},
		{"isp", "12.81.92.1", withAS(geo.Info{}, 7018, "")}, // isp and organization, no AS org
		{"isp", "8.8.8.8", geo.Info{}},                      // isp only, no AS
	}
	dbs := map[string]*geo.DB{}
	for name, cfg := range configs {
		dbs[name] = mustOpen(t, cfg)
	}
	for _, tt := range tests {
		t.Run(tt.config+"/"+tt.ip, func(t *testing.T) {
			got, err := dbs[tt.config].LookupErr(addr(tt.ip))
			if err != nil {
				t.Fatalf("LookupErr: %v", err)
			}
			if got == nil || !reflect.DeepEqual(*got, tt.want) {
				t.Errorf("Lookup(%s) = %s, want %s", tt.ip, show(got), show(&tt.want))
			}
			if again := dbs[tt.config].Lookup(addr(tt.ip)); !reflect.DeepEqual(again, got) {
				t.Errorf("Lookup = %s, LookupErr = %s", show(again), show(got))
			}
		})
	}
}

// TestLookupJSON ensures an Info marshals to API.md's "geo" object, with
// nulls for the fields the databases do not know.
func TestLookupJSON(t *testing.T) {
	db := mustOpen(t, geo.Config{CityPath: cityDB, ASNPath: asnDB})
	tests := []struct{ ip, want string }{
		{"89.160.20.112", `{"country_code":"SE","country_name":"Sweden","city":"Linköping","latitude":58.4167,"longitude":15.6167,"asn":29518,"as_org":"Bredband2 AB"}`},
		{"216.160.83.56", `{"country_code":"US","country_name":"United States","city":"Milton","latitude":47.2513,"longitude":-122.3149,"asn":209,"as_org":null}`},
		{"10.0.0.1", `{"country_code":null,"country_name":null,"city":null,"latitude":null,"longitude":null,"asn":null,"as_org":null}`},
	}
	for _, tt := range tests {
		if got := show(db.Lookup(addr(tt.ip))); got != tt.want {
			t.Errorf("%s: got %s\nwant %s", tt.ip, got, tt.want)
		}
	}
}

// TestLookupInvalidAddress ensures the zero netip.Addr is answered with
// empty fields and reported by LookupErr, not a panic.
func TestLookupInvalidAddress(t *testing.T) {
	db := mustOpen(t, geo.Config{CityPath: cityDB, ASNPath: asnDB})
	info, err := db.LookupErr(netip.Addr{})
	if err == nil || !strings.HasPrefix(err.Error(), "geo: ") {
		t.Errorf("LookupErr(invalid) error = %v, want a geo: error", err)
	}
	if info == nil || *info != (geo.Info{}) {
		t.Errorf("LookupErr(invalid) = %s, want all null", show(info))
	}
}

// TestNoDatabase ensures a DB without paths, a nil DB and a closed DB all
// behave as "no database": not enabled, nil answers, harmless methods.
func TestNoDatabase(t *testing.T) {
	empty, err := geo.Open(geo.Config{})
	if err != nil || empty == nil {
		t.Fatalf("Open(no paths) = %v, %v; want a DB and no error", empty, err)
	}
	closed := mustOpen(t, geo.Config{CityPath: cityDB})
	if err := closed.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	for name, db := range map[string]*geo.DB{"no paths": empty, "nil": nil, "closed": closed} {
		t.Run(name, func(t *testing.T) {
			if db.Enabled() {
				t.Error("Enabled() = true")
			}
			if info := db.Lookup(addr("81.2.69.142")); info != nil {
				t.Errorf("Lookup = %s, want nil", show(info))
			}
			if info, err := db.LookupErr(addr("81.2.69.142")); info != nil || err != nil {
				t.Errorf("LookupErr = %s, %v; want nil, nil", show(info), err)
			}
			if got := db.Description(); got != "none" {
				t.Errorf("Description() = %q, want none", got)
			}
			if b, _ := json.Marshal(db.Lookup(addr("81.2.69.142"))); string(b) != "null" {
				t.Errorf("JSON = %s, want null", b)
			}
			if err := db.Reload(); (db == closed) != errors.Is(err, geo.ErrClosed) || (db != closed && err != nil) {
				t.Errorf("Reload = %v, want ErrClosed only when closed", err)
			}
			if err := db.Close(); err != nil {
				t.Errorf("Close: %v", err)
			}
		})
	}
}

// TestEnabledDescription ensures an open DB is enabled and describes each
// database it uses for the start-up log.
func TestEnabledDescription(t *testing.T) {
	tests := []struct {
		cfg  geo.Config
		want string
	}{
		{geo.Config{CityPath: cityDB, ASNPath: asnDB}, "city: GeoIP2-City (built 2026-02-04); asn: GeoLite2-ASN (built 2026-02-04)"},
		{geo.Config{CityPath: countryDB}, "city: GeoIP2-Country (built 2026-02-04)"},
		{geo.Config{ASNPath: ispDB}, "asn: GeoIP2-ISP (built 2026-02-04)"},
	}
	for _, tt := range tests {
		db := mustOpen(t, tt.cfg)
		if !db.Enabled() {
			t.Errorf("%+v: Enabled() = false", tt.cfg)
		}
		if got := db.Description(); got != tt.want {
			t.Errorf("Description() = %q, want %q", got, tt.want)
		}
	}
}

// TestOpenErrors ensures unusable files stop Open with an error that names
// the file, its slot and what is wrong.
func TestOpenErrors(t *testing.T) {
	dir := t.TempDir()
	emptyFile := filepath.Join(dir, "empty.mmdb")
	if err := os.WriteFile(emptyFile, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "missing.mmdb")
	doubleFormat := brokenDir + "GeoIP2-City-Test-Broken-Double-Format.mmdb"
	tests := []struct {
		name string
		cfg  geo.Config
		path string   // the file the error must name
		want []string // further fragments of the message
	}{
		{"missing", geo.Config{CityPath: missing}, missing, []string{"city database", "no such file"}},
		{"empty", geo.Config{ASNPath: emptyFile}, emptyFile, []string{"ASN database", "empty"}},
		{"not mmdb", geo.Config{CityPath: "../testdata/geo/LICENSE-MIT"}, "LICENSE-MIT", []string{"invalid MaxMind DB"}},
		{"asn as city", geo.Config{CityPath: asnDB, ASNPath: asnDB}, asnDB, []string{"city database", "GeoLite2-ASN", "swapped"}},
		{"city as asn", geo.Config{ASNPath: cityDB}, cityDB, []string{"ASN database", "GeoIP2-City", "swapped"}},
		{"swapped pair", geo.Config{CityPath: ispDB, ASNPath: countryDB}, ispDB, []string{"swapped"}},
		{"bad asn, good city", geo.Config{CityPath: cityDB, ASNPath: missing}, missing, []string{"ASN database"}},
		{"double format", geo.Config{CityPath: doubleFormat}, doubleFormat, []string{"corrupt", "float 64"}},
		{"double format verified", geo.Config{CityPath: doubleFormat, Verify: true}, doubleFormat, []string{"corrupt", "latitude"}},
		{"invalid node count", geo.Config{CityPath: brokenDir + "GeoIP2-City-Test-Invalid-Node-Count.mmdb"}, "Invalid-Node-Count", []string{"invalid metadata"}},
		{"cyclic", geo.Config{CityPath: brokenDir + "cyclic-data-structure.mmdb"}, "cyclic-data-structure.mmdb", []string{"unexpected end"}},
		{"bytes length", geo.Config{ASNPath: brokenDir + "invalid-bytes-length.mmdb"}, "invalid-bytes-length.mmdb", []string{"unexpected end"}},
		{"record offset", geo.Config{CityPath: brokenDir + "invalid-data-record-offset.mmdb"}, "invalid-data-record-offset.mmdb", []string{"unknown type"}},
		{"map key length", geo.Config{CityPath: brokenDir + "invalid-map-key-length.mmdb"}, "invalid-map-key-length.mmdb", []string{"unexpected end"}},
		{"string length", geo.Config{CityPath: brokenDir + "invalid-string-length.mmdb"}, "invalid-string-length.mmdb", []string{"unexpected end"}},
		{"uint128 metadata", geo.Config{CityPath: brokenDir + "metadata-is-an-uint128.mmdb"}, "metadata-is-an-uint128.mmdb", []string{"unexpected end"}},
		{"unexpected bytes", geo.Config{CityPath: brokenDir + "unexpected-bytes.mmdb"}, "unexpected-bytes.mmdb", []string{"cannot unmarshal"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			db, err := geo.Open(tt.cfg)
			if err == nil {
				db.Close()
				t.Fatal("Open succeeded")
			}
			if db != nil {
				t.Error("Open returned a DB with its error")
			}
			msg := err.Error()
			for _, frag := range append([]string{"geo: ", tt.path}, tt.want...) {
				if !strings.Contains(msg, frag) {
					t.Errorf("error %q lacks %q", msg, frag)
				}
			}
		})
	}
}

// TestVerifiedOpen ensures Verify accepts every good test database.
func TestVerifiedOpen(t *testing.T) {
	mustOpen(t, geo.Config{CityPath: cityDB, ASNPath: asnDB, Verify: true})
	mustOpen(t, geo.Config{CityPath: countryDB, ASNPath: ispDB, Verify: true})
}
