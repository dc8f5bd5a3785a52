// Package gateway serves a volume over the S3 protocol: a back end of
// versitygw's S3 front end (github.com/versity/versitygw) over the path
// API of the VFS (pathfs), so the gateway runs the client a mount runs,
// without FUSE.
//
// Buckets are the directories at the root of what is served, objects
// are the files under them: a key with slashes is a path, whose
// directories are made as needed and removed when a delete leaves them
// empty. A key ending in a slash is a directory. Content-Type, the
// other standard headers and the user metadata (x-amz-meta-*) are
// extended attributes of the file (user.s3.*), as is the ETag, stamped
// with the size and mtime it was computed for, so a file a mount changes
// afterwards gets an ETag of its own. What the gateway writes appears
// whole, by a rename of a file it wrote under a hidden directory at the
// root (.s3gateway), which holds the parts of multipart uploads too.
package gateway

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/versity/versitygw/backend"
	"github.com/versity/versitygw/s3err"
	"github.com/versity/versitygw/s3response"

	"github.com/sluicefs/sluice/internal/vfs/pathfs"
)

// sysDir is the directory, at the root of what is served, of the
// gateway's own files: no bucket, as a bucket's name cannot begin with
// a dot.
const sysDir = "/.s3gateway"

// Backend is the S3 back end over a tree of files.
type Backend struct {
	backend.BackendUnsupported
	fs *pathfs.FS
	// acls holds the ACLs of buckets looked up in the last aclTTL, as
	// aclEntry: versitygw asks for the bucket's ACL before every request
	// on it.
	acls sync.Map
}

// aclTTL is how long a bucket's ACL is kept, and so how long a bucket a
// mount removed may still pass versitygw's check (the call itself then
// finds the bucket gone).
const aclTTL = time.Second

type aclEntry struct {
	acl []byte
	at  time.Time
}

var _ backend.Backend = (*Backend)(nil)

// New returns the back end over fsys.
func New(fsys *pathfs.FS) *Backend { return &Backend{fs: fsys} }

// String names the back end in versitygw's logs.
func (b *Backend) String() string { return "sluice" }

// bucketPath returns the directory of bucket.
func bucketPath(bucket string) string { return "/" + bucket }

// objectPath returns the file of key in bucket.
func objectPath(bucket, key string) string { return "/" + bucket + "/" + key }

// checkBucket refuses names that are not one directory of the root:
// versitygw checks names as S3 does, and this keeps any it lets through
// (with strict names off) inside the tree.
func checkBucket(bucket string) error {
	if bucket == "" || strings.ContainsAny(bucket, "/\x00") || strings.HasPrefix(bucket, ".") {
		return s3err.GetBucketErr(s3err.ErrInvalidBucketName, bucket)
	}
	return nil
}

// checkKey refuses keys a path cannot hold as they are: components "."
// and "..", empty ones (but a trailing slash, a directory) and NULs.
func checkKey(key string) error {
	if key == "" || strings.ContainsRune(key, 0) {
		return s3err.GetAPIError(s3err.ErrInvalidRequest)
	}
	parts := strings.Split(strings.TrimSuffix(key, "/"), "/")
	for _, p := range parts {
		if p == "" || p == "." || p == ".." {
			return s3err.GetAPIError(s3err.ErrInvalidRequest)
		}
		if len(p) > 255 {
			return s3err.GetKeyTooLongErr(int64(len(key)), 1024)
		}
	}
	return nil
}

// statBucket returns the attributes of bucket's directory, or
// NoSuchBucket.
func (b *Backend) statBucket(ctx context.Context, bucket string) (fs.FileInfo, error) {
	if err := checkBucket(bucket); err != nil {
		return nil, err
	}
	fi, err := b.fs.Stat(ctx, bucketPath(bucket))
	if errors.Is(err, fs.ErrNotExist) || err == nil && !fi.IsDir() {
		return nil, s3err.GetBucketErr(s3err.ErrNoSuchBucket, bucket)
	}
	if err != nil {
		return nil, s3Err(err)
	}
	return fi, nil
}

// failed returns err as the error to answer a call with: an S3 error
// as it is, unwrapped (versitygw answers with the S3 errors it finds
// unwrapped, and with InternalError for anything else), an errno that
// has an S3 error as that error, and others wrapped with what failed,
// format and args as fmt.Sprintf takes them.
func failed(err error, format string, args ...any) error {
	if err == nil {
		return nil
	}
	var s3e s3err.S3Error
	if errors.As(err, &s3e) {
		return s3e
	}
	if mapped := s3Err(err); mapped != nil {
		if _, ok := mapped.(s3err.S3Error); ok {
			return mapped
		}
	}
	return fmt.Errorf("%s: %w", fmt.Sprintf(format, args...), err)
}

// s3Err returns err as the S3 error clients understand where there is
// one; others are internal errors, as they come.
func s3Err(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, syscall.EACCES), errors.Is(err, syscall.EPERM), errors.Is(err, syscall.EROFS):
		return s3err.GetAPIError(s3err.ErrAccessDenied)
	case errors.Is(err, syscall.ENAMETOOLONG):
		return s3err.GetKeyTooLongErr(0, 1024)
	case errors.Is(err, fs.ErrNotExist):
		return s3err.GetAPIError(s3err.ErrNoSuchKey)
	}
	return err
}

// ListBuckets lists the directories at the root.
func (b *Backend) ListBuckets(ctx context.Context, in s3response.ListBucketsInput) (s3response.ListAllMyBucketsResult, error) {
	list, err := b.fs.ReadDir(ctx, "/")
	if err != nil {
		return s3response.ListAllMyBucketsResult{}, failed(err, "list buckets")
	}
	out := s3response.ListAllMyBucketsResult{Owner: s3response.CanonicalUser{ID: in.Owner}, Prefix: in.Prefix}
	for _, fi := range list {
		name := fi.Name()
		if !fi.IsDir() || strings.HasPrefix(name, ".") || !strings.HasPrefix(name, in.Prefix) || name <= in.ContinuationToken {
			continue
		}
		if in.MaxBuckets > 0 && len(out.Buckets.Bucket) == int(in.MaxBuckets) {
			out.ContinuationToken = out.Buckets.Bucket[len(out.Buckets.Bucket)-1].Name
			break
		}
		out.Buckets.Bucket = append(out.Buckets.Bucket, s3response.ListAllMyBucketsEntry{Name: name, CreationDate: fi.ModTime()})
	}
	return out, nil
}

// ListBucketsAndOwners lists the buckets for versitygw's admin API: the
// root account owns them all.
func (b *Backend) ListBucketsAndOwners(ctx context.Context) ([]s3response.Bucket, error) {
	res, err := b.ListBuckets(ctx, s3response.ListBucketsInput{IsAdmin: true})
	if err != nil {
		return nil, err
	}
	var out []s3response.Bucket
	for _, e := range res.Buckets.Bucket {
		out = append(out, s3response.Bucket{Name: e.Name})
	}
	return out, nil
}

// HeadBucket answers whether bucket exists.
func (b *Backend) HeadBucket(ctx context.Context, in *s3.HeadBucketInput) (*s3.HeadBucketOutput, error) {
	if _, err := b.statBucket(ctx, deref(in.Bucket)); err != nil {
		return nil, err
	}
	return &s3.HeadBucketOutput{}, nil
}

// CreateBucket makes the directory of a bucket and keeps its ACL.
func (b *Backend) CreateBucket(ctx context.Context, in *s3.CreateBucketInput, acl []byte) error {
	bucket := deref(in.Bucket)
	if err := checkBucket(bucket); err != nil {
		return err
	}
	b.acls.Delete(bucket)
	err := b.fs.Mkdir(ctx, bucketPath(bucket), 0o777)
	if errors.Is(err, fs.ErrExist) {
		return s3err.GetAPIError(s3err.ErrBucketAlreadyOwnedByYou)
	}
	if err != nil {
		return failed(err, "create bucket %s", bucket)
	}
	if len(acl) > 0 {
		if err := b.fs.SetXattr(ctx, bucketPath(bucket), xattrACL, acl); err != nil && !noXattrs(err) {
			return failed(err, "create bucket %s", bucket)
		}
	}
	return nil
}

// DeleteBucket removes the directory of an empty bucket, and the
// multipart uploads begun in it.
func (b *Backend) DeleteBucket(ctx context.Context, bucket string) error {
	if _, err := b.statBucket(ctx, bucket); err != nil {
		return err
	}
	b.acls.Delete(bucket)
	err := b.fs.Remove(ctx, bucketPath(bucket))
	if errors.Is(err, syscall.ENOTEMPTY) || errors.Is(err, syscall.EEXIST) {
		return s3err.GetAPIError(s3err.ErrBucketNotEmpty)
	}
	if err != nil {
		return failed(err, "delete bucket %s", bucket)
	}
	b.abortUploadsOf(ctx, bucket)
	return nil
}

// GetBucketAcl returns the ACL kept when the bucket was made (none, for
// a directory a mount made: the root account owns it).
func (b *Backend) GetBucketAcl(ctx context.Context, in *s3.GetBucketAclInput) ([]byte, error) {
	bucket := deref(in.Bucket)
	if e, ok := b.acls.Load(bucket); ok && time.Since(e.(aclEntry).at) < aclTTL {
		return e.(aclEntry).acl, nil
	}
	if _, err := b.statBucket(ctx, bucket); err != nil {
		b.acls.Delete(bucket)
		return nil, err
	}
	acl, err := b.fs.GetXattr(ctx, bucketPath(bucket), xattrACL)
	if errors.Is(err, syscall.ENODATA) || noXattrs(err) {
		acl, err = nil, nil
	}
	if err != nil {
		return nil, failed(err, "bucket %s acl", bucket)
	}
	b.acls.Store(bucket, aclEntry{acl: acl, at: time.Now()})
	return acl, nil
}

// PutBucketAcl keeps the bucket's ACL.
func (b *Backend) PutBucketAcl(ctx context.Context, bucket string, acl []byte) error {
	if _, err := b.statBucket(ctx, bucket); err != nil {
		return err
	}
	b.acls.Delete(bucket)
	if err := b.fs.SetXattr(ctx, bucketPath(bucket), xattrACL, acl); err != nil {
		if noXattrs(err) {
			return s3err.GetAPIError(s3err.ErrNotImplemented)
		}
		return failed(err, "bucket %s acl", bucket)
	}
	return nil
}

// GetBucketPolicy answers that buckets have no policies: versitygw asks
// before it authorizes requests.
func (b *Backend) GetBucketPolicy(ctx context.Context, bucket string) ([]byte, error) {
	if _, err := b.statBucket(ctx, bucket); err != nil {
		return nil, err
	}
	return nil, s3err.GetAPIError(s3err.ErrNoSuchBucketPolicy)
}

// GetObjectLockConfiguration answers that no bucket locks objects:
// versitygw asks before deletes.
func (b *Backend) GetObjectLockConfiguration(ctx context.Context, bucket string) ([]byte, error) {
	if _, err := b.statBucket(ctx, bucket); err != nil {
		return nil, err
	}
	return nil, s3err.GetAPIError(s3err.ErrObjectLockConfigurationNotFound)
}

// GetBucketOwnershipControls answers that buckets have none.
func (b *Backend) GetBucketOwnershipControls(ctx context.Context, bucket string) (types.ObjectOwnership, error) {
	if _, err := b.statBucket(ctx, bucket); err != nil {
		return "", err
	}
	return "", s3err.GetAPIError(s3err.ErrOwnershipControlsNotFound)
}

// GetBucketCors answers that buckets have no CORS configuration.
func (b *Backend) GetBucketCors(ctx context.Context, bucket string) ([]byte, error) {
	if _, err := b.statBucket(ctx, bucket); err != nil {
		return nil, err
	}
	return nil, s3err.GetAPIError(s3err.ErrNoSuchCORSConfiguration)
}

// GetBucketVersioning answers that versioning was never enabled.
func (b *Backend) GetBucketVersioning(ctx context.Context, bucket string) (s3response.GetBucketVersioningOutput, error) {
	if _, err := b.statBucket(ctx, bucket); err != nil {
		return s3response.GetBucketVersioningOutput{}, err
	}
	return s3response.GetBucketVersioningOutput{}, nil
}

// GetBucketTagging answers that buckets have no tags.
func (b *Backend) GetBucketTagging(ctx context.Context, bucket string) (map[string]string, error) {
	if _, err := b.statBucket(ctx, bucket); err != nil {
		return nil, err
	}
	return map[string]string{}, nil
}

// GetObjectTagging answers that objects have no tags.
func (b *Backend) GetObjectTagging(ctx context.Context, bucket, key, _ string) (map[string]string, error) {
	if _, err := b.statObject(ctx, bucket, key); err != nil {
		return nil, err
	}
	return map[string]string{}, nil
}

// removeEmptyParents removes the directories above key in bucket that
// are left empty, up to the bucket, as S3 has no directories but those
// a key names; a directory that is an object of its own stays.
func (b *Backend) removeEmptyParents(ctx context.Context, bucket, key string) {
	dir := path.Dir(strings.TrimSuffix(key, "/"))
	for dir != "." && dir != "/" {
		p := objectPath(bucket, dir)
		if _, err := b.fs.GetXattr(ctx, p, xattrETag); err == nil {
			return // a directory object
		}
		if err := b.fs.Remove(ctx, p); err != nil {
			return
		}
		dir = path.Dir(dir)
	}
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

func ptr[T any](v T) *T { return &v }

// sortedKeys returns the keys of m in order.
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// tempName returns a name for a file of the gateway's own, unique in the
// process and across processes.
func tempName() string {
	return fmt.Sprintf("%d.%d.%s", os.Getpid(), time.Now().UnixNano(), randomHex(8))
}
