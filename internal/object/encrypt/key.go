package encrypt

import (
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
)

// PassphraseEnv names the environment variable that holds the passphrase
// of an encrypted RSA key, so that it never appears on a command line.
const PassphraseEnv = "SLUICE_RSA_PASSPHRASE"

// PassphraseEnvJuiceFS is the variable JuiceFS reads for the same
// passphrase; Passphrase falls back to it, so that a migrated volume
// mounts with the environment its users already set.
const PassphraseEnvJuiceFS = "JFS_RSA_PASSPHRASE"

// Passphrase returns the passphrase of the environment: PassphraseEnv, or
// PassphraseEnvJuiceFS when that is unset.
func Passphrase() string {
	if p := os.Getenv(PassphraseEnv); p != "" {
		return p
	}
	return os.Getenv(PassphraseEnvJuiceFS)
}

// Errors of ParsePrivateKey, tested with errors.Is.
var (
	// ErrBadPEM reports input that holds no usable PEM private key.
	ErrBadPEM = errors.New("not a PEM private key")
	// ErrPassphrase reports a missing or wrong passphrase.
	ErrPassphrase = errors.New("wrong or missing passphrase")
	// ErrNotRSA reports a private key of another kind than RSA.
	ErrNotRSA = errors.New("not an RSA key")
)

// ParsePrivateKey parses the first PEM block of pemBytes as an RSA private
// key. It accepts PKCS#1 ("RSA PRIVATE KEY") and PKCS#8 ("PRIVATE KEY")
// keys, keys in legacy encrypted PEM (Proc-Type: 4,ENCRYPTED, as written
// by `openssl genrsa -traditional -aes256`) and encrypted PKCS#8
// ("ENCRYPTED PRIVATE KEY", PBES2 with PBKDF2 and AES-CBC or 3DES-CBC, as
// written by `openssl genrsa -aes256` from OpenSSL 3 on). passphrase is
// used only for an encrypted key and may be nil otherwise.
func ParsePrivateKey(pemBytes, passphrase []byte) (*rsa.PrivateKey, error) {
	block, _ := pem.Decode(pemBytes)
	if block == nil {
		return nil, fmt.Errorf("parse RSA key: %w: no PEM block found", ErrBadPEM)
	}
	der := block.Bytes
	encrypted := false
	switch block.Type {
	case "RSA PRIVATE KEY", "PRIVATE KEY":
		// Legacy encrypted PEM is deprecated (its padding check is weak)
		// but it is what `openssl genrsa -traditional -aes256` writes.
		//lint:ignore SA1019 users' existing keys are in this format
		if x509.IsEncryptedPEMBlock(block) {
			if len(passphrase) == 0 {
				return nil, fmt.Errorf("parse RSA key: %w: the key is encrypted", ErrPassphrase)
			}
			var err error
			//lint:ignore SA1019 see above
			der, err = x509.DecryptPEMBlock(block, passphrase)
			if errors.Is(err, x509.IncorrectPasswordError) {
				return nil, fmt.Errorf("parse RSA key: %w", ErrPassphrase)
			}
			if err != nil {
				return nil, fmt.Errorf("parse RSA key: %w: decrypt: %w", ErrBadPEM, err)
			}
			encrypted = true
		}
	case "ENCRYPTED PRIVATE KEY":
		if len(passphrase) == 0 {
			return nil, fmt.Errorf("parse RSA key: %w: the key is encrypted", ErrPassphrase)
		}
		var err error
		der, err = decryptPKCS8(der, passphrase)
		if err != nil {
			return nil, fmt.Errorf("parse RSA key: %w", err)
		}
		encrypted = true
	case "EC PRIVATE KEY", "DSA PRIVATE KEY", "OPENSSH PRIVATE KEY":
		return nil, fmt.Errorf("parse RSA key: %w: PEM block is %q", ErrNotRSA, block.Type)
	default:
		return nil, fmt.Errorf("parse RSA key: %w: unexpected PEM block %q", ErrBadPEM, block.Type)
	}
	key, err := parseDER(der)
	if err != nil && encrypted && !errors.Is(err, ErrNotRSA) {
		// A wrong passphrase passes the padding check now and then and
		// leaves garbage.
		return nil, fmt.Errorf("parse RSA key: %w (%w)", ErrPassphrase, err)
	}
	if err != nil {
		return nil, fmt.Errorf("parse RSA key: %w", err)
	}
	return key, nil
}

// parseDER parses a PKCS#1 or PKCS#8 private key and requires it to be
// RSA.
func parseDER(der []byte) (*rsa.PrivateKey, error) {
	if key, err := x509.ParsePKCS1PrivateKey(der); err == nil {
		return key, nil
	}
	key, err := x509.ParsePKCS8PrivateKey(der)
	if err != nil {
		if _, ecErr := x509.ParseECPrivateKey(der); ecErr == nil {
			return nil, fmt.Errorf("%w: an EC key", ErrNotRSA)
		}
		return nil, fmt.Errorf("%w: neither PKCS#1 nor PKCS#8: %w", ErrBadPEM, err)
	}
	rsaKey, ok := key.(*rsa.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("%w: a %T", ErrNotRSA, key)
	}
	return rsaKey, nil
}
