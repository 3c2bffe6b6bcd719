package container

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
)

// TestLimitsDefaults ensures zero and negative fields take their defaults
// and set ones are kept.
func TestLimitsDefaults(t *testing.T) {
	if got := (Limits{}).WithDefaults(); got != DefaultLimits() {
		t.Fatalf("Limits{} = %+v, want %+v", got, DefaultLimits())
	}
	got := Limits{MaxRecords: 7, MaxDepth: -1}.WithDefaults()
	if got.MaxRecords != 7 || got.MaxDepth != defaultMaxDepth || got.MaxCompressed != 64<<20 || got.MaxDecompressed != 1<<30 ||
		got.MaxRatio != 1000 || got.MaxMembers != 100 {
		t.Fatalf("%+v", got)
	}
}

// TestCapReader ensures an input of exactly max bytes passes and one
// byte more is ErrTooLarge, not a silent truncation.
func TestCapReader(t *testing.T) {
	for _, tt := range []struct {
		size int
		err  error
	}{{10, nil}, {11, ErrTooLarge}, {0, nil}} {
		c := &capReader{r: strings.NewReader(strings.Repeat("x", tt.size)), max: 10, what: "test"}
		b, err := io.ReadAll(c)
		if !errors.Is(err, tt.err) || (tt.err == nil && len(b) != tt.size) {
			t.Errorf("size %d: %d bytes, %v; want %v", tt.size, len(b), err, tt.err)
		}
	}
}

// TestRatioReader ensures output past the grace is refused once it
// exceeds ratio times the input, and allowed below it.
func TestRatioReader(t *testing.T) {
	out := bytes.Repeat([]byte("a"), 4<<20)
	for _, tt := range []struct {
		in  int64
		err error
	}{{1 << 20, nil}, {8 << 10, nil}, {4 << 10, ErrTooLarge}, {0, ErrTooLarge}} {
		r := &ratioReader{r: bytes.NewReader(out), in: func() int64 { return tt.in }, ratio: 1000, what: "test"}
		_, err := io.Copy(io.Discard, r)
		if !errors.Is(err, tt.err) {
			t.Errorf("in %d: %v, want %v", tt.in, err, tt.err)
		}
	}
	small := &ratioReader{r: bytes.NewReader(out[:ratioGrace]), in: func() int64 { return 1 }, ratio: 1000}
	if _, err := io.Copy(io.Discard, small); err != nil {
		t.Errorf("output within the grace: %v", err)
	}
}

// TestBudgetReader ensures payloads share one budget.
func TestBudgetReader(t *testing.T) {
	budget := int64(15)
	a := &budgetReader{r: strings.NewReader("0123456789"), budget: &budget, max: 15, what: "XML"}
	if _, err := io.ReadAll(a); err != nil {
		t.Fatal(err)
	}
	b := &budgetReader{r: strings.NewReader("0123456789"), budget: &budget, max: 15, what: "XML"}
	if _, err := io.ReadAll(b); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("second payload: %v, want ErrTooLarge", err)
	}
}

// TestMalformedReader ensures decoder errors become ErrMalformed while
// io.EOF, sentinel and source errors pass unchanged.
func TestMalformedReader(t *testing.T) {
	src := &sourceError{errors.New("disk")}
	for _, tt := range []struct {
		in, want error
	}{{io.EOF, io.EOF}, {ErrTooLarge, ErrTooLarge}, {src, src}, {io.ErrUnexpectedEOF, ErrMalformed}} {
		_, err := malformedReader{r: errReader{tt.in}, what: "x"}.Read(make([]byte, 1))
		if !errors.Is(err, tt.want) {
			t.Errorf("%v became %v, want %v", tt.in, err, tt.want)
		}
	}
}

type errReader struct{ err error }

func (r errReader) Read([]byte) (int, error) { return 0, r.err }
