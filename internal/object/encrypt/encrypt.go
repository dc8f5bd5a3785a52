// Package encrypt provides a Store decorator that encrypts each object as
// the object layout spec says (section "Encryption"):
//
//   - every object gets a fresh random 256-bit data key;
//   - the data key is wrapped with the volume's RSA key by RSA-OAEP with
//     SHA-256 and the label "keys";
//   - the data is sealed with AES-256-GCM ("aes256gcm-rsa") or
//     ChaCha20-Poly1305 ("chacha20-rsa"), with a random 12-byte nonce and
//     no additional data;
//   - the stored bytes are
//     [u16 big-endian len(wrapped key)][u8 len(nonce)][wrapped key][nonce][ciphertext with tag].
//
// The spec compresses a block before encrypting it, so the compressing
// decorator goes outside this one: compress.New(encrypt.New(backend, ...), ...).
// (Compressing ciphertext would gain nothing and break the layout.)
//
// An object is sealed as a whole, so Get reads, authenticates and decrypts
// the whole stored object and then applies the offset and limit; objects
// are blocks of at most 16 MiB. An object that fails authentication
// (tampered, truncated, or sealed with another key) yields an error
// wrapping ErrDecrypt, never bytes. Head and List report stored sizes.
//
// ParsePrivateKey reads the RSA key from PEM (PKCS#1 or PKCS#8, plain,
// legacy-encrypted or PKCS#8-encrypted with PBES2).
package encrypt

import (
	"bytes"
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"strings"

	"golang.org/x/crypto/chacha20poly1305"

	"github.com/sluicefs/sluice/internal/object"
)

// The encryption algorithms of the object layout spec.
const (
	AES256GCMRSA = "aes256gcm-rsa"
	ChaCha20RSA  = "chacha20-rsa"
)

// Algorithms lists the accepted algorithm names.
var Algorithms = []string{AES256GCMRSA, ChaCha20RSA}

// MaxSize bounds the size of a stored object that Get reads, so a corrupt
// listing cannot make it allocate without limit; blocks are at most 16 MiB
// before compression.
const MaxSize = 64<<20 + 64<<10

// ErrDecrypt reports a stored object that cannot be decrypted: tampered,
// truncated, not encrypted, or encrypted with another key or algorithm.
var ErrDecrypt = errors.New("cannot decrypt object")

// dataKeySize is the size of the per-object data key.
const dataKeySize = 32

// oaepLabel is the RSA-OAEP label of wrapped data keys.
var oaepLabel = []byte("keys")

// Store encrypts the objects of the Store it wraps.
type Store struct {
	inner   object.Store
	algo    string
	key     *rsa.PrivateKey
	newAEAD func(key []byte) (cipher.AEAD, error)
}

var (
	_ object.Store     = (*Store)(nil)
	_ object.Unwrapper = (*Store)(nil)
)

// New returns s wrapped to encrypt objects with algo ("aes256gcm-rsa" or
// "chacha20-rsa", case-insensitive) and key, which wraps the data keys.
func New(s object.Store, key *rsa.PrivateKey, algo string) (*Store, error) {
	if key == nil {
		return nil, errors.New("encrypt: no RSA key")
	}
	if err := key.Validate(); err != nil {
		return nil, fmt.Errorf("encrypt: invalid RSA key: %w", err)
	}
	// RSA-OAEP with SHA-256 needs 2*32+2 bytes of the modulus for itself.
	if key.Size() < dataKeySize+2*sha256.Size+2 {
		return nil, fmt.Errorf("encrypt: RSA key of %d bits is too small", key.N.BitLen())
	}
	st := &Store{inner: s, algo: strings.ToLower(algo), key: key}
	switch st.algo {
	case AES256GCMRSA:
		st.newAEAD = newAESGCM
	case ChaCha20RSA:
		st.newAEAD = chacha20poly1305.New
	default:
		return nil, fmt.Errorf("encrypt: unknown algorithm %q (supported: %s)", algo, strings.Join(Algorithms, ", "))
	}
	return st, nil
}

// newAESGCM returns AES-256-GCM with the standard 12-byte nonce.
func newAESGCM(key []byte) (cipher.AEAD, error) {
	b, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(b)
}

// String returns the name of the wrapped store.
func (s *Store) String() string { return s.inner.String() }

// Unwrap returns the wrapped store.
func (s *Store) Unwrap() object.Store { return s.inner }

// seal encrypts plain under a fresh data key and returns the stored form.
func (s *Store) seal(plain []byte) ([]byte, error) {
	dataKey := make([]byte, dataKeySize)
	rand.Read(dataKey)
	wrapped, err := rsa.EncryptOAEP(sha256.New(), rand.Reader, &s.key.PublicKey, dataKey, oaepLabel)
	if err != nil {
		return nil, fmt.Errorf("wrap data key: %w", err)
	}
	aead, err := s.newAEAD(dataKey)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", s.algo, err)
	}
	nonce := make([]byte, aead.NonceSize())
	rand.Read(nonce)
	out := make([]byte, 3, 3+len(wrapped)+len(nonce)+len(plain)+aead.Overhead())
	binary.BigEndian.PutUint16(out, uint16(len(wrapped)))
	out[2] = byte(len(nonce))
	out = append(out, wrapped...)
	out = append(out, nonce...)
	return aead.Seal(out, nonce, plain, nil), nil
}

// open authenticates and decrypts a stored object. Every failure wraps
// ErrDecrypt.
func (s *Store) open(stored []byte) ([]byte, error) {
	if len(stored) < 3 {
		return nil, fmt.Errorf("%w: %d bytes is too short for a header", ErrDecrypt, len(stored))
	}
	keyLen, nonceLen := int(binary.BigEndian.Uint16(stored)), int(stored[2])
	rest := stored[3:]
	if keyLen+nonceLen > len(rest) {
		return nil, fmt.Errorf("%w: header claims %d+%d bytes of %d", ErrDecrypt, keyLen, nonceLen, len(rest))
	}
	wrapped, nonce, sealed := rest[:keyLen], rest[keyLen:keyLen+nonceLen], rest[keyLen+nonceLen:]
	dataKey, err := rsa.DecryptOAEP(sha256.New(), nil, s.key, wrapped, oaepLabel)
	if err != nil {
		return nil, fmt.Errorf("%w: unwrap data key: %w", ErrDecrypt, err)
	}
	aead, err := s.newAEAD(dataKey)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrDecrypt, s.algo, err)
	}
	if nonceLen != aead.NonceSize() {
		return nil, fmt.Errorf("%w: nonce of %d bytes, %s needs %d", ErrDecrypt, nonceLen, s.algo, aead.NonceSize())
	}
	plain, err := aead.Open(nil, nonce, sealed, nil)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrDecrypt, s.algo, err)
	}
	return plain, nil
}

// Get decrypts the whole object and returns limit bytes of it from off; a
// negative limit reads to the end.
func (s *Store) Get(ctx context.Context, key string, off, limit int64) (io.ReadCloser, error) {
	if off < 0 {
		return nil, fmt.Errorf("%s: get %q: negative offset %d", s, key, off)
	}
	rc, err := s.inner.Get(ctx, key, 0, -1)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	stored, err := object.ReadWhole(rc, MaxSize)
	if err != nil {
		return nil, fmt.Errorf("%s: get %q: stored %w", s, key, err)
	}
	data, err := s.open(stored)
	if err != nil {
		return nil, fmt.Errorf("%s: get %q: %w", s, key, err)
	}
	return object.RangeReader(data, off, limit), nil
}

// Put reads all of r, encrypts it and stores the result under key.
func (s *Store) Put(ctx context.Context, key string, r io.Reader) error {
	plain, err := object.ReadWhole(r, MaxSize)
	if err != nil {
		return fmt.Errorf("%s: put %q: %w", s, key, err)
	}
	out, err := s.seal(plain)
	if err != nil {
		return fmt.Errorf("%s: put %q: %w", s, key, err)
	}
	return s.inner.Put(ctx, key, bytes.NewReader(out))
}

// Delete removes key.
func (s *Store) Delete(ctx context.Context, key string) error {
	return s.inner.Delete(ctx, key)
}

// Head returns the Info of key; Size is the stored, encrypted size.
func (s *Store) Head(ctx context.Context, key string) (object.Info, error) {
	return s.inner.Head(ctx, key)
}

// List lists the wrapped store; sizes are stored, encrypted sizes.
func (s *Store) List(ctx context.Context, prefix, marker string, limit int) ([]object.Info, error) {
	return s.inner.List(ctx, prefix, marker, limit)
}
