package aggregate

import (
	"archive/zip"
	"bytes"
	"compress/gzip"
	"compress/zlib"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dmarcd/dmarcd/dmarc/container"

	"github.com/dmarcd/dmarcd/internal/reportgen"
)

// ctrPayload is what Extract handed to its callback.
type ctrPayload struct {
	name string
	body []byte
}

// ctrExtract runs Extract and collects the payloads.
func ctrExtract(r io.Reader, lim container.Limits) ([]ctrPayload, error) {
	var got []ctrPayload
	err := Extract(r, lim, func(p container.Payload) error {
		b, err := io.ReadAll(p.Body)
		got = append(got, ctrPayload{p.Name, b})
		return err
	})
	return got, err
}

func ctrGzip(b []byte, name string) []byte {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	zw.Name = name
	zw.Write(b)
	zw.Close()
	return buf.Bytes()
}

func ctrZlib(b []byte) []byte {
	var buf bytes.Buffer
	zw := zlib.NewWriter(&buf)
	zw.Write(b)
	zw.Close()
	return buf.Bytes()
}

// ctrZip builds an archive of name/content pairs; a name ending in "/" is a
// directory.
func ctrZip(tb testing.TB, members ...string) []byte {
	tb.Helper()
	return ctrZipMethod(tb, zip.Deflate, members...)
}

func ctrZipMethod(tb testing.TB, method uint16, members ...string) []byte {
	tb.Helper()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for i := 0; i < len(members); i += 2 {
		w, err := zw.CreateHeader(&zip.FileHeader{Name: members[i], Method: method})
		if err != nil {
			tb.Fatal(err)
		}
		w.Write([]byte(members[i+1]))
	}
	if err := zw.Close(); err != nil {
		tb.Fatal(err)
	}
	return buf.Bytes()
}

// ctrRepeat yields block n times.
type ctrRepeat struct {
	block []byte
	n     int64
	off   int
}

func (r *ctrRepeat) Read(p []byte) (int, error) {
	if r.n == 0 {
		return 0, io.EOF
	}
	k := copy(p, r.block[r.off:])
	if r.off += k; r.off == len(r.block) {
		r.off, r.n = 0, r.n-1
	}
	return k, nil
}

// ctrGzipBomb streams a gzip member that expands to prefix and then total
// zero bytes, holding neither: a steady-state deflate block of 1 MiB of
// zeros is compressed once and repeated.
func ctrGzipBomb(prefix []byte, total int64) io.Reader {
	var buf bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&buf, gzip.DefaultCompression)
	zeros := make([]byte, 1<<20)
	zw.Write(prefix)
	zw.Write(zeros)
	zw.Flush()
	head := bytes.Clone(buf.Bytes())
	buf.Reset()
	zw.Write(zeros)
	zw.Flush()
	return io.MultiReader(bytes.NewReader(head), &ctrRepeat{block: bytes.Clone(buf.Bytes()), n: total >> 20})
}

// ctrBombPrefix starts a report whose text then runs on (the zeros).
const ctrBombPrefix = `<?xml version="1.0"?><feedback><report_metadata><org_name>bomb</org_name></report_metadata>`

// TestExtractNiceInput ensures nice-input.xml, .xml.gz and .xml.zip all
// extract to the bytes of nice-input.xml, and changed-input.xml does not
// (parsedmarc's extraction oracle).
func TestExtractNiceInput(t *testing.T) {
	dir := filepath.Join(aggCorpusDir, "extract_report")
	want, err := os.ReadFile(filepath.Join(dir, "nice-input.xml"))
	if err != nil {
		t.Fatal(err)
	}
	extract := func(name string) []byte {
		f, err := os.Open(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		got, err := ctrExtract(f, container.Limits{})
		if err != nil || len(got) != 1 {
			t.Fatalf("%s: %d payloads, %v", name, len(got), err)
		}
		return got[0].body
	}
	for _, name := range []string{"nice-input.xml", "nice-input.xml.gz", "nice-input.xml.zip"} {
		if !bytes.Equal(extract(name), want) {
			t.Errorf("%s does not extract to nice-input.xml", name)
		}
	}
	if bytes.Equal(extract("changed-input.xml"), want) {
		t.Error("changed-input.xml extracts to nice-input.xml")
	}
}

// TestExtractContainers ensures each container shape yields its reports
// (with their names) or its documented error.
func TestExtractContainers(t *testing.T) {
	x := reportgen.Generate(11, 20, reportgen.Options{})
	y := reportgen.Generate(12, 5, reportgen.Options{})
	corrupt := ctrGzip(x, "")
	corrupt[len(corrupt)/2] ^= 0xff
	corrupt[len(corrupt)/2+1] ^= 0xff
	gz := ctrGzip(x, "")
	zp := ctrZip(t, "a.xml", string(x))
	nested := x
	for range 10 {
		nested = ctrGzip(nested, "")
	}
	tests := []struct {
		name  string
		in    []byte
		lim   container.Limits
		names []string // payload names, when it succeeds
		err   error
	}{
		{name: "plain XML", in: x, names: []string{""}},
		{name: "gzip with its file name", in: ctrGzip(x, "r.xml"), names: []string{"r.xml"}},
		{name: "gzip inside gzip", in: ctrGzip(ctrGzip(x, ""), "outer.xml.gz"), names: []string{"outer.xml.gz"}},
		{name: "gzip with trailing bytes", in: append(ctrGzip(x, ""), "\r\n\x00garbage"...), names: []string{""}},
		{name: "zlib", in: ctrZlib(x), names: []string{""}},
		{name: "zip: reports, a directory, an empty name, a non-report", in: ctrZip(t, "dir/", "", "a.xml", string(x), "", string(y), "readme.txt", "hello", "b.xml.gz", string(ctrGzip(y, ""))),
			names: []string{"a.xml", "", "b.xml.gz"}},
		{name: "zip inside zip", in: ctrZip(t, "inner.zip", string(zp)), names: []string{"a.xml"}},
		{name: "zip inside gzip", in: ctrGzip(zp, "r.zip"), names: []string{"a.xml"}},
		{name: "empty input", in: nil, err: container.ErrNoReport},
		{name: "HTML, not a report", in: []byte("<html><body>dmarc feedback</body></html>"), err: container.ErrNoReport},
		{name: "gzip of something else", in: ctrGzip([]byte("just text"), ""), err: container.ErrNoReport},
		{name: "random bytes", in: []byte("\x00\x01\x02\x03 binary junk"), err: container.ErrNoReport},
		{name: "empty zip", in: ctrZip(t), err: container.ErrNoReport},
		{name: "corrupt gzip", in: corrupt, err: container.ErrMalformed},
		{name: "truncated gzip", in: gz[:len(gz)/2], err: container.ErrMalformed},
		{name: "truncated zip", in: zp[:len(zp)-30], err: container.ErrMalformed},
		{name: "bad gzip header", in: []byte("\x1f\x8b\x09garbage"), err: container.ErrMalformed},
		{name: "containers nested too deep", in: nested, err: container.ErrTooLarge},
		{name: "compressed input over MaxCompressed", in: ctrGzip(x, ""), lim: container.Limits{MaxCompressed: 100}, err: container.ErrTooLarge},
		{name: "zip over MaxCompressed", in: zp, lim: container.Limits{MaxCompressed: int64(len(zp) - 1)}, err: container.ErrTooLarge},
		{name: "XML over MaxDecompressed, summed over members", in: ctrZip(t, "a.xml", string(x), "b.xml", string(x)), lim: container.Limits{MaxDecompressed: int64(len(x) + 100)}, err: container.ErrTooLarge},
		{name: "zip members over MaxMembers", in: ctrZip(t, "a.xml", string(x), "b.xml", string(y), "c", ""), lim: container.Limits{MaxMembers: 2}, err: container.ErrTooLarge},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ctrExtract(bytes.NewReader(tt.in), tt.lim)
			if tt.err != nil {
				if !errors.Is(err, tt.err) {
					t.Fatalf("error %v, want %v", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, p := range got {
				names = append(names, p.name)
				if !bytes.Equal(p.body, x) && !bytes.Equal(p.body, y) {
					t.Errorf("payload %q is not a report we packed", p.name)
				}
			}
			if fmt.Sprint(names) != fmt.Sprint(tt.names) {
				t.Errorf("payloads %q, want %q", names, tt.names)
			}
		})
	}
}

// TestExtractZipOf10000Members ensures a zip of 10,000 members is refused
// with container.ErrTooLarge before any member is read.
func TestExtractZipOf10000Members(t *testing.T) {
	members := make([]string, 0, 20000)
	for i := range 10000 {
		members = append(members, fmt.Sprintf("r%05d.xml", i), aggDoc("", "", ""))
	}
	calls := 0
	zp := ctrZipMethod(t, zip.Store, members...)
	err := Extract(bytes.NewReader(zp), container.Limits{}, func(container.Payload) error { calls++; return nil })
	if !errors.Is(err, container.ErrTooLarge) || calls != 0 {
		t.Fatalf("error %v after %d payloads; want container.ErrTooLarge before any", err, calls)
	}
}

// TestExtractGzipBomb ensures a gzip expanding past 1 GB (streamed, never
// held) is refused with container.ErrTooLarge by the ratio check, after a few
// megabytes of output (deflate tops out at 1032:1, so the average ratio
// needs a few MB to climb past 1000).
func TestExtractGzipBomb(t *testing.T) {
	bomb := ctrGzipBomb([]byte(ctrBombPrefix), 1100<<20)
	var read int64
	err := Extract(bomb, container.Limits{}, func(p container.Payload) error {
		n, err := io.Copy(io.Discard, p.Body)
		read = n
		return err
	})
	if !errors.Is(err, container.ErrTooLarge) || !strings.Contains(err.Error(), "expands more than 1000:1") {
		t.Fatalf("error %v, want the ratio's container.ErrTooLarge", err)
	}
	if read > 16<<20 {
		t.Fatalf("%d bytes read before the ratio check stopped it", read)
	}
}

// TestExtractGzipPast1GB ensures that even with the ratio check relaxed, a
// gzip expanding past 1 GB stops at MaxDecompressed with container.ErrTooLarge, the
// XML reader streaming through it in bounded memory.
func TestExtractGzipPast1GB(t *testing.T) {
	if testing.Short() {
		t.Skip("decompresses 1 GiB")
	}
	bomb := ctrGzipBomb([]byte(ctrBombPrefix), 1100<<20)
	err := Extract(bomb, container.Limits{MaxRatio: 1 << 40}, func(p container.Payload) error {
		_, _, err := Parse(p.Body, container.Limits{})
		return err
	})
	if !errors.Is(err, container.ErrTooLarge) || !strings.Contains(err.Error(), "larger than 1073741824 bytes") {
		t.Fatalf("error %v, want MaxDecompressed's container.ErrTooLarge", err)
	}
}

// TestExtractZipBombMember ensures a zip member that expands past the
// ratio is refused with container.ErrTooLarge.
func TestExtractZipBombMember(t *testing.T) {
	// The ratio uses the member's declared compressed size, so it trips
	// near the end of a member that expands 1028:1 overall.
	zp := ctrZip(t, "bomb.xml", ctrBombPrefix+strings.Repeat("\x00", 16<<20))
	err := Extract(bytes.NewReader(zp), container.Limits{}, func(p container.Payload) error {
		_, err := io.Copy(io.Discard, p.Body)
		return err
	})
	if !errors.Is(err, container.ErrTooLarge) {
		t.Fatalf("error %v, want container.ErrTooLarge", err)
	}
}

// TestExtractCallbackError ensures an error of the callback stops the walk
// and comes back as it is.
func TestExtractCallbackError(t *testing.T) {
	stop := errors.New("stop here")
	x := []byte(aggDoc("", "", ""))
	calls := 0
	err := Extract(bytes.NewReader(ctrZip(t, "a.xml", string(x), "b.xml", string(x))), container.Limits{}, func(container.Payload) error {
		calls++
		return stop
	})
	if err != stop || calls != 1 {
		t.Fatalf("error %v after %d calls, want %v after 1", err, calls, stop)
	}
}

// ctrFailingReader returns data, then an I/O error.
type ctrFailingReader struct {
	data []byte
	err  error
}

func (f *ctrFailingReader) Read(p []byte) (int, error) {
	if len(f.data) == 0 {
		return 0, f.err
	}
	n := copy(p, f.data)
	f.data = f.data[n:]
	return n, nil
}

// TestExtractSourceError ensures an error of the caller's reader comes back
// wrapped but not mistaken for a malformed report.
func TestExtractSourceError(t *testing.T) {
	ioErr := errors.New("disk on fire")
	gz := ctrGzip(reportgen.Generate(1, 100, reportgen.Options{}), "")
	err := Extract(&ctrFailingReader{data: gz[:len(gz)/2], err: ioErr}, container.Limits{}, func(p container.Payload) error {
		_, _, err := Parse(p.Body, container.Limits{})
		return err
	})
	if !errors.Is(err, ioErr) || errors.Is(err, container.ErrMalformed) {
		t.Fatalf("error %v, want the reader's error, not container.ErrMalformed", err)
	}
}
