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
		return nil, fmt.Errorf("stat %s/%s: %w", bucket, key, s3Err(err))
	}
	return fi, nil
}

// tempPath returns the name of a new file of the gateway's own, and
// makes its directory if it must.
func (b *Backend) tempPath(ctx context.Context) (string, error) {
	dir := sysDir + "/tmp"
	if err := b.fs.MkdirAll(ctx, dir, 0o700); err != nil {
		return "", fmt.Errorf("make %s: %w", dir, err)
	}
	return dir + "/" + tempName(), nil
}

// writeFile writes r to the new file p, committing it when it closes it,
// and returns the MD5 of what it wrote.
func (b *Backend) writeFile(ctx context.Context, p string, r io.Reader) (hash.Hash, error) {
	h, err := b.fs.OpenFile(ctx, p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o666)
	if err != nil {
		return nil, err
	}
	sum := md5.New()
	_, err = copyFull(io.MultiWriter(h, sum), r)
	if cerr := h.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		b.fs.Remove(context.WithoutCancel(ctx), p)
		return nil, err
	}
	return sum, nil
}

// copyFull copies r to w in writes of ioSize but the last, whatever
// sizes r reads in.
func copyFull(w io.Writer, r io.Reader) (int64, error) {
	buf := make([]byte, ioSize)
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

// install finishes the file tmp the gateway wrote, as the object key of
// bucket: it keeps its ETag and metadata, and renames it over the key,
// making the directories above it as needed. A reader sees the old
// object or the new one, whole.
func (b *Backend) install(ctx context.Context, tmp, bucket, key, etag string, m objectMeta) (fs.FileInfo, error) {
	fi, err := b.fs.Stat(ctx, tmp)
	if err == nil {
		err = b.setETag(ctx, tmp, etag, fi)
	}
	if err == nil {
		err = b.setMeta(ctx, tmp, m)
	}
	if err == nil {
		err = b.fs.MkdirAll(ctx, path.Dir(objectPath(bucket, key)), 0o777)
		if errors.Is(err, syscall.ENOTDIR) || errors.Is(err, fs.ErrExist) {
			err = s3err.GetAPIError(s3err.ErrObjectParentIsFile)
		}
	}
	if err == nil {
		err = b.fs.Rename(ctx, tmp, objectPath(bucket, key))
		switch {
		case errors.Is(err, syscall.EISDIR), errors.Is(err, syscall.ENOTEMPTY), errors.Is(err, syscall.EEXIST):
			err = s3err.GetAPIError(s3err.ErrExistingObjectIsDirectory)
		case errors.Is(err, syscall.ENOTDIR):
			err = s3err.GetAPIError(s3err.ErrObjectParentIsFile)
		}
	}
	if err != nil {
		b.fs.Remove(context.WithoutCancel(ctx), tmp)
		return nil, err
	}
	return fi, nil
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
	bucket, key := deref(in.Bucket), deref(in.Key)
	if _, err := b.statBucket(ctx, bucket); err != nil {
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
		if err := b.putDir(ctx, bucket, key, m); err != nil {
			return s3response.PutObjectOutput{}, fmt.Errorf("put %s/%s: %w", bucket, key, s3Err(err))
		}
		return s3response.PutObjectOutput{ETag: emptyETag, Size: ptr(int64(0))}, nil
	}
	tmp, err := b.tempPath(ctx)
	if err != nil {
		return s3response.PutObjectOutput{}, s3Err(err)
	}
	body := in.Body
	if body == nil {
		body = strings.NewReader("")
	}
	sum, err := b.writeFile(ctx, tmp, body)
	if err != nil {
		return s3response.PutObjectOutput{}, fmt.Errorf("put %s/%s: %w", bucket, key, s3Err(err))
	}
	etag := backend.GenerateEtag(sum)
	fi, err := b.install(ctx, tmp, bucket, key, etag, m)
	if err != nil {
		return s3response.PutObjectOutput{}, fmt.Errorf("put %s/%s: %w", bucket, key, s3Err(err))
	}
	return s3response.PutObjectOutput{ETag: etag, Size: ptr(fi.Size())}, nil
}

// objectHead is what GetObject and HeadObject say of an object.
type objectHead struct {
	fi   fs.FileInfo
	etag string
	meta objectMeta
}

// head returns what GetObject and HeadObject say of key, once the
// preconditions hold.
func (b *Backend) head(ctx context.Context, bucket, key string, pre backend.PreConditions) (*objectHead, error) {
	fi, err := b.statObject(ctx, bucket, key)
	if err != nil {
		return nil, err
	}
	p := objectPath(bucket, key)
	oh := &objectHead{fi: fi, etag: b.etagOf(ctx, p, fi)}
	if err := backend.EvaluatePreconditions(oh.etag, fi.ModTime(), pre); err != nil {
		return nil, err
	}
	if oh.meta, err = b.getMeta(ctx, p); err != nil {
		return nil, fmt.Errorf("metadata of %s/%s: %w", bucket, key, s3Err(err))
	}
	return oh, nil
}

// GetObject reads an object, or the range of it asked for.
func (b *Backend) GetObject(ctx context.Context, in *s3.GetObjectInput) (*s3.GetObjectOutput, error) {
	bucket, key := deref(in.Bucket), deref(in.Key)
	oh, err := b.head(ctx, bucket, key, backend.PreConditions{
		IfMatch: in.IfMatch, IfNoneMatch: in.IfNoneMatch, IfModSince: in.IfModifiedSince, IfUnmodeSince: in.IfUnmodifiedSince})
	if err != nil {
		return nil, err
	}
	size := oh.fi.Size()
	if oh.fi.IsDir() {
		size = 0
	}
	start, length, ranged, err := backend.ParseObjectRange(size, deref(in.Range))
	if err != nil {
		return nil, err
	}
	if in.PartNumber != nil && *in.PartNumber > 1 {
		return nil, s3err.GetInvalidPartNumberRangeErr(1, *in.PartNumber)
	}
	out := oh.output(size)
	out.ContentLength = ptr(length)
	if ranged {
		out.ContentRange = ptr(fmt.Sprintf("bytes %d-%d/%d", start, start+length-1, size))
	}
	if oh.fi.IsDir() || length == 0 {
		out.Body = io.NopCloser(strings.NewReader(""))
		return out, nil
	}
	h, err := b.fs.OpenFile(ctx, objectPath(bucket, key), os.O_RDONLY, 0)
	if err != nil {
		return nil, fmt.Errorf("open %s/%s: %w", bucket, key, s3Err(err))
	}
	out.Body = &fileBody{r: io.NewSectionReader(h, start, length), f: h}
	return out, nil
}

// output returns the answer of GetObject to oh, but for the body, of an
// object of size bytes.
func (oh *objectHead) output(size int64) *s3.GetObjectOutput {
	return &s3.GetObjectOutput{
		AcceptRanges:       ptr("bytes"),
		ContentLength:      ptr(size),
		ContentType:        oh.meta.header("content-type"),
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
	return io.CopyBuffer(w, struct{ io.Reader }{fb.r}, make([]byte, ioSize))
}

func (fb *fileBody) Close() error { return fb.f.Close() }

// HeadObject returns what GetObject would, but the body.
func (b *Backend) HeadObject(ctx context.Context, in *s3.HeadObjectInput) (*s3.HeadObjectOutput, error) {
	bucket, key := deref(in.Bucket), deref(in.Key)
	oh, err := b.head(ctx, bucket, key, backend.PreConditions{
		IfMatch: in.IfMatch, IfNoneMatch: in.IfNoneMatch, IfModSince: in.IfModifiedSince, IfUnmodeSince: in.IfUnmodifiedSince})
	if err != nil {
		return nil, err
	}
	size := oh.fi.Size()
	if oh.fi.IsDir() {
		size = 0
	}
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
		return fmt.Errorf("delete %s/%s: %w", bucket, key, s3Err(err))
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
	src, err := b.head(ctx, srcBucket, srcKey, backend.PreConditions{
		IfMatch: in.CopySourceIfMatch, IfNoneMatch: in.CopySourceIfNoneMatch,
		IfModSince: in.CopySourceIfModifiedSince, IfUnmodeSince: in.CopySourceIfUnmodifiedSince})
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
			return s3response.CopyObjectOutput{}, fmt.Errorf("copy to %s/%s: %w", dstBucket, dstKey, s3Err(err))
		}
		return s3response.CopyObjectOutput{CopyObjectResult: &s3response.CopyObjectResult{ETag: ptr(emptyETag), LastModified: ptr(src.fi.ModTime())}}, nil
	}
	tmp, err := b.tempPath(ctx)
	if err != nil {
		return s3response.CopyObjectOutput{}, s3Err(err)
	}
	if err := b.copyInto(ctx, tmp, []string{objectPath(srcBucket, srcKey)}); err != nil {
		return s3response.CopyObjectOutput{}, fmt.Errorf("copy %s/%s: %w", srcBucket, srcKey, s3Err(err))
	}
	fi, err := b.install(ctx, tmp, dstBucket, dstKey, src.etag, m)
	if err != nil {
		return s3response.CopyObjectOutput{}, fmt.Errorf("copy to %s/%s: %w", dstBucket, dstKey, s3Err(err))
	}
	return s3response.CopyObjectOutput{CopyObjectResult: &s3response.CopyObjectResult{ETag: ptr(src.etag), LastModified: ptr(fi.ModTime())}}, nil
}

// copyInto writes the files srcs, one after the other, to the new file
// dst: by copy_file_range, which shares their data where the volume can,
// else by reading and writing them.
func (b *Backend) copyInto(ctx context.Context, dst string, srcs []string) error {
	out, err := b.fs.OpenFile(ctx, dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o666)
	if err != nil {
		return err
	}
	var off int64
	for _, s := range srcs {
		var n int64
		if n, err = b.appendFile(ctx, out, off, s); err != nil {
			break
		}
		off += n
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		b.fs.Remove(context.WithoutCancel(ctx), dst)
	}
	return err
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
	n, err := out.CopyFrom(in, 0, off, fi.Size())
	if err == nil || n > 0 || !(errors.Is(err, syscall.EXDEV) || errors.Is(err, syscall.EOPNOTSUPP) || errors.Is(err, syscall.ENOSYS) || errors.Is(err, syscall.EINVAL)) {
		return n, err
	}
	// The volume cannot share the data: copy the bytes.
	if _, err := out.Seek(off, io.SeekStart); err != nil {
		return 0, err
	}
	return copyFull(out, io.NewSectionReader(in, 0, fi.Size()))
}
