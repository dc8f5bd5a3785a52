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
	u, err := url.Parse(testserver.URL(t, testserver.S3))
	if err != nil {
		t.Fatal(err)
	}
	ak := u.User.Username()
	sk, _ := u.User.Password()
	var rnd [6]byte
	rand.Read(rnd[:])
	bucket := u.Scheme + "://" + u.Host + "/sluice-e2e-" + hex.EncodeToString(rnd[:])
	// The mount gets no keys from the environment: it must use the stored ones.
	t.Setenv("ACCESS_KEY", "")
	t.Setenv("SECRET_KEY", "")
	v := newVolume(t, "--storage", "s3", "--bucket", bucket, "--access-key", ak, "--secret-key", sk, "--block-size", "1M")
	if out := mustSluice(t, "status", v.metaURL); strings.Contains(out, sk) {
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

	s, err := objall.Open("s3", bucket, objall.Options{AccessKey: ak, SecretKey: sk})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	infos, err := s.List(ctx, "vol/chunks/", "", 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(infos) < 6 {
		t.Errorf("bucket holds %d blocks under vol/chunks/, want at least 6 for a 5 MiB file in 1 MiB blocks", len(infos))
	}
	all, err := s.List(ctx, "", "", 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, info := range all {
		if err := s.Delete(ctx, info.Key); err != nil {
			t.Errorf("clean up: %v", err)
		}
	}
}
