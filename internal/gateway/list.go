package gateway

import (
	"context"
	"errors"
	"io/fs"
	"syscall"

	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/versity/versitygw/backend"
	"github.com/versity/versitygw/s3err"
	"github.com/versity/versitygw/s3response"

	"github.com/sluicefs/sluice/internal/vfs/pathfs"
)

// treeFS is the tree of a bucket as an fs.FS, which versitygw's Walk
// lists: it only reads directories, in order.
type treeFS struct {
	ctx  context.Context
	fs   *pathfs.FS
	root string
}

var (
	_ fs.ReadDirFS = treeFS{}
	_ fs.StatFS    = treeFS{}
)

func (t treeFS) path(name string) string {
	if name == "." {
		return t.root
	}
	return t.root + "/" + name
}

// Open is there for fs.FS; Walk reads directories with ReadDir and
// looks at them with Stat.
func (t treeFS) Open(name string) (fs.File, error) {
	return nil, &fs.PathError{Op: "open", Path: name, Err: syscall.ENOTSUP}
}

// Stat returns the attributes of name.
func (t treeFS) Stat(name string) (fs.FileInfo, error) {
	if !fs.ValidPath(name) {
		return nil, &fs.PathError{Op: "stat", Path: name, Err: fs.ErrInvalid}
	}
	return t.fs.Stat(t.ctx, t.path(name))
}

// ReadDir returns the entries of the directory name, sorted.
func (t treeFS) ReadDir(name string) ([]fs.DirEntry, error) {
	if !fs.ValidPath(name) {
		return nil, &fs.PathError{Op: "readdir", Path: name, Err: fs.ErrInvalid}
	}
	list, err := t.fs.ReadDir(t.ctx, t.path(name))
	if err != nil {
		return nil, err
	}
	out := make([]fs.DirEntry, len(list))
	for i, fi := range list {
		out[i] = fs.FileInfoToDirEntry(fi)
	}
	return out, nil
}

// walk lists the objects of bucket as ListObjects asks.
func (b *Backend) walk(ctx context.Context, bucket, prefix, delim, marker string, max int32) (backend.WalkResults, error) {
	if _, err := b.statBucket(ctx, bucket); err != nil {
		return backend.WalkResults{}, err
	}
	root := bucketPath(bucket)
	getObj := func(p string, d fs.DirEntry) (s3response.Object, error) {
		fi, err := d.Info()
		if err != nil {
			return s3response.Object{}, err
		}
		full := root + "/" + p
		if d.IsDir() {
			// A directory is an object when it was made as one.
			if _, err := b.fs.GetXattr(ctx, full, xattrETag); err != nil {
				return s3response.Object{}, backend.ErrSkipObj
			}
		} else if !fi.Mode().IsRegular() {
			return s3response.Object{}, backend.ErrSkipObj
		}
		size := fi.Size()
		if d.IsDir() {
			size = 0
		}
		return s3response.Object{
			Key:          ptr(p),
			ETag:         ptr(etagOf(pathAttrs{ctx: ctx, fs: b.fs, p: full}, fi)),
			LastModified: ptr(fi.ModTime()),
			Size:         ptr(size),
			StorageClass: "STANDARD",
		}, nil
	}
	res, err := backend.Walk(ctx, treeFS{ctx: ctx, fs: b.fs, root: root}, prefix, delim, marker, max, getObj, nil)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return backend.WalkResults{}, s3err.GetBucketErr(s3err.ErrNoSuchBucket, bucket)
		}
		return backend.WalkResults{}, failed(err, "list %s", bucket)
	}
	return res, nil
}

func maxKeys(p *int32) int32 {
	if p == nil || *p > 1000 {
		return 1000
	}
	if *p < 0 {
		return 0
	}
	return *p
}

// ListObjects lists the objects of a bucket (version 1: by marker).
func (b *Backend) ListObjects(ctx context.Context, in *s3.ListObjectsInput) (s3response.ListObjectsResult, error) {
	bucket, max := deref(in.Bucket), maxKeys(in.MaxKeys)
	res, err := b.walk(ctx, bucket, deref(in.Prefix), deref(in.Delimiter), deref(in.Marker), max)
	if err != nil {
		return s3response.ListObjectsResult{}, err
	}
	out := s3response.ListObjectsResult{
		Name: ptr(bucket), Prefix: in.Prefix, Marker: in.Marker, MaxKeys: ptr(max), Delimiter: in.Delimiter,
		IsTruncated: ptr(res.Truncated), Contents: res.Objects, CommonPrefixes: res.CommonPrefixes, EncodingType: in.EncodingType,
	}
	if res.Truncated {
		out.NextMarker = ptr(res.NextMarker)
	}
	return out, nil
}

// ListObjectsV2 lists the objects of a bucket (version 2: by
// continuation token, the key the last page ended at).
func (b *Backend) ListObjectsV2(ctx context.Context, in *s3.ListObjectsV2Input) (s3response.ListObjectsV2Result, error) {
	bucket, max := deref(in.Bucket), maxKeys(in.MaxKeys)
	marker := deref(in.StartAfter)
	if t := deref(in.ContinuationToken); t > marker {
		marker = t
	}
	res, err := b.walk(ctx, bucket, deref(in.Prefix), deref(in.Delimiter), marker, max)
	if err != nil {
		return s3response.ListObjectsV2Result{}, err
	}
	out := s3response.ListObjectsV2Result{
		Name: ptr(bucket), Prefix: in.Prefix, StartAfter: in.StartAfter, ContinuationToken: in.ContinuationToken,
		KeyCount: ptr(int32(len(res.Objects) + len(res.CommonPrefixes))), MaxKeys: ptr(max), Delimiter: in.Delimiter,
		IsTruncated: ptr(res.Truncated), Contents: res.Objects, CommonPrefixes: res.CommonPrefixes, EncodingType: in.EncodingType,
	}
	if res.Truncated {
		out.NextContinuationToken = ptr(res.NextMarker)
	}
	return out, nil
}
