package numfmt

import "testing"

func TestPercent(t *testing.T) {
	for _, c := range []struct {
		f    float64
		want string
	}{{0, "0.0 %"}, {1, "100.0 %"}, {0.98765, "98.8 %"}, {0.0004, "0.0 %"}, {0.5, "50.0 %"}} {
		if got := Percent(c.f); got != c.want {
			t.Errorf("Percent(%v) = %q, want %q", c.f, got, c.want)
		}
	}
	if got := Share(1, 3); got != "33.3 %" {
		t.Errorf("Share(1, 3) = %q", got)
	}
	if got := Share(1, 0); got != "–" {
		t.Errorf("Share(1, 0) = %q", got)
	}
}

func TestCount(t *testing.T) {
	for n, want := range map[int64]string{0: "0", 999: "999", 1000: "1,000", 1234567: "1,234,567", -1234: "-1,234"} {
		if got := Count(n); got != want {
			t.Errorf("Count(%d) = %q, want %q", n, got, want)
		}
	}
}
