package e2e

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluicefs/sluice/internal/testserver"
)

// TestGateway serves a volume with `sluice gateway` and drives it with
// boto3, AWS's own S3 client: what boto3 uploads (an object with
// metadata, a multipart one) a FUSE mount of the volume reads, and what
// the mount writes boto3 downloads, lists, copies and fetches by a
// presigned URL; a wrong secret gets nothing.
func TestGateway(t *testing.T) {
	python, err := exec.LookPath("python3")
	if err != nil {
		testserver.Missing(t, "python3 is not installed", "apt-get install python3")
	}
	if out, err := exec.Command(python, "-c", "import boto3").CombinedOutput(); err != nil {
		testserver.Missing(t, "boto3 is not installed: "+strings.TrimSpace(string(out)), "apt-get install python3-boto3")
	}
	script, err := filepath.Abs("testdata/gateway_boto3.py")
	if err != nil {
		t.Fatal(err)
	}
	requireFUSE(t)
	v := newVolume(t)
	addr := freeAddr(t)
	const access, secret = "e2eaccess", "e2e-secret-key"
	serveVolume(t, "gateway", "served over S3", []string{"MINIO_ROOT_USER=" + access, "MINIO_ROOT_PASSWORD=" + secret},
		v.metaURL, addr, "--cache-dir", filepath.Join(v.dir, "gateway-cache"))
	v.mount(t)

	dir := t.TempDir()
	small := bytes.Repeat([]byte("sluice over s3\n"), 100_000) // 1.5 MB
	big := make([]byte, 12<<20+12345)                          // three parts of 5 MiB at most
	for i := range big {
		big[i] = byte(i % 251)
	}
	for name, data := range map[string][]byte{"small.bin": small, "big.bin": big} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	run := func(phase string) {
		t.Helper()
		out, err := exec.Command(python, script, "http://"+addr, access, secret, phase, dir).CombinedOutput()
		if err != nil || !strings.Contains(string(out), "ok "+phase) {
			t.Fatalf("boto3 %s: %v\n%s", phase, err, out)
		}
	}
	run("put")
	// The mount reads what boto3 uploaded, at once.
	for name, data := range map[string][]byte{"small.bin": small, "big.bin": big} {
		got, err := os.ReadFile(v.path("e2e/dir/" + name))
		if err != nil || !bytes.Equal(got, data) {
			t.Fatalf("the mount reads %s: %d bytes of %d, %v", name, len(got), len(data), err)
		}
	}
	if _, err := exec.LookPath("getfattr"); err == nil {
		out, err := exec.Command("getfattr", "--only-values", "-n", "user.s3.content-type", v.path("e2e/dir/small.bin")).Output()
		if err != nil || string(out) != "text/x-test" {
			t.Errorf("the content type as an xattr on the mount: %q, %v", out, err)
		}
	}
	// boto3 reads what the mount writes.
	const fromMount = "written by a mount, read over S3\n"
	if err := os.WriteFile(v.path("e2e/dir/from-mount.txt"), []byte(fromMount), 0o644); err != nil {
		t.Fatal(err)
	}
	run("get")
	if got, err := os.ReadFile(filepath.Join(dir, "from-mount.txt")); err != nil || string(got) != fromMount {
		t.Fatalf("boto3 downloaded %q, %v", got, err)
	}
	// The delete and the copy are on the mount; the kernel may keep a
	// removed name for its entry cache time (1 s).
	if got, err := os.ReadFile(v.path("e2e/copied/small.bin")); err != nil || !bytes.Equal(got, small) {
		t.Fatalf("the mount reads the copy: %d bytes, %v", len(got), err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		_, err := os.Stat(v.path("e2e/dir/small.bin"))
		if os.IsNotExist(err) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the mount 5s after a DELETE: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
