// Package zst holds the process's one zstd encoder and decoder for the
// sealed forms of the store: record blocks and report tables (package
// block) and sealed roll-ups (package reports). They are expensive to make
// and safe for concurrent EncodeAll and DecodeAll, so they are made once,
// at first use.
package zst

import (
	"sync"

	"github.com/klauspost/compress/zstd"
)

// MaxDecoded is the most a frame may decompress to; callers check the
// length a value claims against their own smaller bound first.
const MaxDecoded = 1 << 31

var (
	once sync.Once
	enc  *zstd.Encoder
	dec  *zstd.Decoder
)

// Codecs returns the encoder and decoder. Sealing runs in the background
// and a sealed value is read many times, so the encoder takes the better
// level; the callers checksum their values themselves, so zstd's checksum
// is off.
func Codecs() (*zstd.Encoder, *zstd.Decoder) {
	once.Do(func() {
		var err error
		enc, err = zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedBetterCompression),
			zstd.WithEncoderCRC(false), zstd.WithEncoderConcurrency(1), zstd.WithLowerEncoderMem(true))
		if err != nil {
			panic(err) // only for invalid options
		}
		dec, err = zstd.NewReader(nil, zstd.WithDecoderConcurrency(0), zstd.WithDecoderMaxMemory(MaxDecoded),
			zstd.IgnoreChecksum(true))
		if err != nil {
			panic(err)
		}
	})
	return enc, dec
}
