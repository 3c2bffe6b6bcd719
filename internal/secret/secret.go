// Package secret encrypts the secrets dmarcd must keep to act on a user's
// behalf (mailbox passwords, OAuth2 client secrets and refresh tokens) with
// AES-256-GCM under a key kept in a file beside the database, so that a
// copy of the database alone does not reveal them.
//
// A sealed value is: version byte 1 | key id (the first 4 bytes of
// SHA-256 of the key) | 12-byte random nonce | ciphertext and tag. The key
// id lets Open tell "this is not the key these secrets were sealed with"
// from "the value is damaged", and both are errors: Open never returns
// garbage.
package secret

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// FileName is the name of the key file in the data directory.
const FileName = "secret.key"

// keyLen is the length of an AES-256 key.
const keyLen = 32

const (
	version   = 1
	keyIDLen  = 4
	nonceLen  = 12
	headerLen = 1 + keyIDLen + nonceLen
)

// Errors, tested with errors.Is.
var (
	// ErrNoKey means the key file does not exist.
	ErrNoKey = errors.New("secret key file is missing")
	// ErrWrongKey means a value was sealed with another key.
	ErrWrongKey = errors.New("secret was encrypted with a different key")
	// ErrDamaged means a value is not a sealed secret or was altered.
	ErrDamaged = errors.New("secret is damaged or not encrypted by dmarcd")
)

// Box seals and opens secrets with one key. It is safe for concurrent use.
type Box struct {
	aead  cipher.AEAD
	keyID [keyIDLen]byte
	path  string
}

// KeyPath returns the key file's path in dataDir.
func KeyPath(dataDir string) string { return filepath.Join(dataDir, FileName) }

// Load reads the key file at path. A missing file is ErrNoKey (with the
// path and what to do); a file that is not 64 hex characters, or that
// others may read, is an error saying so.
func Load(path string) (*Box, error) {
	fi, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("secret: %s: %w (restore it from the backup that holds it; without it the stored mailbox credentials cannot be read and must be entered again)", path, ErrNoKey)
	}
	if err != nil {
		return nil, fmt.Errorf("secret: %w", err)
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("secret: %s may be read by other users (mode %#o); run chmod 600 on it", path, fi.Mode().Perm())
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("secret: %w", err)
	}
	key, err := hex.DecodeString(strings.TrimSpace(string(raw)))
	if err != nil || len(key) != keyLen {
		return nil, fmt.Errorf("secret: %s does not hold a key (expected %d hex characters)", path, 2*keyLen)
	}
	return newBox(key, path)
}

// LoadOrCreate is Load, but first creates the key file with a new random
// key, mode 0600, when there is none. Creation is exclusive: of two
// processes racing, one creates and both read the same key.
func LoadOrCreate(path string) (*Box, error) {
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		key := make([]byte, keyLen)
		if _, err := rand.Read(key); err != nil {
			return nil, fmt.Errorf("secret: %w", err)
		}
		if err := writeNew(path, []byte(hex.EncodeToString(key)+"\n")); err != nil && !errors.Is(err, fs.ErrExist) {
			return nil, fmt.Errorf("secret: create %s: %w", path, err)
		}
	}
	return Load(path)
}

// writeNew writes data to a new file at path, synced, mode 0600.
func writeNew(path string, data []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = os.Remove(path)
	}
	return err
}

func newBox(key []byte, path string) (*Box, error) {
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, fmt.Errorf("secret: %w", err)
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, fmt.Errorf("secret: %w", err)
	}
	b := &Box{aead: aead, path: path}
	sum := sha256.Sum256(key)
	copy(b.keyID[:], sum[:keyIDLen])
	return b, nil
}

// Seal encrypts plaintext. context binds the value to its use (for
// example "mailbox credentials"): Open with another context fails, so a
// sealed value cannot be moved to another field.
func (b *Box) Seal(plaintext []byte, context string) []byte {
	out := make([]byte, headerLen, headerLen+len(plaintext)+b.aead.Overhead())
	out[0] = version
	copy(out[1:], b.keyID[:])
	if _, err := rand.Read(out[1+keyIDLen : headerLen]); err != nil {
		panic("secret: no randomness: " + err.Error()) // crypto/rand does not fail on supported systems
	}
	return b.aead.Seal(out, out[1+keyIDLen:headerLen], plaintext, b.ad(out[:1+keyIDLen], context))
}

// Open decrypts a value made by Seal with the same context. It returns an
// error wrapping ErrWrongKey when the value was sealed with another key
// and ErrDamaged when it is not a sealed value or was changed.
func (b *Box) Open(sealed []byte, context string) ([]byte, error) {
	if len(sealed) < headerLen+b.aead.Overhead() || sealed[0] != version {
		return nil, fmt.Errorf("secret: %w", ErrDamaged)
	}
	if !bytes.Equal(sealed[1:1+keyIDLen], b.keyID[:]) {
		return nil, fmt.Errorf("secret: %w: the key in %s is not the one they were stored with", ErrWrongKey, b.path)
	}
	plain, err := b.aead.Open(nil, sealed[1+keyIDLen:headerLen], sealed[headerLen:], b.ad(sealed[:1+keyIDLen], context))
	if err != nil {
		return nil, fmt.Errorf("secret: %w", ErrDamaged)
	}
	return plain, nil
}

// ad is the additional data: the header and the context.
func (b *Box) ad(header []byte, context string) []byte {
	return append(bytes.Clone(header), context...)
}
