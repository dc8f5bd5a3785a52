package gateway

import (
	"context"
	"crypto/md5"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"os"
	"path"
	"strings"
	"sync"
	"syscall"

	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/versity/versitygw/backend"
	"github.com/versity/versitygw/s3err"
	"github.com/versity/versitygw/s3response"

	"github.com/sluicefs/sluice/internal/vfs/pathfs"
)

// ioSize is the size of the reads and writes the gateway makes of files:
// that of the blocks of a volume, so writes fill whole blocks.
const ioSize = 1 << 20

// emptyETag is the ETag of no bytes, that of directory objects.
const emptyETag = `"d41d8cd98f00b204e9800998ecf8427e"`

// statObject returns the attributes of the file of key, or NoSuchKey: a
// key ending in a slash names a directory, others a file.
func (b *Backend) statObject(ctx context.Context, bucket, key string) (fs.FileInfo, error) {
	if _, err := b.statBucket(ctx, bucket); err != nil {
		return nil, err
	}
	if err := checkKey(key); err != nil {
		return nil, err
	}
	fi, err := b.fs.Stat(ctx, objectPath(bucket, key))
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) || err == nil && fi.IsDir() != strings.HasSuffix(key, "/") {
		return nil, s3err.GetAPIError(s3err.ErrNoSuchKey)
	}
	if err == nil && !fi.IsDir() && !fi.Mode().IsRegular() {
		return nil, s3err.GetAPIError(s3err.ErrNoSuchKey) // a symlink, a device: no object
	}
	if err != nil {
		return nil, failed(err, "stat %s/%s", bucket, key)
	}
	return fi, nil
}

// tmpDir holds the files the gateway writes until they are whole.
const tmpDir = sysDir + "/tmp"

// createTemp creates a file of the gateway's own in dir, tmpDir when
// dir is empty (made when missing), and returns it open for writing and
// its name.
func (b *Backend) createTemp(ctx context.Context, dir string) (*pathfs.File, string, error) {
	if dir == "" {
		dir = tmpDir
	}
	p := dir + "/" + tempName()
	h, err := b.fs.OpenFile(ctx, p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o666)
	if errors.Is(err, fs.ErrNotExist) && dir == tmpDir {
		if err = b.fs.MkdirAll(ctx, dir, 0o700); err == nil {
			h, err = b.fs.OpenFile(ctx, p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o666)
		}
	}
	if err != nil {
		return nil, "", fmt.Errorf("create a file in %s: %w", dir, err)
	}
	return h, p, nil
}

// writeTemp writes r to a new file of the gateway's own in dir (see
// createTemp) and returns its name and the MD5 of its bytes; finish, when
// not nil, is given the file, still open, and its ETag, before it closes
// it and so commits it.
func (b *Backend) writeTemp(ctx context.Context, dir string, r io.Reader, finish func(h *pathfs.File, etag string) error) (string, string, error) {
	h, p, err := b.createTemp(ctx, dir)
	if err != nil {
		return "", "", err
	}
	sum := md5.New()
	_, err = copyHashing(h, sum, r)
	etag := backend.GenerateEtag(sum)
	if err == nil && finish != nil {
		err = finish(h, etag)
	}
	if cerr := h.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		b.fs.Remove(context.WithoutCancel(ctx), p)
		return "", "", err
	}
	return p, etag, nil
}

// keep returns a finish function of writeTemp that keeps the ETag and m
// as attributes of the file, and fi its attributes.
func (b *Backend) keep(m objectMeta, fi *fs.FileInfo) func(h *pathfs.File, etag string) error {
	return func(h *pathfs.File, etag string) error {
		st, err := b.setAttrs(h, etag, m)
		*fi = st
		return err
	}
}

// setAttrs keeps etag and m as attributes of h, a file the gateway
// wrote and has not closed, and returns its attributes. It commits the
// file first, which its close would do, so the ETag's stamp is of the
// size and mtime the file keeps.
func (b *Backend) setAttrs(h *pathfs.File, etag string, m objectMeta) (fs.FileInfo, error) {
	if err := h.Flush(); err != nil {
		return nil, err
	}
	fi, err := h.Stat()
	if err != nil {
		return nil, err
	}
	set := func(name, value string) error {
		if value == "" {
			return nil
		}
		if err := h.SetXattr(name, []byte(value)); err != nil && !noXattrs(err) {
			return err
		}
		return nil
	}
	if err := set(xattrETag, etag+" "+stampFor(fi)); err != nil {
		return nil, err
	}
	for _, k := range sortedKeys(m.headers) {
		if err := set(xattrPrefix+k, m.headers[k]); err != nil {
			return nil, err
		}
	}
	for _, k := range sortedKeys(m.user) {
		if err := set(xattrMeta+strings.ToLower(k), m.user[k]); err != nil {
			return nil, err
		}
	}
	return fi, nil
}

// bufs holds buffers of ioSize: a PUT would otherwise allocate (and
// clear) two.
var bufs = sync.Pool{New: func() any { return new([ioSize]byte) }}

func getBuf() []byte  { return bufs.Get().(*[ioSize]byte)[:] }
func putBuf(b []byte) { bufs.Put((*[ioSize]byte)(b)) }

// copyHashing copies r to w as copyFull does, and writes it to sum too,
// hashing each buffer as w takes it: the MD5 of an object costs about
// as much as writing it.
func copyHashing(w io.Writer, sum hash.Hash, r io.Reader) (int64, error) {
	bufs := [2][]byte{getBuf(), getBuf()}
	defer putBuf(bufs[0])
	defer putBuf(bufs[1])
	hashed := make(chan struct{}, 1)
	hashed <- struct{}{}
	var total int64
	for i := 0; ; i++ {
		buf := bufs[i%2]
		n, err := io.ReadFull(r, buf)
		<-hashed // the hash of the previous buffer is done: sum is free
		if n > 0 {
			go func(p []byte) {
				sum.Write(p)
				hashed <- struct{}{}
			}(buf[:n])
			if _, werr := w.Write(buf[:n]); werr != nil {
				<-hashed
				return total, werr
			}
			total += int64(n)
		} else {
			hashed <- struct{}{}
		}
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			<-hashed
			return total, nil
		}
		if err != nil {
			<-hashed
			return total, err
		}
	}
}

// copyFull copies r to w in writes of ioSize but the last, whatever
// sizes r reads in.
func copyFull(w io.Writer, r io.Reader) (int64, error) {
	buf := getBuf()
	defer putBuf(buf)
	var total int64
	for {
		n, err := io.ReadFull(r, buf)
		if n > 0 {
			if _, werr := w.Write(buf[:n]); werr != nil {
				return total, werr
			}
			total += int64(n)
		}
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			return total, nil
		}
		if err != nil {
			return total, err
		}
	}
}

// place renames tmp, a whole file the gateway wrote, over the object key
// of bucket, and makes the directories above it as needed: a reader sees
// the old object or the new one, whole.
func (b *Backend) place(ctx context.Context, tmp, bucket, key string) error {
	dst := objectPath(bucket, key)
	err := b.fs.Rename(ctx, tmp, dst)
	if errors.Is(err, fs.ErrNotExist) {
		if _, err = b.statBucket(ctx, bucket); err == nil {
			err = b.fs.MkdirAll(ctx, path.Dir(dst), 0o777)
			if err == nil {
				err = b.fs.Rename(ctx, tmp, dst)
			}
		}
	}
	switch {
	case errors.Is(err, syscall.EISDIR), errors.Is(err, syscall.ENOTEMPTY), errors.Is(err, fs.ErrExist):
		err = s3err.GetAPIError(s3err.ErrExistingObjectIsDirectory)
	case errors.Is(err, syscall.ENOTDIR):
		err = s3err.GetAPIError(s3err.ErrObjectParentIsFile)
	}
	if err != nil {
		b.fs.Remove(context.WithoutCancel(ctx), tmp)
	}
	return err
}

// putDir makes the directory object key (ending in a slash).
func (b *Backend) putDir(ctx context.Context, bucket, key string, m objectMeta) error {
	p := objectPath(bucket, key)
	err := b.fs.MkdirAll(ctx, p, 0o777)
	if errors.Is(err, syscall.ENOTDIR) {
		return s3err.GetAPIError(s3err.ErrObjectParentIsFile)
	}
	if err != nil {
		return err
	}
	fi, err := b.fs.Stat(ctx, p)
	if err == nil {
		err = b.setETag(ctx, p, emptyETag, fi)
	}
	if err == nil {
		err = b.setMeta(ctx, p, m)
	}
	return err
}

// PutObject writes an object: a file under a temporary name, renamed
// over the key when it is whole.
func (b *Backend) PutObject(ctx context.Context, in s3response.PutObjectInput) (s3response.PutObjectOutput, error) {
	// versitygw has looked the bucket up (its ACL) already; place makes
	// sure it is still there.
	bucket, key := deref(in.Bucket), deref(in.Key)
	if err := checkBucket(bucket); err != nil {
		return s3response.PutObjectOutput{}, err
	}
	if err := checkKey(key); err != nil {
		return s3response.PutObjectOutput{}, err
	}
	m := objectMeta{headers: map[string]string{
		"content-type":        deref(in.ContentType),
		"content-encoding":    deref(in.ContentEncoding),
		"content-disposition": deref(in.ContentDisposition),
		"content-language":    deref(in.ContentLanguage),
		"cache-control":       deref(in.CacheControl),
		"expires":             deref(in.Expires),
	}, user: in.Metadata}
	if strings.HasSuffix(key, "/") {
		if deref(in.ContentLength) > 0 {
			return s3response.PutObjectOutput{}, s3err.GetAPIError(s3err.ErrDirectoryObjectContainsData)
		}
		// Read the empty body to its end all the same, as every other
		// PUT does: what a client sent must not stay unread.
		if in.Body != nil {
			if _, err := io.Copy(io.Discard, io.LimitReader(in.Body, 1<<20)); err != nil {
				return s3response.PutObjectOutput{}, failed(err, "put %s/%s", bucket, key)
			}
		}
		if err := b.putDir(ctx, bucket, key, m); err != nil {
			return s3response.PutObjectOutput{}, failed(err, "put %s/%s", bucket, key)
		}
		return s3response.PutObjectOutput{ETag: emptyETag, Size: ptr(int64(0))}, nil
	}
	body := in.Body
	if body == nil {
		body = strings.NewReader("")
	}
	var fi fs.FileInfo
	tmp, etag, err := b.writeTemp(ctx, "", body, b.keep(m, &fi))
	if err == nil {
		err = b.place(ctx, tmp, bucket, key)
	}
	if err != nil {
		return s3response.PutObjectOutput{}, failed(err, "put %s/%s", bucket, key)
	}
	return s3response.PutObjectOutput{ETag: etag, Size: ptr(fi.Size())}, nil
}

// objectHead is what GetObject and HeadObject say of an object.
type objectHead struct {
	fi   fs.FileInfo
	etag string
	meta objectMeta
}

// size is the object's length: its file's, 0 for a directory.
func (oh *objectHead) size() int64 {
	if oh.fi.IsDir() {
		return 0
	}
	return oh.fi.Size()
}

// head returns what GetObject and HeadObject say of key, once the
// preconditions hold. With open, it opens the file of key (not a
// directory) and returns it too, and what it says is of that file: a
// PUT of the key meanwhile changes neither.
func (b *Backend) head(ctx context.Context, bucket, key string, pre backend.PreConditions, open bool) (*objectHead, *pathfs.File, error) {
	var (
		fi  fs.FileInfo
		h   *pathfs.File
		r   attrReader
		err error
	)
	if open && !strings.HasSuffix(key, "/") {
		if h, err = b.openObject(ctx, bucket, key); err != nil {
			return nil, nil, err
		}
		if fi, err = h.Stat(); err != nil {
			h.Close()
			return nil, nil, failed(err, "stat %s/%s", bucket, key)
		}
		r = h
	} else {
		if fi, err = b.statObject(ctx, bucket, key); err != nil {
			return nil, nil, err
		}
		r = pathAttrs{ctx: ctx, fs: b.fs, p: objectPath(bucket, key)}
	}
	oh := &objectHead{fi: fi, etag: etagOf(r, fi)}
	if err == nil {
		err = backend.EvaluatePreconditions(oh.etag, fi.ModTime(), pre)
	}
	if err == nil {
		if oh.meta, err = getMeta(r); err != nil {
			err = failed(err, "metadata of %s/%s", bucket, key)
		}
	}
	if err != nil {
		if h != nil {
			h.Close()
		}
		return nil, nil, err
	}
	return oh, h, nil
}

// openObject opens the file of key for reading, or answers NoSuchKey.
func (b *Backend) openObject(ctx context.Context, bucket, key string) (*pathfs.File, error) {
	if _, err := b.statBucket(ctx, bucket); err != nil {
		return nil, err
	}
	if err := checkKey(key); err != nil {
		return nil, err
	}
	h, err := b.fs.OpenFile(ctx, objectPath(bucket, key), os.O_RDONLY, 0)
	switch {
	case errors.Is(err, fs.ErrNotExist), errors.Is(err, syscall.ENOTDIR), errors.Is(err, syscall.EINVAL):
		return nil, s3err.GetAPIError(s3err.ErrNoSuchKey) // missing, or a symlink, a device: no object
	case err != nil:
		return nil, failed(err, "open %s/%s", bucket, key)
	}
	if fi, err := h.Stat(); err == nil && fi.IsDir() {
		h.Close()
		return nil, s3err.GetAPIError(s3err.ErrNoSuchKey)
	}
	return h, nil
}

// GetObject reads an object, or the range of it asked for.
func (b *Backend) GetObject(ctx context.Context, in *s3.GetObjectInput) (*s3.GetObjectOutput, error) {
	bucket, key := deref(in.Bucket), deref(in.Key)
	oh, h, err := b.head(ctx, bucket, key, backend.PreConditions{
		IfMatch: in.IfMatch, IfNoneMatch: in.IfNoneMatch, IfModSince: in.IfModifiedSince, IfUnmodeSince: in.IfUnmodifiedSince}, true)
	if err != nil {
		return nil, err
	}
	size := oh.size()
	start, length, ranged, err := backend.ParseObjectRange(size, deref(in.Range))
	if err == nil && in.PartNumber != nil && *in.PartNumber > 1 {
		err = s3err.GetInvalidPartNumberRangeErr(1, *in.PartNumber)
	}
	if err != nil {
		if h != nil {
			h.Close()
		}
		return nil, err
	}
	out := oh.output(size)
	out.ContentLength = ptr(length)
	if ranged {
		out.ContentRange = ptr(fmt.Sprintf("bytes %d-%d/%d", start, start+length-1, size))
	}
	if h == nil {
		out.Body = io.NopCloser(strings.NewReader(""))
		return out, nil
	}
	out.Body = &fileBody{r: io.NewSectionReader(h, start, length), f: h}
	return out, nil
}

// contentType returns the object's Content-Type: the one it was put
// with, S3's default for a file a mount wrote.
func (oh *objectHead) contentType() *string {
	if ct := oh.meta.header("content-type"); ct != nil {
		return ct
	}
	return ptr(defaultContentType)
}

// defaultContentType is the Content-Type S3 gives an object put without
// one.
const defaultContentType = "binary/octet-stream"

// output returns the answer of GetObject to oh, but for the body, of an
// object of size bytes.
func (oh *objectHead) output(size int64) *s3.GetObjectOutput {
	return &s3.GetObjectOutput{
		AcceptRanges:       ptr("bytes"),
		ContentLength:      ptr(size),
		ContentType:        oh.contentType(),
		ContentEncoding:    oh.meta.header("content-encoding"),
		ContentDisposition: oh.meta.header("content-disposition"),
		ContentLanguage:    oh.meta.header("content-language"),
		CacheControl:       oh.meta.header("cache-control"),
		ExpiresString:      oh.meta.header("expires"),
		ETag:               ptr(oh.etag),
		LastModified:       ptr(oh.fi.ModTime()),
		Metadata:           oh.meta.user,
		StorageClass:       types.StorageClassStandard,
	}
}

// fileBody is the body of a GetObject: a section of an open file, closed
// with the body.
type fileBody struct {
	r io.Reader
	f *pathfs.File
}

func (fb *fileBody) Read(p []byte) (int, error) { return fb.r.Read(p) }

// WriteTo writes the body to w in reads of ioSize, which readahead
// serves best.
func (fb *fileBody) WriteTo(w io.Writer) (int64, error) {
	buf := getBuf()
	defer putBuf(buf)
	return io.CopyBuffer(w, struct{ io.Reader }{fb.r}, buf)
}

func (fb *fileBody) Close() error { return fb.f.Close() }

// HeadObject returns what GetObject would, but the body.
func (b *Backend) HeadObject(ctx context.Context, in *s3.HeadObjectInput) (*s3.HeadObjectOutput, error) {
	bucket, key := deref(in.Bucket), deref(in.Key)
	oh, _, err := b.head(ctx, bucket, key, backend.PreConditions{
		IfMatch: in.IfMatch, IfNoneMatch: in.IfNoneMatch, IfModSince: in.IfModifiedSince, IfUnmodeSince: in.IfUnmodifiedSince}, false)
	if err != nil {
		return nil, err
	}
	size := oh.size()
	length := size
	var contentRange *string
	if in.Range != nil {
		start, l, ranged, err := backend.ParseObjectRange(size, *in.Range)
		if err != nil {
			return nil, err
		}
		if ranged {
			length = l
			contentRange = ptr(fmt.Sprintf("bytes %d-%d/%d", start, start+l-1, size))
		}
	}
	o := oh.output(size)
	return &s3.HeadObjectOutput{
		AcceptRanges:       o.AcceptRanges,
		ContentLength:      ptr(length),
		ContentRange:       contentRange,
		ContentType:        o.ContentType,
		ContentEncoding:    o.ContentEncoding,
		ContentDisposition: o.ContentDisposition,
		ContentLanguage:    o.ContentLanguage,
		CacheControl:       o.CacheControl,
		ExpiresString:      o.ExpiresString,
		ETag:               o.ETag,
		LastModified:       o.LastModified,
		Metadata:           o.Metadata,
		StorageClass:       o.StorageClass,
	}, nil
}

// DeleteObject removes an object; one that does not exist is no error,
// as in S3. The directories above it that it leaves empty go too.
func (b *Backend) DeleteObject(ctx context.Context, in *s3.DeleteObjectInput) (*s3.DeleteObjectOutput, error) {
	bucket, key := deref(in.Bucket), deref(in.Key)
	if _, err := b.statBucket(ctx, bucket); err != nil {
		return nil, err
	}
	if err := b.deleteObject(ctx, bucket, key); err != nil {
		return nil, err
	}
	return &s3.DeleteObjectOutput{}, nil
}

func (b *Backend) deleteObject(ctx context.Context, bucket, key string) error {
	if err := checkKey(key); err != nil {
		return err
	}
	p := objectPath(bucket, key)
	fi, err := b.fs.Stat(ctx, p)
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) || err == nil && fi.IsDir() != strings.HasSuffix(key, "/") {
		return nil
	}
	if err == nil {
		err = b.fs.Remove(ctx, p)
	}
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case errors.Is(err, syscall.ENOTEMPTY), errors.Is(err, fs.ErrExist):
		return s3err.GetAPIError(s3err.ErrDirectoryNotEmpty)
	case err != nil:
		return failed(err, "delete %s/%s", bucket, key)
	}
	b.removeEmptyParents(ctx, bucket, key)
	return nil
}

// DeleteObjects removes objects, each on its own.
func (b *Backend) DeleteObjects(ctx context.Context, in *s3.DeleteObjectsInput) (s3response.DeleteResult, error) {
	bucket := deref(in.Bucket)
	if _, err := b.statBucket(ctx, bucket); err != nil {
		return s3response.DeleteResult{}, err
	}
	var out s3response.DeleteResult
	if in.Delete == nil {
		return out, nil
	}
	for _, o := range in.Delete.Objects {
		key := deref(o.Key)
		err := b.deleteObject(ctx, bucket, key)
		if err == nil {
			out.Deleted = append(out.Deleted, types.DeletedObject{Key: ptr(key)})
			continue
		}
		code, msg := "InternalError", err.Error()
		var apiErr s3err.APIError
		if errors.As(err, &apiErr) {
			code, msg = apiErr.Code, apiErr.Description
		}
		out.Error = append(out.Error, types.Error{Key: ptr(key), Code: ptr(code), Message: ptr(msg)})
	}
	return out, nil
}

// CopyObject copies an object, sharing its data where the volume can
// (copy_file_range), to a temporary file renamed over the destination.
func (b *Backend) CopyObject(ctx context.Context, in s3response.CopyObjectInput) (s3response.CopyObjectOutput, error) {
	srcBucket, srcKey, version, err := backend.ParseCopySource(deref(in.CopySource))
	if err != nil {
		return s3response.CopyObjectOutput{}, err
	}
	if version != "" {
		return s3response.CopyObjectOutput{}, s3err.GetAPIError(s3err.ErrNoSuchVersion)
	}
	dstBucket, dstKey := deref(in.Bucket), deref(in.Key)
	src, _, err := b.head(ctx, srcBucket, srcKey, backend.PreConditions{
		IfMatch: in.CopySourceIfMatch, IfNoneMatch: in.CopySourceIfNoneMatch,
		IfModSince: in.CopySourceIfModifiedSince, IfUnmodeSince: in.CopySourceIfUnmodifiedSince}, false)
	if err != nil {
		return s3response.CopyObjectOutput{}, err
	}
	if _, err := b.statBucket(ctx, dstBucket); err != nil {
		return s3response.CopyObjectOutput{}, err
	}
	if err := checkKey(dstKey); err != nil {
		return s3response.CopyObjectOutput{}, err
	}
	replace := in.MetadataDirective == types.MetadataDirectiveReplace
	if srcBucket == dstBucket && srcKey == dstKey && !replace {
		return s3response.CopyObjectOutput{}, s3err.GetAPIError(s3err.ErrInvalidCopyDest)
	}
	m := src.meta
	if replace {
		m = objectMeta{headers: map[string]string{
			"content-type":        deref(in.ContentType),
			"content-encoding":    deref(in.ContentEncoding),
			"content-disposition": deref(in.ContentDisposition),
			"content-language":    deref(in.ContentLanguage),
			"cache-control":       deref(in.CacheControl),
			"expires":             deref(in.Expires),
		}, user: in.Metadata}
	}
	if src.fi.IsDir() {
		if err := b.putDir(ctx, dstBucket, dstKey, m); err != nil {
			return s3response.CopyObjectOutput{}, failed(err, "copy to %s/%s", dstBucket, dstKey)
		}
		return s3response.CopyObjectOutput{CopyObjectResult: &s3response.CopyObjectResult{ETag: ptr(emptyETag), LastModified: ptr(src.fi.ModTime())}}, nil
	}
	tmp, fi, err := b.copyInto(ctx, "", []string{objectPath(srcBucket, srcKey)}, src.etag, m)
	if err == nil {
		err = b.place(ctx, tmp, dstBucket, dstKey)
	}
	if err != nil {
		return s3response.CopyObjectOutput{}, failed(err, "copy %s/%s to %s/%s", srcBucket, srcKey, dstBucket, dstKey)
	}
	return s3response.CopyObjectOutput{CopyObjectResult: &s3response.CopyObjectResult{ETag: ptr(src.etag), LastModified: ptr(fi.ModTime())}}, nil
}

// copyInto writes the files srcs, one after the other, to a new file
// of the gateway's own in dir (see createTemp), of ETag etag and
// metadata m: by copy_file_range, which shares their data where the
// volume can, else by reading and writing them. It returns the file's
// name and attributes.
func (b *Backend) copyInto(ctx context.Context, dir string, srcs []string, etag string, m objectMeta) (string, fs.FileInfo, error) {
	out, p, err := b.createTemp(ctx, dir)
	if err != nil {
		return "", nil, err
	}
	var off int64
	for _, s := range srcs {
		var n int64
		if n, err = b.appendFile(ctx, out, off, s); err != nil {
			break
		}
		off += n
	}
	var fi fs.FileInfo
	if err == nil {
		fi, err = b.setAttrs(out, etag, m)
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		b.fs.Remove(context.WithoutCancel(ctx), p)
		return "", nil, err
	}
	return p, fi, nil
}

// appendFile writes the file src at off of out and returns its size.
func (b *Backend) appendFile(ctx context.Context, out *pathfs.File, off int64, src string) (int64, error) {
	in, err := b.fs.OpenFile(ctx, src, os.O_RDONLY, 0)
	if err != nil {
		return 0, err
	}
	defer in.Close()
	fi, err := in.Stat()
	if err != nil {
		return 0, err
	}
	return copyRange(out, off, in, 0, fi.Size())
}

// copyRange writes n bytes at inOff of in at off of out, by
// copy_file_range where the volume can, else by reading and writing
// them, and returns how many it wrote (fewer at the end of in).
func copyRange(out *pathfs.File, off int64, in *pathfs.File, inOff, n int64) (int64, error) {
	c, err := out.CopyFrom(in, inOff, off, n)
	if err == nil || c > 0 || !(errors.Is(err, syscall.EXDEV) || errors.Is(err, syscall.EOPNOTSUPP) || errors.Is(err, syscall.ENOSYS) || errors.Is(err, syscall.EINVAL)) {
		return c, err
	}
	// The volume cannot share the data: copy the bytes.
	if _, err := out.Seek(off, io.SeekStart); err != nil {
		return 0, err
	}
	return copyFull(out, io.NewSectionReader(in, inOff, n))
}
