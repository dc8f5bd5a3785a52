package gateway_test

import (
	"bytes"
	"context"
	"crypto/md5"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"

	"github.com/sluicefs/sluice/internal/gateway"
	"github.com/sluicefs/sluice/internal/meta"
	"github.com/sluicefs/sluice/internal/object"
	"github.com/sluicefs/sluice/internal/vfs/pathfs"
	"github.com/sluicefs/sluice/internal/volume"
	"github.com/sluicefs/sluice/internal/volume/volumetest"
)

const (
	testAccess = "sluiceaccess"
	testSecret = "sluice-secret-key"
)

// env is a gateway served over a new volume, with a client of it, and
// another client of the volume (as a mount of it would be).
type env struct {
	addr    string
	s3      *minio.Client
	core    *minio.Core
	fs      *pathfs.FS // the tree the gateway serves
	other   *pathfs.FS // the same volume, opened again
	metaURL string
	// putBytes counts the bytes the gateway's client of the volume
	// stored in the bucket.
	putBytes *atomic.Int64
}

// countingBucket counts the bytes stored through it.
type countingBucket struct {
	object.Store
	n *atomic.Int64
}

func (c countingBucket) Put(ctx context.Context, key string, r io.Reader) error {
	b, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	c.n.Add(int64(len(b)))
	return c.Store.Put(ctx, key, bytes.NewReader(b))
}

func openFS(t testing.TB, metaURL string) *pathfs.FS {
	t.Helper()
	return openCountingFS(t, metaURL, nil)
}

// openCountingFS is openFS, counting the bytes stored into n when n is
// not nil.
func openCountingFS(t testing.TB, metaURL string, n *atomic.Int64) *pathfs.FS {
	t.Helper()
	ctx := context.Background()
	opts := volume.Options{Level: volume.FileSystem}
	if n != nil {
		opts.WrapBucket = func(s object.Store) (object.Store, error) { return countingBucket{s, n}, nil }
	}
	v, err := volume.Open(ctx, metaURL, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := v.Close(ctx); err != nil {
			t.Errorf("close volume: %v", err)
		}
	})
	return pathfs.New(v.VFS(), meta.Cred{Uid: uint32(os.Geteuid()), Gid: uint32(os.Getegid())}, 0o022)
}

func freeAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// start serves a new volume until the test ends.
func start(t testing.TB) *env {
	t.Helper()
	tv := volumetest.New(t, func(f *meta.Format) { f.BlockSize = 4 << 10 }) // 4 MiB blocks, a volume's default
	e := &env{addr: freeAddr(t), metaURL: tv.MetaURL, putBytes: new(atomic.Int64)}
	e.fs = openCountingFS(t, tv.MetaURL, e.putBytes)
	e.other = openFS(t, tv.MetaURL)
	serve(t, e.fs, gateway.Config{Addr: e.addr})
	e.s3 = client(t, e.addr, testAccess, testSecret)
	e.core = &minio.Core{Client: e.s3}
	return e
}

// serve serves fsys as cfg says, with the test's credentials, until the
// test ends. Call it after opening the volume: the gateway stops first.
func serve(t testing.TB, fsys *pathfs.FS, cfg gateway.Config) {
	t.Helper()
	cfg.AccessKey, cfg.Secret = testAccess, testSecret
	ctx, cancel := context.WithCancel(context.Background())
	listening := make(chan struct{})
	cfg.Listening = func() { close(listening) }
	done := make(chan error, 1)
	go func() { done <- gateway.Serve(ctx, fsys, cfg) }()
	select {
	case <-listening:
	case err := <-done:
		cancel()
		t.Fatalf("gateway: %v", err)
	case <-time.After(30 * time.Second):
		cancel()
		t.Fatal("the gateway does not listen after 30s")
	}
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("gateway: %v", err)
			}
		case <-time.After(30 * time.Second):
			t.Error("the gateway still serves 30s after it was told to stop")
		}
	})
}

func client(t testing.TB, addr, access, secret string) *minio.Client {
	t.Helper()
	c, err := minio.New(addr, &minio.Options{Creds: credentials.NewStaticV4(access, secret, ""), Region: "us-east-1"})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func (e *env) put(t testing.TB, bucket, key string, data []byte, opts minio.PutObjectOptions) minio.UploadInfo {
	t.Helper()
	info, err := e.s3.PutObject(context.Background(), bucket, key, bytes.NewReader(data), int64(len(data)), opts)
	if err != nil {
		t.Fatalf("put %s/%s: %v", bucket, key, err)
	}
	return info
}

func (e *env) get(t testing.TB, bucket, key string, opts minio.GetObjectOptions) []byte {
	t.Helper()
	o, err := e.s3.GetObject(context.Background(), bucket, key, opts)
	if err != nil {
		t.Fatalf("get %s/%s: %v", bucket, key, err)
	}
	defer o.Close()
	b, err := io.ReadAll(o)
	if err != nil {
		t.Fatalf("get %s/%s: %v", bucket, key, err)
	}
	return b
}

func errCode(err error) string { return minio.ToErrorResponse(err).Code }

func readFile(t testing.TB, f *pathfs.FS, name string) []byte {
	t.Helper()
	h, err := f.OpenFile(context.Background(), name, os.O_RDONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	b, err := io.ReadAll(h)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func writeFile(t testing.TB, f *pathfs.FS, name string, data []byte) {
	t.Helper()
	h, err := f.OpenFile(context.Background(), name, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := h.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestBuckets checks buckets are the directories at the root.
func TestBuckets(t *testing.T) {
	e := start(t)
	ctx := context.Background()
	for _, b := range []string{"beta", "alpha"} {
		if err := e.s3.MakeBucket(ctx, b, minio.MakeBucketOptions{}); err != nil {
			t.Fatalf("make bucket %s: %v", b, err)
		}
	}
	if err := e.s3.MakeBucket(ctx, "alpha", minio.MakeBucketOptions{}); errCode(err) != "BucketAlreadyOwnedByYou" {
		t.Fatalf("make bucket again: %v", err)
	}
	// A directory a mount makes is a bucket; a file is not.
	if err := e.other.Mkdir(ctx, "/gamma", 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, e.other, "/afile", []byte("x"))
	list, err := e.s3.ListBuckets(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, b := range list {
		names = append(names, b.Name)
	}
	if got := strings.Join(names, " "); got != "alpha beta gamma" {
		t.Fatalf("buckets %q, want alpha beta gamma (not the gateway's own directory, nor a file)", got)
	}
	if ok, err := e.s3.BucketExists(ctx, "gamma"); !ok || err != nil {
		t.Fatalf("HeadBucket gamma: %v %v", ok, err)
	}
	if ok, err := e.s3.BucketExists(ctx, "nope"); ok || err != nil {
		t.Fatalf("HeadBucket of a missing bucket: %v %v", ok, err)
	}
	e.put(t, "beta", "k", []byte("v"), minio.PutObjectOptions{})
	if err := e.s3.RemoveBucket(ctx, "beta"); errCode(err) != "BucketNotEmpty" {
		t.Fatalf("remove a bucket with an object: %v", err)
	}
	if err := e.s3.RemoveObject(ctx, "beta", "k", minio.RemoveObjectOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := e.s3.RemoveBucket(ctx, "beta"); err != nil {
		t.Fatalf("remove an empty bucket: %v", err)
	}
	if _, err := e.other.Stat(ctx, "/beta"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("the directory of a removed bucket: %v", err)
	}
}

// TestObjects checks the calls on objects, and that they are files that
// another client of the volume sees, and the other way round.
func TestObjects(t *testing.T) {
	e := start(t)
	ctx := context.Background()
	if err := e.s3.MakeBucket(ctx, "bkt", minio.MakeBucketOptions{}); err != nil {
		t.Fatal(err)
	}
	data := make([]byte, 3<<20+517)
	for i := range data {
		data[i] = byte(i * 7 / 3)
	}
	info := e.put(t, "bkt", "dir/sub/obj.bin", data, minio.PutObjectOptions{
		ContentType: "application/x-test", UserMetadata: map[string]string{"Color": "blue", "shape": "round"}})
	if want := fmt.Sprintf("%x", md5sum(data)); info.ETag != want {
		t.Fatalf("ETag %s, want the MD5 %s", info.ETag, want)
	}
	// The other client sees the file at once, directories made.
	if got := readFile(t, e.other, "/bkt/dir/sub/obj.bin"); !bytes.Equal(got, data) {
		t.Fatalf("the other client reads %d bytes, not the %d put", len(got), len(data))
	}
	if v, err := e.other.GetXattr(ctx, "/bkt/dir/sub/obj.bin", "user.s3.content-type"); err != nil || string(v) != "application/x-test" {
		t.Fatalf("content type as an xattr: %q %v", v, err)
	}
	if got := e.get(t, "bkt", "dir/sub/obj.bin", minio.GetObjectOptions{}); !bytes.Equal(got, data) {
		t.Fatal("GET returns other bytes than PUT wrote")
	}
	st, err := e.s3.StatObject(ctx, "bkt", "dir/sub/obj.bin", minio.StatObjectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if st.Size != int64(len(data)) || st.ContentType != "application/x-test" || st.ETag != info.ETag ||
		st.UserMetadata["Color"] != "blue" || st.UserMetadata["Shape"] != "round" {
		t.Fatalf("HEAD: size %d type %q etag %s metadata %v", st.Size, st.ContentType, st.ETag, st.UserMetadata)
	}
	// Ranged GETs.
	for _, r := range []struct{ start, end int64 }{{0, 0}, {1 << 20, 2<<20 + 99}, {int64(len(data)) - 10, int64(len(data)) - 1}} {
		var o minio.GetObjectOptions
		if err := o.SetRange(r.start, r.end); err != nil {
			t.Fatal(err)
		}
		if got := e.get(t, "bkt", "dir/sub/obj.bin", o); !bytes.Equal(got, data[r.start:r.end+1]) {
			t.Fatalf("range %d-%d: %d bytes, not those asked for", r.start, r.end, len(got))
		}
	}
	var o minio.GetObjectOptions
	o.SetRange(int64(len(data))+5, int64(len(data))+10)
	if _, _, _, err := e.core.GetObject(ctx, "bkt", "dir/sub/obj.bin", o); errCode(err) != "InvalidRange" {
		t.Fatalf("a range past the end: %v", err)
	}
	// Missing objects, and a directory that is no object.
	for _, k := range []string{"nope", "dir/sub", "dir/sub/obj.bin/x"} {
		if _, err := e.s3.StatObject(ctx, "bkt", k, minio.StatObjectOptions{}); errCode(err) != "NoSuchKey" && !strings.Contains(err.Error(), "not exist") {
			t.Errorf("HEAD %s: %v", k, err)
		}
	}
	// Copy, with the metadata and with new metadata.
	if _, err := e.s3.CopyObject(ctx, minio.CopyDestOptions{Bucket: "bkt", Object: "copy1"}, minio.CopySrcOptions{Bucket: "bkt", Object: "dir/sub/obj.bin"}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.s3.CopyObject(ctx, minio.CopyDestOptions{Bucket: "bkt", Object: "x/copy2", ReplaceMetadata: true, UserMetadata: map[string]string{"Color": "red"}},
		minio.CopySrcOptions{Bucket: "bkt", Object: "dir/sub/obj.bin"}); err != nil {
		t.Fatal(err)
	}
	for k, color := range map[string]string{"copy1": "blue", "x/copy2": "red"} {
		if got := e.get(t, "bkt", k, minio.GetObjectOptions{}); !bytes.Equal(got, data) {
			t.Fatalf("%s: other bytes than the source's", k)
		}
		st, err := e.s3.StatObject(ctx, "bkt", k, minio.StatObjectOptions{})
		if err != nil || st.UserMetadata["Color"] != color || st.ETag != info.ETag {
			t.Fatalf("%s: metadata %v etag %s, %v; want color %s, etag %s", k, st.UserMetadata, st.ETag, err, color, info.ETag)
		}
	}
	// A file another client writes is an object, of an ETag that changes
	// when the file does.
	writeFile(t, e.other, "/bkt/dir/fromfs.txt", []byte("written by a mount"))
	if got := e.get(t, "bkt", "dir/fromfs.txt", minio.GetObjectOptions{}); string(got) != "written by a mount" {
		t.Fatalf("GET of a file another client wrote: %q", got)
	}
	if st, err := e.s3.StatObject(ctx, "bkt", "dir/fromfs.txt", minio.StatObjectOptions{}); err != nil || st.ContentType != "binary/octet-stream" || st.Size != 18 {
		t.Fatalf("HEAD of a file another client wrote: type %q size %d, %v", st.ContentType, st.Size, err)
	}
	writeFile(t, e.other, "/bkt/copy1", []byte("changed by a mount"))
	if got := e.get(t, "bkt", "copy1", minio.GetObjectOptions{}); string(got) != "changed by a mount" {
		t.Fatalf("GET after another client changed the file: %q", got)
	}
	if st, err := e.s3.StatObject(ctx, "bkt", "copy1", minio.StatObjectOptions{}); err != nil || st.ETag == info.ETag || st.Size != 18 {
		t.Fatalf("HEAD after another client changed the file: etag %s size %d, %v", st.ETag, st.Size, err)
	}
	// Presigned GET, with no credentials but those in the URL.
	u, err := e.s3.PresignedGetObject(ctx, "bkt", "dir/sub/obj.bin", time.Minute, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get(u.String())
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !bytes.Equal(got, data) {
		t.Fatalf("presigned GET: %s, %d bytes", resp.Status, len(got))
	}
	u.RawQuery = strings.Replace(u.RawQuery, "X-Amz-Signature=", "X-Amz-Signature=0", 1)
	if resp, err := http.Get(u.String()); err != nil || resp.StatusCode != http.StatusForbidden {
		t.Fatalf("presigned GET with a wrong signature: %v %v", resp, err)
	}
	// Deletes remove the directories they leave empty.
	if err := e.s3.RemoveObject(ctx, "bkt", "dir/sub/obj.bin", minio.RemoveObjectOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.other.Stat(ctx, "/bkt/dir/sub"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("an emptied directory: %v", err)
	}
	if _, err := e.other.Stat(ctx, "/bkt/dir/fromfs.txt"); err != nil {
		t.Fatalf("a file beside it: %v", err)
	}
	if err := e.s3.RemoveObject(ctx, "bkt", "never-was", minio.RemoveObjectOptions{}); err != nil {
		t.Fatalf("delete of a missing key: %v", err)
	}
	objs := make(chan minio.ObjectInfo, 3)
	for _, k := range []string{"copy1", "x/copy2", "dir/fromfs.txt"} {
		objs <- minio.ObjectInfo{Key: k}
	}
	close(objs)
	for rerr := range e.s3.RemoveObjects(ctx, "bkt", objs, minio.RemoveObjectsOptions{}) {
		t.Errorf("DeleteObjects %s: %v", rerr.ObjectName, rerr.Err)
	}
	if list, err := e.other.ReadDir(ctx, "/bkt"); err != nil || len(list) != 0 {
		t.Fatalf("the bucket after the deletes: %d entries, %v", len(list), err)
	}
	// A key ending in a slash is a directory.
	e.put(t, "bkt", "folder/", nil, minio.PutObjectOptions{})
	if st, err := e.other.Stat(ctx, "/bkt/folder"); err != nil || !st.IsDir() {
		t.Fatalf("directory object: %v %v", st, err)
	}
	if _, err := e.s3.StatObject(ctx, "bkt", "folder/", minio.StatObjectOptions{}); err != nil {
		t.Fatalf("HEAD of a directory object: %v (%+v)", err, minio.ToErrorResponse(err))
	}
}

func md5sum(b []byte) []byte {
	s := md5.Sum(b)
	return s[:]
}

// TestAccessKeys checks requests are refused without the right keys.
func TestAccessKeys(t *testing.T) {
	e := start(t)
	ctx := context.Background()
	if err := e.s3.MakeBucket(ctx, "bkt", minio.MakeBucketOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, access, secret, code string
	}{
		{"wrong secret", testAccess, "not-the-secret", "SignatureDoesNotMatch"},
		{"unknown access key", "someoneelse", testSecret, "InvalidAccessKeyId"},
	} {
		t.Run(c.name, func(t *testing.T) {
			bad := client(t, e.addr, c.access, c.secret)
			_, err := bad.ListBuckets(ctx)
			if r := minio.ToErrorResponse(err); r.Code != c.code || r.StatusCode != http.StatusForbidden {
				t.Errorf("ListBuckets: %v (%s, %d), want %s, 403", err, r.Code, r.StatusCode, c.code)
			}
			_, err = bad.PutObject(ctx, "bkt", "k", strings.NewReader("x"), 1, minio.PutObjectOptions{})
			if r := minio.ToErrorResponse(err); r.Code != c.code || r.StatusCode != http.StatusForbidden {
				t.Errorf("PutObject: %v (%s, %d), want %s, 403", err, r.Code, r.StatusCode, c.code)
			}
		})
	}
	resp, err := http.Get("http://" + e.addr + "/bkt/k")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Fatalf("anonymous GET: %s", resp.Status)
	}
	if _, err := e.other.Stat(ctx, "/bkt/k"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("a refused PUT left a file: %v", err)
	}
}

// TestMultipart uploads a 100 MiB object in parts and checks it is
// assembled whole, at once, with nothing left of its parts.
func TestMultipart(t *testing.T) {
	e := start(t)
	ctx := context.Background()
	if err := e.s3.MakeBucket(ctx, "bkt", minio.MakeBucketOptions{}); err != nil {
		t.Fatal(err)
	}
	const size = 100 << 20
	data := make([]byte, size)
	for i := 0; i < size; i += 8 {
		copy(data[i:], fmt.Sprintf("%08x", i))
	}
	stored := e.putBytes.Load()
	info, err := e.s3.PutObject(ctx, "bkt", "big/object", bytes.NewReader(data), size, minio.PutObjectOptions{
		PartSize: 16 << 20, ContentType: "video/x-test", UserMetadata: map[string]string{"Take": "2"}})
	if err != nil {
		t.Fatal(err)
	}
	// The parts are stored once; completing the upload shares their
	// slices (copy_file_range) instead of writing the bytes again.
	if n := e.putBytes.Load() - stored; n < size || n > size+size/10 {
		t.Errorf("a %d-byte multipart upload stored %d bytes in the bucket, want the parts' bytes once", size, n)
	}
	if !strings.HasSuffix(info.ETag, "-7") {
		t.Fatalf("ETag %s, want a multipart one of 7 parts", info.ETag)
	}
	want := sha256.Sum256(data)
	if got := sha256.Sum256(readFile(t, e.other, "/bkt/big/object")); got != want {
		t.Fatal("the assembled file read by another client differs from what was uploaded")
	}
	o, err := e.s3.GetObject(ctx, "bkt", "big/object", minio.GetObjectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	h := sha256.New()
	n, err := io.Copy(h, o)
	o.Close()
	if err != nil || n != size || [32]byte(h.Sum(nil)) != want {
		t.Fatalf("GET of the assembled object: %d bytes, %v, or other bytes", n, err)
	}
	st, err := e.s3.StatObject(ctx, "bkt", "big/object", minio.StatObjectOptions{})
	if err != nil || st.ContentType != "video/x-test" || st.UserMetadata["Take"] != "2" || st.ETag != info.ETag {
		t.Fatalf("HEAD: %+v %v", st, err)
	}
	if list, err := e.fs.ReadDir(ctx, "/.s3gateway/multipart"); err != nil || len(list) != 0 {
		t.Fatalf("staged uploads after completing: %d, %v", len(list), err)
	}

	// By hand: parts listed, replaced, refused when too small, aborted.
	id, err := e.core.NewMultipartUpload(ctx, "bkt", "manual", minio.PutObjectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	part := func(n int, b []byte) minio.ObjectPart {
		t.Helper()
		p, err := e.core.PutObjectPart(ctx, "bkt", "manual", id, n, bytes.NewReader(b), int64(len(b)), minio.PutObjectPartOptions{})
		if err != nil {
			t.Fatalf("part %d: %v", n, err)
		}
		return p
	}
	part(1, []byte("first, too small"))
	p1 := part(1, data[:5<<20])
	p2 := part(2, []byte("the last part may be small"))
	lp, err := e.core.ListObjectParts(ctx, "bkt", "manual", id, 0, 1000)
	if err != nil || len(lp.ObjectParts) != 2 || strings.Trim(lp.ObjectParts[0].ETag, `"`) != strings.Trim(p1.ETag, `"`) || lp.ObjectParts[0].Size != 5<<20 {
		t.Fatalf("ListParts: %+v %v", lp.ObjectParts, err)
	}
	ups, err := e.core.ListMultipartUploads(ctx, "bkt", "", "", "", "", 1000)
	if err != nil || len(ups.Uploads) != 1 || ups.Uploads[0].UploadID != id || ups.Uploads[0].Key != "manual" {
		t.Fatalf("ListMultipartUploads: %+v %v", ups.Uploads, err)
	}
	if _, err := e.core.CompleteMultipartUpload(ctx, "bkt", "manual", id, []minio.CompletePart{{PartNumber: 1, ETag: p2.ETag}}, minio.PutObjectOptions{}); errCode(err) != "InvalidPart" {
		t.Fatalf("complete with a wrong ETag: %v", err)
	}
	if _, err := e.s3.StatObject(ctx, "bkt", "manual", minio.StatObjectOptions{}); errCode(err) != "NoSuchKey" {
		t.Fatalf("the object of an upload not completed: %v", err)
	}
	if err := e.core.AbortMultipartUpload(ctx, "bkt", "manual", id); err != nil {
		t.Fatal(err)
	}
	if _, err := e.core.ListObjectParts(ctx, "bkt", "manual", id, 0, 1000); errCode(err) != "NoSuchUpload" {
		t.Fatalf("ListParts of an aborted upload: %v", err)
	}
	// Two parts assembled, the first of the minimum size.
	id, err = e.core.NewMultipartUpload(ctx, "bkt", "manual", minio.PutObjectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	p1, p2 = part(1, data[:5<<20]), part(2, []byte("tail"))
	if _, err := e.core.CompleteMultipartUpload(ctx, "bkt", "manual", id, []minio.CompletePart{{PartNumber: 1, ETag: p1.ETag}, {PartNumber: 2, ETag: p2.ETag}}, minio.PutObjectOptions{}); err != nil {
		t.Fatal(err)
	}
	if got := e.get(t, "bkt", "manual", minio.GetObjectOptions{}); !bytes.Equal(got, append(data[:5<<20:5<<20], "tail"...)) {
		t.Fatalf("assembled %d bytes, not the parts", len(got))
	}
	// Parts copied from ranges of objects (UploadPartCopy).
	id, err = e.core.NewMultipartUpload(ctx, "bkt", "composed", minio.PutObjectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	c1, err := e.core.CopyObjectPart(ctx, "bkt", "big/object", "bkt", "composed", id, 1, 10<<20, 6<<20, nil)
	if err != nil {
		t.Fatalf("UploadPartCopy: %v", err)
	}
	c2, err := e.core.CopyObjectPart(ctx, "bkt", "manual", "bkt", "composed", id, 2, 5<<20-3, 7, nil)
	if err != nil {
		t.Fatalf("UploadPartCopy: %v", err)
	}
	if _, err := e.core.CompleteMultipartUpload(ctx, "bkt", "composed", id, []minio.CompletePart{c1, c2}, minio.PutObjectOptions{}); err != nil {
		t.Fatal(err)
	}
	want2 := append(append([]byte{}, data[10<<20:16<<20]...), data[5<<20-3:5<<20]...)
	want2 = append(want2, "tail"...)
	if got := e.get(t, "bkt", "composed", minio.GetObjectOptions{}); !bytes.Equal(got, want2) {
		t.Fatalf("assembled from copied parts: %d bytes, not the ranges copied", len(got))
	}
}

// TestListing lists 10,000 keys in pages, with and without a delimiter,
// by both versions of ListObjects.
func TestListing(t *testing.T) {
	e := start(t)
	ctx := context.Background()
	if err := e.s3.MakeBucket(ctx, "bkt", minio.MakeBucketOptions{}); err != nil {
		t.Fatal(err)
	}
	// The files are written by another client, as a mount would: the
	// listing, not the PUTs, is under test.
	var keys []string
	for d := range 100 {
		dir := fmt.Sprintf("d%02d", d)
		if err := e.other.MkdirAll(ctx, "/bkt/"+dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for f := range 100 {
			k := fmt.Sprintf("%s/f%03d", dir, f)
			h, err := e.other.OpenFile(ctx, "/bkt/"+k, os.O_WRONLY|os.O_CREATE, 0o644)
			if err != nil {
				t.Fatal(err)
			}
			if err := h.Close(); err != nil {
				t.Fatal(err)
			}
			keys = append(keys, k)
		}
	}
	e.put(t, "bkt", "top", []byte("x"), minio.PutObjectOptions{})
	keys = append(keys, "top")

	// Version 2, every key, in pages of 1000.
	var got []string
	token, pages := "", 0
	for {
		res, err := e.core.ListObjectsV2("bkt", "", "", token, "", 1000)
		if err != nil {
			t.Fatal(err)
		}
		pages++
		for _, o := range res.Contents {
			got = append(got, o.Key)
		}
		if !res.IsTruncated {
			break
		}
		token = res.NextContinuationToken
	}
	if pages != 11 || strings.Join(got, ",") != strings.Join(keys, ",") {
		t.Fatalf("ListObjectsV2: %d keys in %d pages, want %d in order in 11", len(got), pages, len(keys))
	}
	// Version 1 with a delimiter: the directories are common prefixes.
	var prefixes []string
	marker := ""
	got = nil
	for {
		res, err := e.core.ListObjects("bkt", "", marker, "/", 30)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range res.CommonPrefixes {
			prefixes = append(prefixes, p.Prefix)
		}
		for _, o := range res.Contents {
			got = append(got, o.Key)
		}
		if !res.IsTruncated {
			break
		}
		marker = res.NextMarker
	}
	if len(prefixes) != 100 || prefixes[0] != "d00/" || prefixes[99] != "d99/" || strings.Join(got, ",") != "top" {
		t.Fatalf("ListObjects with a delimiter: %d prefixes (%v…), keys %v", len(prefixes), prefixes[:min(3, len(prefixes))], got)
	}
	// A prefix that is a directory, in small pages of version 1.
	got, marker = nil, ""
	for {
		res, err := e.core.ListObjects("bkt", "d42/", marker, "", 7)
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range res.Contents {
			got = append(got, o.Key)
		}
		if !res.IsTruncated {
			break
		}
		marker = res.NextMarker
	}
	if strings.Join(got, ",") != strings.Join(keys[4200:4300], ",") {
		t.Fatalf("ListObjects under d42/: %d keys (%v…), want d42/f000…d42/f099", len(got), got[:min(3, len(got))])
	}
	// A prefix that is not a directory.
	n := 0
	for o := range e.s3.ListObjects(ctx, "bkt", minio.ListObjectsOptions{Prefix: "d42/f05", MaxKeys: 3}) {
		if o.Err != nil {
			t.Fatal(o.Err)
		}
		if !strings.HasPrefix(o.Key, "d42/f05") {
			t.Fatalf("key %s listed under prefix d42/f05", o.Key)
		}
		n++
	}
	if n != 10 {
		t.Fatalf("%d keys under d42/f05, want 10", n)
	}
}

// TestConflicts checks the keys a tree of files cannot hold, and
// conditional requests.
func TestConflicts(t *testing.T) {
	e := start(t)
	ctx := context.Background()
	if err := e.s3.MakeBucket(ctx, "bkt", minio.MakeBucketOptions{}); err != nil {
		t.Fatal(err)
	}
	info := e.put(t, "bkt", "file", []byte("x"), minio.PutObjectOptions{})
	e.put(t, "bkt", "dir/child", []byte("y"), minio.PutObjectOptions{})
	for _, c := range []struct {
		key, code string
	}{
		{"file/below", "ObjectParentIsFile"},
		{"dir", "ExistingObjectIsDirectory"},
		{"a//b", "InvalidRequest"},
		{"a/../file", "InvalidRequest"},
		{"./file", "InvalidRequest"},
	} {
		_, err := e.s3.PutObject(ctx, "bkt", c.key, strings.NewReader("z"), 1, minio.PutObjectOptions{})
		if got := errCode(err); got != c.code {
			t.Errorf("PUT %q: %v (%s), want %s", c.key, err, got, c.code)
		}
	}
	if got := e.get(t, "bkt", "file", minio.GetObjectOptions{}); string(got) != "x" {
		t.Fatalf("a refused PUT changed another object: %q", got)
	}
	if list, err := e.fs.ReadDir(ctx, "/.s3gateway/tmp"); err != nil || len(list) != 0 {
		t.Fatalf("refused PUTs left %d temporary files, %v", len(list), err)
	}
	var o minio.GetObjectOptions
	o.SetMatchETagExcept(info.ETag)
	if _, _, _, err := e.core.GetObject(ctx, "bkt", "file", o); minio.ToErrorResponse(err).StatusCode != http.StatusNotModified {
		t.Errorf("GET If-None-Match its ETag: %v", err)
	}
	o = minio.GetObjectOptions{}
	o.SetMatchETag(`"0123456789abcdef0123456789abcdef"`)
	if _, _, _, err := e.core.GetObject(ctx, "bkt", "file", o); errCode(err) != "PreconditionFailed" {
		t.Errorf("GET If-Match another ETag: %v", err)
	}
	if _, err := e.s3.PutObject(ctx, "nobucket", "k", strings.NewReader("z"), 1, minio.PutObjectOptions{}); errCode(err) != "NoSuchBucket" {
		t.Errorf("PUT in a missing bucket: %v", err)
	}
}
