package gateway_test

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"

	"github.com/sluicefs/sluice/internal/gateway"
	"github.com/sluicefs/sluice/internal/meta"
	"github.com/sluicefs/sluice/internal/vfs/pathfs"
	"github.com/sluicefs/sluice/internal/volume"
	"github.com/sluicefs/sluice/internal/volume/volumetest"
)

// selfSigned writes a certificate for 127.0.0.1 and its key as PEM files
// in dir, and returns their paths and a pool that trusts it.
func selfSigned(t *testing.T, dir string) (certFile, keyFile string, pool *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "gateway test"},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), 0o600); err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool = x509.NewCertPool()
	pool.AddCert(cert)
	return certFile, keyFile, pool
}

// TestTLS serves the gateway over HTTPS with --cert-file and --key-file:
// a client that trusts the certificate puts and gets an object, and one
// speaking plain HTTP gets nothing.
func TestTLS(t *testing.T) {
	certFile, keyFile, pool := selfSigned(t, t.TempDir())
	tv := volumetest.New(t, func(f *meta.Format) { f.BlockSize = 4 << 10 })
	fsys := openFS(t, tv.MetaURL)
	addr := freeAddr(t)
	serve(t, fsys, gateway.Config{Addr: addr, CertFile: certFile, KeyFile: keyFile})
	ctx := context.Background()

	c, err := minio.New(addr, &minio.Options{Creds: credentials.NewStaticV4(testAccess, testSecret, ""), Region: "us-east-1",
		Secure: true, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.MakeBucket(ctx, "secure", minio.MakeBucketOptions{}); err != nil {
		t.Fatal(err)
	}
	data := []byte("over TLS")
	if _, err := c.PutObject(ctx, "secure", "a/b", bytes.NewReader(data), int64(len(data)), minio.PutObjectOptions{}); err != nil {
		t.Fatal(err)
	}
	o, err := c.GetObject(ctx, "secure", "a/b", minio.GetObjectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(o)
	o.Close()
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("GET over TLS: %q, %v", got, err)
	}

	plain := client(t, addr, testAccess, testSecret)
	if _, err := plain.ListBuckets(ctx); err == nil {
		t.Error("a plain HTTP client listed the buckets of an HTTPS gateway")
	}
}

// TestSubdir serves one directory of a volume: its directories are the
// buckets, and nothing outside it is one or can be reached by a key.
func TestSubdir(t *testing.T) {
	tv := volumetest.New(t, func(f *meta.Format) { f.BlockSize = 4 << 10 })
	whole := openFS(t, tv.MetaURL)
	ctx := context.Background()
	for _, dir := range []string{"/outside", "/team/inside"} {
		if err := whole.MkdirAll(ctx, dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	opts := volume.Options{Level: volume.FileSystem, Subdir: "team"}
	v, err := volume.Open(ctx, tv.MetaURL, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { v.Close(ctx) })
	addr := freeAddr(t)
	serve(t, pathfs.New(v.VFS(), meta.Cred{Uid: uint32(os.Geteuid()), Gid: uint32(os.Getegid())}, 0o022), gateway.Config{Addr: addr})
	c := client(t, addr, testAccess, testSecret)

	buckets, err := c.ListBuckets(ctx)
	if err != nil || len(buckets) != 1 || buckets[0].Name != "inside" {
		t.Fatalf("buckets %+v, %v; want only inside", buckets, err)
	}
	data := []byte("in the subtree")
	if _, err := c.PutObject(ctx, "inside", "k", bytes.NewReader(data), int64(len(data)), minio.PutObjectOptions{}); err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, whole, "/team/inside/k"); !bytes.Equal(got, data) {
		t.Errorf("the object is %q at /team/inside/k in the volume", got)
	}
	if _, err := c.StatObject(ctx, "outside", "x", minio.StatObjectOptions{}); err == nil {
		t.Error("a directory outside the subtree answered as a bucket")
	}
	if _, err := c.PutObject(ctx, "inside", "../../outside/k", bytes.NewReader(data), int64(len(data)), minio.PutObjectOptions{}); err == nil {
		t.Error("a key with .. was stored")
	}
	if list, err := whole.ReadDir(ctx, "/outside"); err != nil || len(list) != 0 {
		t.Errorf("outside holds %d entries, %v", len(list), err)
	}
}
