// Package all builds the registry of object storage backends in one place:
// Open maps a storage name to the backend package that implements it. It
// lives apart from package object so that object does not import its
// backends.
package all

import (
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/sluicefs/sluice/internal/object"
	"github.com/sluicefs/sluice/internal/object/file"
	"github.com/sluicefs/sluice/internal/object/mem"
	"github.com/sluicefs/sluice/internal/object/s3"
)

// Options holds what some storages need besides the bucket string. Open
// never reads the environment: callers fill Options from flags, the volume
// settings or the environment themselves.
type Options struct {
	AccessKey    string
	SecretKey    string
	SessionToken string
}

// backend opens one kind of storage from a bucket string.
type backend struct {
	name string
	open func(bucket string, opt Options) (object.Store, error)
}

// backends lists the supported storages, in the order error messages name
// them.
var backends = []backend{
	{"file", openFile},
	{"mem", func(bucket string, _ Options) (object.Store, error) { return mem.New(bucket), nil }},
	{"s3", openS3},
}

// Open returns the Store for a storage name and a bucket:
//
//   - "file": bucket is a directory path, optionally starting with
//     "file://". The directory need not exist; see object.Creator.
//   - "mem": bucket is a name. Each call returns a new, empty store.
//   - "s3": bucket is a URL, http(s)://HOST:PORT/BUCKET (path-style) or
//     https://BUCKET.HOST (virtual-host style), optionally with ?region=;
//     see s3.ParseURL. Keys in opt take precedence over keys in the URL.
//     The bucket need not exist; see object.Creator.
func Open(storage, bucket string, opt Options) (object.Store, error) {
	for _, b := range backends {
		if b.name == storage {
			s, err := b.open(bucket, opt)
			if err != nil {
				return nil, fmt.Errorf("open %s storage %q: %w", storage, Redact(bucket), err)
			}
			return s, nil
		}
	}
	return nil, fmt.Errorf("unknown storage %q (supported: %s)", storage, strings.Join(Storages(), ", "))
}

// Storages returns the names Open accepts.
func Storages() []string {
	names := make([]string, len(backends))
	for i, b := range backends {
		names[i] = b.name
	}
	return names
}

// Redact returns bucket with the password of a URL replaced, for messages.
func Redact(bucket string) string {
	if !strings.Contains(bucket, "@") {
		return bucket
	}
	u, err := url.Parse(bucket)
	if err != nil || u.User == nil {
		if i := strings.LastIndex(bucket, "@"); i >= 0 {
			return "xxxxx" + bucket[i:]
		}
		return bucket
	}
	return u.Redacted()
}

// openFile opens a directory-backed store.
func openFile(bucket string, _ Options) (object.Store, error) {
	dir := strings.TrimPrefix(bucket, "file://")
	if dir == "" {
		return nil, errors.New("empty directory")
	}
	return file.New(dir)
}

// openS3 opens a bucket of an S3-compatible service.
func openS3(bucket string, opt Options) (object.Store, error) {
	cfg, err := s3.ParseURL(bucket)
	if err != nil {
		return nil, err
	}
	if opt.AccessKey != "" || opt.SecretKey != "" {
		cfg.AccessKey, cfg.SecretKey = opt.AccessKey, opt.SecretKey
	}
	if opt.SessionToken != "" {
		cfg.SessionToken = opt.SessionToken
	}
	return s3.New(cfg)
}
