package e2e

import (
	"bytes"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// writeRSAKey writes a new 2048-bit RSA private key as PEM to dir/name,
// encrypted with passphrase when it is not empty.
func writeRSAKey(t *testing.T, dir, name, passphrase string) string {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	block := &pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)}
	if passphrase != "" {
		//lint:ignore SA1019 legacy encrypted PEM is what `openssl genrsa -aes256` wrote for years; users have such keys.
		block, err = x509.EncryptPEMBlock(rand.Reader, block.Type, block.Bytes, []byte(passphrase), x509.PEMCipherAES256) //nolint:staticcheck
		if err != nil {
			t.Fatal(err)
		}
	}
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, pem.EncodeToMemory(block), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestEncryptedVolume formats volumes with --encrypt-rsa-key, writes
// through a mount and checks that the stored blocks do not hold the data
// and that it reads back after a remount; a passphrase-protected key needs
// SLUICE_RSA_PASSPHRASE.
func TestEncryptedVolume(t *testing.T) {
	for _, tt := range []struct {
		name, algo, passphrase, compress string
	}{
		{"aes256gcm-rsa", "aes256gcm-rsa", "", "none"},
		{"chacha20-rsa with lz4 and a passphrase", "chacha20-rsa", "s3cret words", "lz4"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			keyDir := t.TempDir()
			key := writeRSAKey(t, keyDir, "key.pem", tt.passphrase)
			t.Setenv("SLUICE_RSA_PASSPHRASE", tt.passphrase)
			v := newVolume(t, "--encrypt-rsa-key", key, "--encrypt-algo", tt.algo, "--compress", tt.compress)
			status := mustSluice(t, "status", v.metaURL)
			if strings.Contains(status, "PRIVATE KEY") || !strings.Contains(status, tt.algo) {
				t.Fatalf("status shows the key or not the algorithm:\n%s", status)
			}
			v.mount(t)
			data := bytes.Repeat([]byte("plain text that must not be stored as is; "), 100_000)
			write(t, v.path("f"), data)
			v.umount(t)
			for _, k := range v.blockKeys(t) {
				b, err := os.ReadFile(filepath.Join(v.bucket, "vol", k))
				if err != nil {
					t.Fatal(err)
				}
				if bytes.Contains(b, []byte("plain text")) {
					t.Fatalf("block %s holds plain text", k)
				}
			}
			if tt.passphrase != "" {
				t.Setenv("SLUICE_RSA_PASSPHRASE", "")
				r := sluice(t, "mount", "-d", v.metaURL, v.mnt, "--log", v.log, "--cache-dir", filepath.Join(v.dir, "cache2"))
				if r.code == 0 || !strings.Contains(r.stderr, "SLUICE_RSA_PASSPHRASE") {
					t.Fatalf("mount without the passphrase: exit %d, stderr %q", r.code, r.stderr)
				}
				t.Setenv("SLUICE_RSA_PASSPHRASE", tt.passphrase)
			}
			// A fresh cache: the data must come from the bucket, decrypted.
			v.mount(t, "--cache-dir", filepath.Join(v.dir, "cache3"))
			if got, err := os.ReadFile(v.path("f")); err != nil || !bytes.Equal(got, data) {
				t.Fatalf("read back %d bytes (%v), want %d", len(got), err, len(data))
			}
			v.umount(t)
			v.wantFsckClean(t)
		})
	}
}

// TestEncryptBadKey checks format's errors for an unusable key.
func TestEncryptBadKey(t *testing.T) {
	requireFUSE(t)
	dir := t.TempDir()
	notKey := filepath.Join(dir, "not.pem")
	if err := os.WriteFile(notKey, []byte("hello"), 0o600); err != nil {
		t.Fatal(err)
	}
	locked := writeRSAKey(t, dir, "locked.pem", "right")
	t.Setenv("SLUICE_RSA_PASSPHRASE", "wrong")
	for _, tt := range []struct {
		name string
		args []string
		want string
	}{
		{"missing file", []string{"--encrypt-rsa-key", filepath.Join(dir, "none.pem")}, "no such file"},
		{"not PEM", []string{"--encrypt-rsa-key", notKey}, "--encrypt-rsa-key"},
		{"wrong passphrase", []string{"--encrypt-rsa-key", locked}, "passphrase"},
		{"unknown algorithm", []string{"--encrypt-rsa-key", locked, "--encrypt-algo", "rot13"}, "--encrypt-algo"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			meta := "sqlite3://" + filepath.Join(t.TempDir(), "meta.db")
			r := sluice(t, append([]string{"format", meta, "vol", "--bucket", filepath.Join(t.TempDir(), "b")}, tt.args...)...)
			if r.code == 0 || !strings.Contains(r.stderr, tt.want) || strings.Count(strings.TrimSpace(r.stderr), "\n") > 0 {
				t.Fatalf("format: exit %d, stderr %q; want a one-line error with %q", r.code, r.stderr, tt.want)
			}
		})
	}
}
