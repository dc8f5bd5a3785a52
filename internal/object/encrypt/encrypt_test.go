package encrypt_test

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
	"io"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/crypto/chacha20poly1305"

	"github.com/sluicefs/sluice/internal/object"
	"github.com/sluicefs/sluice/internal/object/encrypt"
	"github.com/sluicefs/sluice/internal/object/file"
	"github.com/sluicefs/sluice/internal/object/objecttest"
)

// passphrase protects the encrypted keys in testdata.
const passphrase = "sluice-test"

// testKey returns the RSA key of testdata/pkcs1.pem.
func testKey(t testing.TB) *rsa.PrivateKey {
	t.Helper()
	return readKey(t, "pkcs1.pem", "")
}

// readKey parses testdata/name with pass.
func readKey(t testing.TB, name, pass string) *rsa.PrivateKey {
	t.Helper()
	pemBytes, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	key, err := encrypt.ParsePrivateKey(pemBytes, []byte(pass))
	if err != nil {
		t.Fatalf("ParsePrivateKey(%s): %v", name, err)
	}
	return key
}

// newStore returns an encrypting store over a fresh file store.
func newStore(t testing.TB, key *rsa.PrivateKey, algo string) (*encrypt.Store, *file.Store) {
	t.Helper()
	inner, err := file.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	s, err := encrypt.New(inner, key, algo)
	if err != nil {
		t.Fatal(err)
	}
	return s, inner
}

func TestSuite(t *testing.T) {
	key := testKey(t)
	for _, algo := range encrypt.Algorithms {
		t.Run(algo, func(t *testing.T) {
			objecttest.Run(t, func(t *testing.T) object.Store {
				s, _ := newStore(t, key, algo)
				return s
			})
		})
	}
}

// stdlibOpen decrypts stored bytes the way the spec describes them, with
// the standard library only, to check the layout independently of the
// package.
func stdlibOpen(t *testing.T, key *rsa.PrivateKey, algo string, stored []byte) []byte {
	t.Helper()
	keyLen := int(binary.BigEndian.Uint16(stored[0:2]))
	nonceLen := int(stored[2])
	if keyLen != key.Size() || nonceLen != 12 {
		t.Fatalf("header: wrapped key %d bytes, nonce %d bytes; want %d and 12", keyLen, nonceLen, key.Size())
	}
	wrapped := stored[3 : 3+keyLen]
	nonce := stored[3+keyLen : 3+keyLen+nonceLen]
	sealed := stored[3+keyLen+nonceLen:]
	dataKey, err := rsa.DecryptOAEP(sha256.New(), nil, key, wrapped, []byte("keys"))
	if err != nil {
		t.Fatalf("unwrap data key: %v", err)
	}
	if len(dataKey) != 32 {
		t.Fatalf("data key of %d bytes, want 32", len(dataKey))
	}
	var aead cipher.AEAD
	if algo == encrypt.AES256GCMRSA {
		block, err := aes.NewCipher(dataKey)
		if err != nil {
			t.Fatal(err)
		}
		aead, err = cipher.NewGCM(block)
		if err != nil {
			t.Fatal(err)
		}
	} else {
		aead, err = chacha20poly1305.New(dataKey)
		if err != nil {
			t.Fatal(err)
		}
	}
	plain, err := aead.Open(nil, nonce, sealed, nil)
	if err != nil {
		t.Fatalf("open with %s: %v", algo, err)
	}
	return plain
}

func TestLayout(t *testing.T) {
	key := testKey(t)
	for _, algo := range encrypt.Algorithms {
		for _, data := range [][]byte{nil, []byte("hello"), objecttest.Data(1, 1<<20)} {
			s, inner := newStore(t, key, algo)
			objecttest.Put(t, s, "chunks/0/0/1_0_1", data)
			objecttest.Put(t, s, "chunks/0/0/1_0_2", data)
			raw := objecttest.Get(t, inner, "chunks/0/0/1_0_1", 0, -1)
			if want := 3 + key.Size() + 12 + len(data) + 16; len(raw) != want {
				t.Errorf("%s: stored %d bytes for %d, want %d", algo, len(raw), len(data), want)
			}
			if got := stdlibOpen(t, key, algo, raw); !bytes.Equal(got, data) {
				t.Errorf("%s: stdlib decryption gives %d bytes, want the %d put", algo, len(got), len(data))
			}
			// A fresh data key and nonce per object.
			raw2 := objecttest.Get(t, inner, "chunks/0/0/1_0_2", 0, -1)
			if bytes.Equal(raw[3:], raw2[3:]) || bytes.Equal(raw[3+key.Size():3+key.Size()+12], raw2[3+key.Size():3+key.Size()+12]) {
				t.Errorf("%s: two objects share their wrapped key or nonce", algo)
			}
		}
	}
}

func TestTamper(t *testing.T) {
	key := testKey(t)
	data := objecttest.Data(2, 10_000)
	ks := key.Size()
	flip := func(i int) func([]byte) []byte {
		return func(b []byte) []byte {
			if i < 0 {
				i += len(b)
			}
			b[i] ^= 0x01
			return b
		}
	}
	tests := []struct {
		name   string
		change func([]byte) []byte
	}{
		{"key length", flip(1)},
		{"key length too big", func(b []byte) []byte { b[0] = 0xff; return b }},
		{"nonce length", flip(2)},
		{"wrapped key", flip(3 + 10)},
		{"nonce", flip(3 + ks + 5)},
		{"ciphertext", flip(3 + ks + 12 + 100)},
		{"tag", flip(-1)},
		{"truncated", func(b []byte) []byte { return b[:len(b)-1] }},
		{"truncated to the header", func(b []byte) []byte { return b[:3+ks+12] }},
		{"extended", func(b []byte) []byte { return append(b, 0) }},
		{"empty", func([]byte) []byte { return nil }},
		{"two bytes", func([]byte) []byte { return []byte{0, 1} }},
		{"plaintext", func([]byte) []byte { return data }},
	}
	for _, algo := range encrypt.Algorithms {
		for _, tt := range tests {
			t.Run(algo+"/"+tt.name, func(t *testing.T) {
				s, inner := newStore(t, key, algo)
				objecttest.Put(t, s, "k", data)
				raw := objecttest.Get(t, inner, "k", 0, -1)
				objecttest.Put(t, inner, "k", tt.change(raw))
				rc, err := s.Get(context.Background(), "k", 0, -1)
				if err == nil {
					got, _ := io.ReadAll(rc)
					t.Fatalf("Get of a tampered object returned %d bytes and no error", len(got))
				}
				if !errors.Is(err, encrypt.ErrDecrypt) {
					t.Errorf("Get error = %v, want ErrDecrypt", err)
				}
			})
		}
	}
}

func TestWrongKeyOrAlgorithm(t *testing.T) {
	key := testKey(t)
	other, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	s, inner := newStore(t, key, encrypt.AES256GCMRSA)
	objecttest.Put(t, s, "k", []byte("secret"))
	for name, algoKey := range map[string]struct {
		key  *rsa.PrivateKey
		algo string
	}{
		"other key":       {other, encrypt.AES256GCMRSA},
		"other algorithm": {key, encrypt.ChaCha20RSA},
	} {
		wrong, err := encrypt.New(inner, algoKey.key, algoKey.algo)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := wrong.Get(context.Background(), "k", 0, -1); !errors.Is(err, encrypt.ErrDecrypt) {
			t.Errorf("%s: Get error = %v, want ErrDecrypt", name, err)
		}
	}
	if _, err := encrypt.New(inner, key, "rot13"); err == nil {
		t.Error("New accepted algorithm rot13")
	}
	if _, err := encrypt.New(inner, nil, encrypt.AES256GCMRSA); err == nil {
		t.Error("New accepted a nil key")
	}
	// Names are case-insensitive.
	if _, err := encrypt.New(inner, key, "AES256GCM-RSA"); err != nil {
		t.Errorf("New with upper-case name: %v", err)
	}
}
