package cli

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluicefs/sluice/internal/object/objbench"
	"github.com/sluicefs/sluice/internal/object/s3"
	"github.com/sluicefs/sluice/internal/testserver"
	"github.com/sluicefs/sluice/internal/volume"
)

func TestMoveURLCredentials(t *testing.T) {
	tests := []struct {
		bucket, flagAK, flagSK string
		wantBucket, ak, sk     string
	}{
		{"http://ak:sk@127.0.0.1:9000/b", "", "", "http://127.0.0.1:9000/b", "ak", "sk"},
		{"http://ak:sk@127.0.0.1:9000/b", "flag", "fsk", "http://127.0.0.1:9000/b", "flag", "fsk"},
		{"https://b.s3.amazonaws.com", "", "", "https://b.s3.amazonaws.com", "", ""},
		{"/a/dir", "x", "y", "/a/dir", "x", "y"},
	}
	for _, tt := range tests {
		b, c := moveURLCredentials(tt.bucket, credentials{accessKey: tt.flagAK, secretKey: tt.flagSK})
		if b != tt.wantBucket || c.accessKey != tt.ak || c.secretKey != tt.sk {
			t.Errorf("moveURLCredentials(%q) = %q, %+v; want %q, %s/%s", tt.bucket, b, c, tt.wantBucket, tt.ak, tt.sk)
		}
	}
}

func TestCredentialsEnv(t *testing.T) {
	t.Setenv(envAccessKey, "envak")
	t.Setenv(envSecretKey, "")
	t.Setenv(envSessionToken, "envtok")
	c := credentials{accessKey: "flag", secretKey: "flagsk"}
	if got := c.withEnv(); got != (credentials{"flag", "flagsk", "envtok"}) {
		t.Errorf("withEnv = %+v", got)
	}
	if got := c.envOverride(); got != (credentials{"envak", "flagsk", "envtok"}) {
		t.Errorf("envOverride = %+v", got)
	}
}

// s3Server returns the test server's base URL (without bucket and
// credentials) and its keys.
func s3Server(t *testing.T) (base, ak, sk string) {
	t.Helper()
	u, err := url.Parse(testserver.URL(t, testserver.S3))
	if err != nil {
		t.Fatal(err)
	}
	ak = u.User.Username()
	sk, _ = u.User.Password()
	return u.Scheme + "://" + u.Host, ak, sk
}

func TestFormatS3(t *testing.T) {
	base, ak, sk := s3Server(t)
	var rnd [6]byte
	rand.Read(rnd[:])
	bucket := base + "/sluice-fmt-" + hex.EncodeToString(rnd[:])
	dir := t.TempDir()
	metaURL := "sqlite3://" + filepath.Join(dir, "vol.db")
	ctx := context.Background()
	opts := func() *formatOptions {
		return &formatOptions{storage: "s3", bucket: bucket, blockSize: 4 << 20, compress: "none"}
	}

	// Wrong keys: a one-line error without the secret, and no volume left.
	t.Setenv(envAccessKey, ak)
	t.Setenv(envSecretKey, "wrong-secret-key-1234")
	var out bytes.Buffer
	err := runFormat(ctx, &out, metaURL, "vol", opts())
	if !errors.Is(err, s3.ErrAccessDenied) || strings.Contains(err.Error(), "wrong-secret-key-1234") {
		t.Fatalf("format with a wrong secret key: error = %v, want access denied without the secret", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "vol.db")); !os.IsNotExist(err) {
		t.Errorf("a failed format left the metadata file: %v", err)
	}

	// Keys from the environment; the bucket does not exist yet.
	t.Setenv(envSecretKey, sk)
	if err := runFormat(ctx, &out, metaURL, "vol", opts()); err != nil {
		t.Fatalf("format: %v", err)
	}
	if strings.Contains(out.String(), sk) || !strings.Contains(out.String(), `"SecretKey": "removed"`) {
		t.Errorf("format output shows the secret key or does not say it is removed:\n%s", out.String())
	}
	v, err := openVolume(ctx, metaURL, volume.Metadata, 0)
	if err != nil {
		t.Fatal(err)
	}
	f := v.Format()
	v.Close(ctx)
	if f.AccessKey != ak || f.SecretKey != sk || f.Bucket != bucket {
		t.Errorf("stored format has keys %q/%q and bucket %q; want the environment's and %q", f.AccessKey, f.SecretKey, f.Bucket, bucket)
	}

	// Later commands use the stored keys; the environment overrides them.
	t.Setenv(envAccessKey, "")
	t.Setenv(envSecretKey, "")
	v, err = openVolume(ctx, metaURL, volume.Data, 0)
	if err != nil {
		t.Fatal(err)
	}
	infos, err := v.Objects().List(ctx, "", "", 0)
	if err != nil || len(infos) != 1 || infos[0].Key != "juicefs_uuid" {
		t.Errorf("volume objects = %v, %v; want the juicefs_uuid marker", infos, err)
	}
	t.Cleanup(func() {
		if _, err := objbench.RemoveAll(ctx, v.Objects()); err != nil {
			t.Errorf("empty the bucket: %v", err)
		}
		v.Close(ctx)
	})
	t.Setenv(envSecretKey, "overridden-wrong-key")
	wrong, err := openVolume(ctx, metaURL, volume.Data, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer wrong.Close(ctx)
	if _, err := wrong.Objects().List(ctx, "", "", 1); !errors.Is(err, s3.ErrAccessDenied) {
		t.Errorf("List with SECRET_KEY overriding the stored key: error = %v, want access denied", err)
	}
	t.Setenv(envSecretKey, "")

	// status hides the secret key.
	cmd := newStatus()
	var status bytes.Buffer
	cmd.SetOut(&status)
	cmd.SetArgs([]string{metaURL})
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(status.String(), sk) || !strings.Contains(status.String(), ak) {
		t.Errorf("status shows the secret key, or not the access key:\n%s", status.String())
	}

	// Formatting again without keys keeps the stored ones; keys in the URL
	// of a new volume are moved out of the stored bucket.
	if err := runFormat(ctx, &out, metaURL, "vol", opts()); err != nil {
		t.Fatalf("format again: %v", err)
	}
	metaURL2 := "sqlite3://" + filepath.Join(dir, "vol2.db")
	o := opts()
	o.bucket = strings.Replace(bucket, "://", "://"+ak+":"+sk+"@", 1)
	if err := runFormat(ctx, &out, metaURL2, "vol2", o); err != nil {
		t.Fatalf("format with keys in the bucket URL: %v", err)
	}
	v2, err := openVolume(ctx, metaURL2, volume.Data, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer v2.Close(ctx)
	if f := v2.Format(); f.Bucket != bucket || f.AccessKey != ak || f.SecretKey != sk {
		t.Errorf("format with keys in the URL stored bucket %q and keys %q/%q", f.Bucket, f.AccessKey, f.SecretKey)
	}
	if _, err := objbench.RemoveAll(ctx, v2.Objects()); err != nil {
		t.Errorf("empty the bucket: %v", err)
	}
}
