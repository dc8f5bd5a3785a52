package dump

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/md5"
	"crypto/sha256"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"strings"

	"github.com/sluicefs/sluice/internal/meta"
)

// In the dump format (as JuiceFS writes and reads it) KeyEncrypted says
// that EncryptKey, SecretKey and SessionToken are sealed with the volume's
// UUID: base64 of a 12-byte nonce and AES-GCM under MD5(UUID). It hides
// them from a casual reader of the file, not from one who has it whole.
// In Sluice's own settings KeyEncrypted says instead that the PEM key has
// a passphrase. Dump seals the three and sets KeyEncrypted; load unseals
// them and sets it from the PEM.

func sealer(uuid string) (cipher.AEAD, error) {
	key := md5.Sum([]byte(uuid))
	block, err := aes.NewCipher(key[:])
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(block)
}

// sealSecrets seals the secrets of f that are set for the dump.
func sealSecrets(f *meta.Format) error {
	aead, err := sealer(f.UUID)
	if err != nil {
		return fmt.Errorf("seal secrets: %w", err)
	}
	f.KeyEncrypted = false
	for _, p := range []*string{&f.SecretKey, &f.SessionToken, &f.EncryptKey} {
		if *p == "" || *p == "removed" {
			continue
		}
		// The nonce is derived from the value, so that a dump of an
		// unchanged volume is the same file; distinct values never
		// share a nonce.
		sum := sha256.Sum256([]byte(*p))
		nonce := sum[:aead.NonceSize()]
		*p = base64.StdEncoding.EncodeToString(aead.Seal(bytes.Clone(nonce), nonce, []byte(*p), nil))
		f.KeyEncrypted = true
	}
	return nil
}

// unsealSecrets reverses sealSecrets on settings read from a dump, and
// sets KeyEncrypted as Sluice means it.
func unsealSecrets(f *meta.Format) error {
	if f.KeyEncrypted {
		aead, err := sealer(f.UUID)
		if err != nil {
			return fmt.Errorf("unseal secrets: %w", err)
		}
		for _, x := range []struct {
			name string
			p    *string
		}{{"SecretKey", &f.SecretKey}, {"SessionToken", &f.SessionToken}, {"EncryptKey", &f.EncryptKey}} {
			if *x.p == "" || *x.p == "removed" || strings.HasPrefix(*x.p, "-----BEGIN") {
				continue
			}
			b, err := base64.StdEncoding.DecodeString(*x.p)
			if err != nil || len(b) < aead.NonceSize() {
				return fmt.Errorf("Setting %s: not sealed with the volume UUID as KeyEncrypted says (bad base64)", x.name)
			}
			plain, err := aead.Open(nil, b[:aead.NonceSize()], b[aead.NonceSize():], nil)
			if err != nil {
				return fmt.Errorf("Setting %s: does not unseal with the volume UUID %s (was the UUID changed?)", x.name, f.UUID)
			}
			*x.p = string(plain)
		}
	}
	f.KeyEncrypted = pemEncrypted(f.EncryptKey)
	return nil
}

// pemEncrypted reports whether a PEM private key has a passphrase.
func pemEncrypted(key string) bool {
	block, _ := pem.Decode([]byte(key))
	if block == nil {
		return false
	}
	_, legacy := block.Headers["DEK-Info"]
	return block.Type == "ENCRYPTED PRIVATE KEY" || legacy
}
