package tlsrpt

import (
	"bytes"
	"compress/gzip"
	"errors"
	"io"
)

// isGzip reports whether data starts with the gzip magic number.
func isGzip(data []byte) bool { return len(data) >= 2 && data[0] == 0x1f && data[1] == 0x8b }

// gunzip decompresses data (one or more gzip members) under the limits: at
// most lim.MaxGzipped bytes in, lim.MaxBytes out, and, past 1 MiB of
// output, no more than lim.MaxRatio times the compressed bytes consumed so
// far. A gzip bomb is refused after about a megabyte of output.
func gunzip(data []byte, lim Limits) ([]byte, error) {
	if int64(len(data)) > lim.MaxGzipped {
		return nil, tooLarge("compressed report over %d bytes", lim.MaxGzipped)
	}
	in := &countingReader{r: bytes.NewReader(data)}
	zr, err := gzip.NewReader(in)
	if err != nil {
		return nil, malformed("gzip: %v", err)
	}
	var out bytes.Buffer
	buf := make([]byte, 32<<10)
	for {
		n, err := zr.Read(buf)
		out.Write(buf[:n])
		size := int64(out.Len())
		if size > lim.MaxBytes {
			return nil, tooLarge("report over %d bytes once decompressed", lim.MaxBytes)
		}
		if size > ratioGrace && size > in.n*lim.MaxRatio {
			return nil, tooLarge("gzip expands more than %d times", lim.MaxRatio)
		}
		if err == io.EOF {
			return out.Bytes(), nil
		}
		if err != nil {
			return nil, malformed("gzip: %v", err)
		}
	}
}

// countingReader counts the bytes the decompressor has consumed. It is an
// io.ByteReader, so flate reads exactly what it needs, no more.
type countingReader struct {
	r *bytes.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

func (c *countingReader) ReadByte() (byte, error) {
	b, err := c.r.ReadByte()
	if err == nil {
		c.n++
	}
	return b, err
}

// gunzipPrefix returns up to max bytes of data's decompressed content, and
// the error that stopped it early, if any.
func gunzipPrefix(data []byte, max int64) ([]byte, error) {
	zr, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		return nil, err
	}
	out, err := io.ReadAll(io.LimitReader(zr, max))
	if errors.Is(err, io.ErrUnexpectedEOF) {
		err = nil // a prefix is all we want
	}
	return out, err
}
