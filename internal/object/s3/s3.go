// Package s3 implements object.Store on any S3-compatible object store
// (AWS S3, MinIO, Ceph RGW, versitygw, ...) with the minio-go client.
//
// A Store is built from a Config, usually parsed from a bucket URL by
// ParseURL: http://HOST:PORT/BUCKET is path-style, https://BUCKET.HOST is
// virtual-host style. Credentials are passed in; the package never reads
// the environment.
//
// Get maps (off, limit) to a ranged GET; Put streams its reader, sending
// objects up to PartSize in one PUT and larger ones as a multipart upload
// with PartSize parts, so memory stays bounded by one part; List pages
// through ListObjectsV2 with StartAfter.
//
// Errors follow the object package convention: a missing key wraps
// object.ErrNotFound, throttling and server errors wrap object.ErrTransient
// (network errors keep their cause, which the retry decorator recognises),
// and the package does not retry by itself. A missing bucket, refused credentials and an
// unreachable endpoint wrap ErrBucketNotFound, ErrAccessDenied and
// ErrUnreachable; their messages are one line naming the endpoint and never
// hold a secret.
package s3

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"net/http"
	"sync/atomic"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"

	"github.com/sluicefs/sluice/internal/object"
)

// Limits of Config.PartSize set by the S3 protocol.
const (
	MinPartSize     = 5 << 20
	MaxPartSize     = 5 << 30
	DefaultPartSize = 16 << 20
)

// listPage is the largest page ListObjectsV2 returns.
const listPage = 1000

// Config configures a Store.
type Config struct {
	Endpoint    string // HOST[:PORT] of the service, without the bucket
	Secure      bool   // https instead of http
	Bucket      string
	Region      string // signing region; DefaultRegion when empty
	VirtualHost bool   // address the bucket as BUCKET.Endpoint instead of Endpoint/BUCKET

	AccessKey    string // empty for anonymous requests
	SecretKey    string
	SessionToken string // for temporary credentials

	// PartSize is the size of the parts of a multipart upload and the
	// largest object sent in one PUT.
	PartSize int64
	// UploadThreads is how many parts of one multipart upload are sent at
	// a time (default 4). A streamed Put holds that many parts in memory.
	UploadThreads int
	// MaxRetries is how often the client library tries a request (1, the
	// default: once). Retries belong to the retry decorator
	// (internal/object/retry), which sees the errors this package marks
	// with object.ErrTransient; trying in both places multiplies delays.
	MaxRetries int
	// Transport, when set, replaces the HTTP transport (tests use it to
	// reach a virtual-host bucket on loopback).
	Transport http.RoundTripper
}

// Defaults fills unset fields with their defaults.
func (c *Config) Defaults() {
	if c.Region == "" {
		c.Region = DefaultRegion
	}
	if c.PartSize == 0 {
		c.PartSize = DefaultPartSize
	}
	if c.MaxRetries == 0 {
		c.MaxRetries = 1
	}
	if c.UploadThreads == 0 {
		c.UploadThreads = 4
	}
}

// Validate checks a Config after Defaults.
func (c *Config) Validate() error {
	switch {
	case c.Endpoint == "":
		return errors.New("no endpoint")
	case c.Bucket == "":
		return errors.New("no bucket")
	case c.PartSize < MinPartSize || c.PartSize > MaxPartSize:
		return fmt.Errorf("part size %d out of range [%d, %d]", c.PartSize, MinPartSize, MaxPartSize)
	case c.UploadThreads < 1:
		return fmt.Errorf("upload threads %d: must be at least 1", c.UploadThreads)
	case c.SecretKey != "" && c.AccessKey == "":
		return errors.New("a secret key without an access key")
	}
	return nil
}

// URL returns the bucket URL of c, without credentials.
func (c *Config) URL() string {
	scheme := "http"
	if c.Secure {
		scheme = "https"
	}
	if c.VirtualHost {
		return scheme + "://" + c.Bucket + "." + c.Endpoint + "/"
	}
	return scheme + "://" + c.Endpoint + "/" + c.Bucket + "/"
}

// Store is an object.Store in one S3 bucket.
type Store struct {
	client   *minio.Client
	bucket   string
	region   string
	partSize int64
	threads  int    // parts of one upload in flight
	url      string // bucket URL for messages, without credentials
	// signed is set once the server refused an unsigned body with a
	// checksum (see Put): bodies are signed from then on.
	signed atomic.Bool
}

var (
	_ object.Store   = (*Store)(nil)
	_ object.Creator = (*Store)(nil)
)

// New returns a Store for cfg. It makes no request: a wrong endpoint or
// credentials show in the first operation.
func New(cfg Config) (*Store, error) {
	cfg.Defaults()
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("s3 %s: %w", cfg.URL(), err)
	}
	lookup := minio.BucketLookupPath
	if cfg.VirtualHost {
		lookup = minio.BucketLookupDNS
	}
	opts := &minio.Options{
		Creds:        credentials.NewStaticV4(cfg.AccessKey, cfg.SecretKey, cfg.SessionToken),
		Secure:       cfg.Secure,
		Region:       cfg.Region,
		BucketLookup: lookup,
		MaxRetries:   cfg.MaxRetries,
		Transport:    cfg.Transport,
		// Bodies carry a CRC-32C trailer (see Put).
		TrailingHeaders: true,
	}
	client, err := minio.New(cfg.Endpoint, opts)
	if err != nil {
		return nil, fmt.Errorf("s3 %s: %w", cfg.URL(), err)
	}
	return &Store{client: client, bucket: cfg.Bucket, region: cfg.Region, partSize: cfg.PartSize,
		threads: cfg.UploadThreads, url: cfg.URL()}, nil
}

// String returns the bucket URL, without credentials.
func (s *Store) String() string {
	return s.url
}

// Create creates the bucket when it does not exist.
func (s *Store) Create(ctx context.Context) error {
	ok, err := s.client.BucketExists(ctx, s.bucket)
	if err != nil {
		return s.classify("check bucket", "", err)
	}
	if ok {
		return nil
	}
	err = s.client.MakeBucket(ctx, s.bucket, minio.MakeBucketOptions{Region: s.region})
	if code := minio.ToErrorResponse(err).Code; code == "BucketAlreadyOwnedByYou" {
		return nil
	}
	if err != nil {
		return s.classify("create bucket", "", err)
	}
	return nil
}

// Get returns limit bytes of key from off with a ranged GET; a negative
// limit reads to the end.
func (s *Store) Get(ctx context.Context, key string, off, limit int64) (io.ReadCloser, error) {
	if off < 0 {
		return nil, fmt.Errorf("%s: get %q: negative offset %d", s, key, off)
	}
	if limit == 0 {
		// No range can ask for nothing; still report a missing key.
		if _, err := s.Head(ctx, key); err != nil {
			return nil, err
		}
		return io.NopCloser(bytes.NewReader(nil)), nil
	}
	var opts minio.GetObjectOptions
	var err error
	switch {
	case limit > 0:
		err = opts.SetRange(off, off+limit-1)
	case off > 0:
		err = opts.SetRange(off, 0)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: get %q: %w", s, key, err)
	}
	rc, _, _, err := minio.Core{Client: s.client}.GetObject(ctx, s.bucket, key, opts)
	if err != nil {
		if minio.ToErrorResponse(err).StatusCode == http.StatusRequestedRangeNotSatisfiable {
			// The object exists and ends before off.
			return io.NopCloser(bytes.NewReader(nil)), nil
		}
		return nil, s.classify("get", key, err)
	}
	return rc, nil
}

// Put stores the content of r under key. Objects up to the part size go in
// one PUT; larger ones are streamed as a multipart upload, UploadThreads
// parts at a time, which the client aborts if the upload fails, so no
// partial object becomes visible.
func (s *Store) Put(ctx context.Context, key string, r io.Reader) error {
	// The body is not signed (no SHA-256 of every 64 KiB, which took a
	// third of a writing mount's CPU over plain HTTP); its integrity is a
	// CRC-32C the server checks. A server that refuses that gets signed
	// bodies from then on.
	opts := minio.PutObjectOptions{ContentType: "application/octet-stream", PartSize: uint64(s.partSize),
		NumThreads: uint(s.threads)}
	size := knownSize(r)
	if size < 0 {
		// Read up to one part: a small object then goes in one PUT with a
		// known length instead of a three-request multipart upload.
		var buf bytes.Buffer
		n, err := buf.ReadFrom(io.LimitReader(r, s.partSize+1))
		if err != nil {
			return fmt.Errorf("%s: put %q: read: %w", s, key, err)
		}
		if n <= s.partSize {
			r, size = bytes.NewReader(buf.Bytes()), n
		} else {
			r = io.MultiReader(&buf, r)
			opts.ConcurrentStreamParts = s.threads > 1
		}
	}
	unsigned := !s.signed.Load()
	if unsigned {
		opts.DisableContentSha256 = true
		rs, seekable := r.(io.ReadSeeker)
		if seekable && size >= 0 && size <= s.partSize {
			// One PUT of a body at hand (a block): its CRC-32C goes in a
			// header and the body as it is. A trailer would wrap the body
			// in aws-chunked encoding, which both ends then pay for.
			sum, err := crc32c(rs)
			if err != nil {
				return fmt.Errorf("%s: put %q: read: %w", s, key, err)
			}
			opts.UserMetadata = map[string]string{"x-amz-checksum-crc32c": sum}
		} else {
			opts.Checksum = minio.ChecksumCRC32C
		}
	}
	_, err := s.client.PutObject(ctx, s.bucket, key, r, size, opts)
	if err != nil && unsigned && refusesUnsignedBodies(err) {
		s.signed.Store(true)
		if sk, ok := r.(io.Seeker); ok {
			if _, serr := sk.Seek(0, io.SeekStart); serr == nil {
				return s.Put(ctx, key, r)
			}
		}
	}
	if err != nil {
		return s.classify("put", key, err)
	}
	return nil
}

// crc32c returns the base64 CRC-32C (Castagnoli) of what is left of rs,
// and seeks back to where it started.
func crc32c(rs io.ReadSeeker) (string, error) {
	start, err := rs.Seek(0, io.SeekCurrent)
	if err != nil {
		return "", err
	}
	h := crc32.New(crc32.MakeTable(crc32.Castagnoli))
	if _, err := io.Copy(h, rs); err != nil {
		return "", err
	}
	if _, err := rs.Seek(start, io.SeekStart); err != nil {
		return "", err
	}
	return base64.StdEncoding.EncodeToString(h.Sum(nil)), nil
}

// refusesUnsignedBodies tells whether a PUT failed because the server
// does not take unsigned bodies with checksums (an older S3 server).
func refusesUnsignedBodies(err error) bool {
	resp := minio.ToErrorResponse(err)
	switch resp.Code {
	case "NotImplemented", "InvalidRequest", "InvalidArgument":
		return resp.StatusCode == http.StatusNotImplemented || resp.StatusCode == http.StatusBadRequest
	}
	return false
}

// knownSize returns the number of bytes left in r when r tells it without
// being read, and -1 otherwise.
// (bytes.Reader, bytes.Buffer, strings.Reader and decorators' wrappers of
// them have a Len method.)
func knownSize(r io.Reader) int64 {
	if l, ok := r.(interface{ Len() int }); ok {
		return int64(l.Len())
	}
	return -1
}

// Delete removes key; a missing key is not an error.
func (s *Store) Delete(ctx context.Context, key string) error {
	err := s.client.RemoveObject(ctx, s.bucket, key, minio.RemoveObjectOptions{})
	if err != nil && !errors.Is(s.classify("delete", key, err), object.ErrNotFound) {
		return s.classify("delete", key, err)
	}
	return nil
}

// Head returns the size and modification time of key. A HEAD response has
// no error body: on a missing bucket Head also reports object.ErrNotFound.
func (s *Store) Head(ctx context.Context, key string) (object.Info, error) {
	oi, err := s.client.StatObject(ctx, s.bucket, key, minio.StatObjectOptions{})
	if err != nil {
		return object.Info{}, s.classify("head", key, err)
	}
	return object.Info{Key: key, Size: oi.Size, ModTime: oi.LastModified}, nil
}

// List returns up to limit keys (all when limit <= 0) that start with
// prefix and sort after marker, paging through ListObjectsV2.
func (s *Store) List(ctx context.Context, prefix, marker string, limit int) ([]object.Info, error) {
	page := listPage
	if limit > 0 && limit < page {
		page = limit
	}
	fetchOwner := false
	opts := minio.ListObjectsOptions{
		Prefix: prefix, StartAfter: marker, Recursive: true, MaxKeys: page, FetchOwner: &fetchOwner,
	}
	var out []object.Info
	for oi := range s.client.ListObjectsIter(ctx, s.bucket, opts) {
		if oi.Err != nil {
			return nil, s.classify("list", prefix, oi.Err)
		}
		out = append(out, object.Info{Key: oi.Key, Size: oi.Size, ModTime: oi.LastModified})
		if limit > 0 && len(out) == limit {
			break
		}
	}
	return out, nil
}
