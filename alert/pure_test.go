package alert_test

import (
	"go/build"
	"strings"
	"testing"
)

// TestPure ensures the rules stay pure: package alert imports neither
// bbolt nor the network, nor the packages that hold them.
func TestPure(t *testing.T) {
	pkg, err := build.ImportDir(".", 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(pkg.Imports) == 0 {
		t.Fatal("no imports read")
	}
	for _, imp := range pkg.Imports {
		if strings.Contains(imp, "bbolt") || imp == "net" || strings.HasPrefix(imp, "net/http") ||
			strings.HasPrefix(imp, "github.com/miekg/") || strings.HasSuffix(imp, "/store") ||
			strings.HasSuffix(imp, "/dnscheck") || strings.HasSuffix(imp, "/webhook") || imp == "os" {
			t.Errorf("package alert imports %s", imp)
		}
	}
}
