package e2e

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"os"
	"strings"
	"testing"

	objall "github.com/sluicefs/sluice/internal/object/all"
	"github.com/sluicefs/sluice/internal/testserver"
)

// TestMountOnS3 formats a volume on the S3 test server (the bucket does not
// exist yet), mounts it with the stored keys, and reads a multi-block file
// back in a second mount process.
func TestMountOnS3(t *testing.T) {
	v, s3 := newS3Volume(t, "sluice-e2e-", "--block-size", "1M")
	if out := mustSluice(t, "status", v.metaURL); strings.Contains(out, s3.secretKey) {
		t.Errorf("status shows the secret key:\n%s", out)
	}

	v.mount(t)
	data := make([]byte, 5<<20+12345)
	rand.Read(data)
	if err := os.WriteFile(v.path("f"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	v.umount(t)
	v.mount(t)
	got, err := os.ReadFile(v.path("f"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, data) {
		t.Errorf("read back %d bytes that differ from the %d written", len(got), len(data))
	}
	v.umount(t)

	s, err := objall.Open("s3", s3.bucket, objall.Options{AccessKey: s3.accessKey, SecretKey: s3.secretKey})
	if err != nil {
		t.Fatal(err)
	}
	infos, err := s.List(context.Background(), "vol/chunks/", "", 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(infos) < 6 {
		t.Errorf("bucket holds %d blocks under vol/chunks/, want at least 6 for a 5 MiB file in 1 MiB blocks", len(infos))
	}
}

// s3Bucket is a bucket of its own on the S3 test server.
type s3Bucket struct {
	bucket, accessKey, secretKey string
}

// newS3Volume formats a volume in a new bucket (named prefix and random
// characters, created by the format) of the S3 test server, with the
// server's keys stored in the volume's settings: mounts get no keys from
// the environment. The bucket's objects are deleted when the test ends.
func newS3Volume(t *testing.T, prefix string, formatArgs ...string) (*volume, s3Bucket) {
	t.Helper()
	u, err := url.Parse(testserver.URL(t, testserver.S3))
	if err != nil {
		t.Fatal(err)
	}
	b := s3Bucket{accessKey: u.User.Username()}
	b.secretKey, _ = u.User.Password()
	var rnd [6]byte
	rand.Read(rnd[:])
	b.bucket = u.Scheme + "://" + u.Host + "/" + prefix + hex.EncodeToString(rnd[:])
	t.Setenv("ACCESS_KEY", "")
	t.Setenv("SECRET_KEY", "")
	v := newVolume(t, append([]string{"--storage", "s3", "--bucket", b.bucket, "--access-key", b.accessKey, "--secret-key", b.secretKey}, formatArgs...)...)
	t.Cleanup(func() { b.empty(t) })
	return v, b
}

// empty deletes every object of the bucket.
func (b s3Bucket) empty(t *testing.T) {
	s, err := objall.Open("s3", b.bucket, objall.Options{AccessKey: b.accessKey, SecretKey: b.secretKey})
	if err != nil {
		t.Errorf("clean up: %v", err)
		return
	}
	ctx := context.Background()
	all, err := s.List(ctx, "", "", 0)
	if err != nil {
		t.Errorf("clean up: %v", err)
		return
	}
	for _, info := range all {
		if err := s.Delete(ctx, info.Key); err != nil {
			t.Errorf("clean up: %v", err)
		}
	}
}
