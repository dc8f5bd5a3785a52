package encrypt_test

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/binary"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/sluicefs/sluice/internal/object/encrypt"
	"github.com/sluicefs/sluice/internal/object/objecttest"

	"github.com/sluicefs/sluice/internal/testserver"
)

// openssl runs the openssl command with args and stdin, skipping the test
// loudly (failing it under CI=true) when openssl is not installed.
func openssl(t *testing.T, stdin []byte, args ...string) []byte {
	t.Helper()
	path, err := exec.LookPath("openssl")
	if err != nil {
		testserver.Missing(t, "openssl is not installed", "apt-get install openssl")
	}
	cmd := exec.Command(path, args...)
	cmd.Stdin = bytes.NewReader(stdin)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("openssl %v: %v\n%s", args, err, stderr.String())
	}
	return out
}

// oaepArgs are the pkeyutl options of RSA-OAEP with SHA-256 and the label
// "keys" (hex 6b657973).
var oaepArgs = []string{
	"-pkeyopt", "rsa_padding_mode:oaep", "-pkeyopt", "rsa_oaep_md:sha256",
	"-pkeyopt", "rsa_mgf1_md:sha256", "-pkeyopt", "rsa_oaep_label:6b657973",
}

// TestOpenSSLKeys parses keys made by openssl genrsa, encrypted the way
// OpenSSL 3 does by default (PKCS#8) and the traditional way.
func TestOpenSSLKeys(t *testing.T) {
	dir := t.TempDir()
	for _, tt := range []struct {
		name string
		args []string
	}{
		{"genrsa-aes256", []string{"genrsa", "-aes256"}},
		{"genrsa-traditional-aes256", []string{"genrsa", "-traditional", "-aes256"}},
		{"genrsa-plain", []string{"genrsa"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(dir, tt.name+".pem")
			args := append(tt.args, "-out", path)
			if len(tt.args) > 1 {
				args = append(args, "-passout", "pass:"+passphrase)
			}
			openssl(t, nil, append(args, "2048")...)
			pemBytes, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			key, err := encrypt.ParsePrivateKey(pemBytes, []byte(passphrase))
			if err != nil {
				t.Fatalf("ParsePrivateKey: %v", err)
			}
			s, _ := newStore(t, key, encrypt.AES256GCMRSA)
			objecttest.Put(t, s, "k", []byte("data"))
			if got := objecttest.Get(t, s, "k", 0, -1); string(got) != "data" {
				t.Errorf("round trip gave %q", got)
			}
		})
	}
}

// TestOpenSSLWrapping checks the RSA-OAEP parameters against an
// independent implementation: openssl unwraps the data key of an object
// the store wrote, and the store reads an object whose data key openssl
// wrapped.
func TestOpenSSLWrapping(t *testing.T) {
	keyPath := filepath.Join("testdata", "pkcs1.pem")
	key := testKey(t)
	data := objecttest.Data(3, 5000)
	s, inner := newStore(t, key, encrypt.AES256GCMRSA)

	// The store wraps, openssl unwraps.
	objecttest.Put(t, s, "ours", data)
	raw := objecttest.Get(t, inner, "ours", 0, -1)
	wrapped := raw[3 : 3+key.Size()]
	dataKey := openssl(t, wrapped, append([]string{"pkeyutl", "-decrypt", "-inkey", keyPath}, oaepArgs...)...)
	nonce := raw[3+key.Size() : 3+key.Size()+12]
	if got, err := gcm(t, dataKey).Open(nil, nonce, raw[3+key.Size()+12:], nil); err != nil || !bytes.Equal(got, data) {
		t.Errorf("the data key openssl unwrapped does not open the object: %v", err)
	}

	// openssl wraps, the store unwraps.
	pubPath := filepath.Join(t.TempDir(), "pub.pem")
	openssl(t, nil, "rsa", "-in", keyPath, "-pubout", "-out", pubPath)
	dataKey = make([]byte, 32)
	rand.Read(dataKey)
	wrapped = openssl(t, dataKey, append([]string{"pkeyutl", "-encrypt", "-pubin", "-inkey", pubPath}, oaepArgs...)...)
	nonce = make([]byte, 12)
	rand.Read(nonce)
	obj := binary.BigEndian.AppendUint16(nil, uint16(len(wrapped)))
	obj = append(obj, byte(len(nonce)))
	obj = append(obj, wrapped...)
	obj = append(obj, nonce...)
	obj = gcm(t, dataKey).Seal(obj, nonce, data, nil)
	objecttest.Put(t, inner, "theirs", obj)
	if got := objecttest.Get(t, s, "theirs", 100, 50); !bytes.Equal(got, data[100:150]) {
		t.Errorf("Get of an object wrapped by openssl returned wrong bytes")
	}
}

// gcm returns AES-256-GCM with key.
func gcm(t *testing.T, key []byte) cipher.AEAD {
	t.Helper()
	block, err := aes.NewCipher(key)
	if err != nil {
		t.Fatal(err)
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		t.Fatal(err)
	}
	return aead
}
