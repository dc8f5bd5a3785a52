package encrypt_test

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/sluicefs/sluice/internal/object/encrypt"
)

func TestParsePrivateKey(t *testing.T) {
	want := testKey(t)
	tests := []struct {
		file, pass string
		wantErr    error
	}{
		{"pkcs1.pem", "", nil},
		{"pkcs1.pem", "ignored", nil},
		{"pkcs8.pem", "", nil},
		{"pkcs1-aes256.pem", passphrase, nil},
		{"pkcs1-aes256.pem", "", encrypt.ErrPassphrase},
		{"pkcs1-aes256.pem", "wrong", encrypt.ErrPassphrase},
		{"pkcs1-des3.pem", passphrase, nil},
		{"pkcs1-des3.pem", "wrong", encrypt.ErrPassphrase},
		{"pkcs8-aes256.pem", passphrase, nil},
		{"pkcs8-aes256.pem", "", encrypt.ErrPassphrase},
		{"pkcs8-aes256.pem", "wrong", encrypt.ErrPassphrase},
		{"pkcs8-aes128-sha1.pem", passphrase, nil},
		{"pkcs8-aes128-sha1.pem", "wrong", encrypt.ErrPassphrase},
		{"pkcs8-des3-sha512.pem", passphrase, nil},
		{"pkcs8-des3-sha512.pem", "wrong", encrypt.ErrPassphrase},
		{"ec.pem", "", encrypt.ErrNotRSA},
		{"ec-pkcs8.pem", "", encrypt.ErrNotRSA},
	}
	for _, tt := range tests {
		t.Run(tt.file+"/"+tt.pass, func(t *testing.T) {
			pemBytes, err := os.ReadFile(filepath.Join("testdata", tt.file))
			if err != nil {
				t.Fatal(err)
			}
			key, err := encrypt.ParsePrivateKey(pemBytes, []byte(tt.pass))
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Errorf("error = %v, want %v", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !key.Equal(want) {
				t.Errorf("parsed a different key")
			}
		})
	}
}

func TestParsePrivateKeyBadInput(t *testing.T) {
	pkcs1, err := os.ReadFile(filepath.Join("testdata", "pkcs1.pem"))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		in   string
	}{
		{"empty", ""},
		{"not PEM", "hello"},
		{"certificate", "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"},
		{"bad body", "-----BEGIN RSA PRIVATE KEY-----\nAAAA\n-----END RSA PRIVATE KEY-----\n"},
		{"cut short", string(pkcs1[:len(pkcs1)/2])},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := encrypt.ParsePrivateKey([]byte(tt.in), nil); !errors.Is(err, encrypt.ErrBadPEM) {
				t.Errorf("error = %v, want ErrBadPEM", err)
			}
		})
	}
}
