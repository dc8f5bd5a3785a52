// Package object defines the object storage seam of Sluice: a small Store
// interface that every backend (file, mem, and later s3 and others)
// implements, the sentinel errors callers check with errors.Is, and a
// registry that builds a Store from a storage name and a bucket string.
//
// Error convention: backends return errors wrapping ErrNotFound for a
// missing key and plain wrapped errors otherwise. Retry, rate limits,
// compression, encryption and metrics are decorators that wrap a Store; they
// never live inside a backend.
package object

import (
	"context"
	"errors"
	"io"
	"time"
)

// ErrNotFound reports that a key does not exist.
var ErrNotFound = errors.New("object not found")

// Info describes one stored object.
type Info struct {
	Key     string
	Size    int64
	ModTime time.Time
}

// Store is the interface every object storage backend implements.
//
// Keys are slash-separated strings without a leading slash. Implementations
// must be safe for concurrent use.
type Store interface {
	// String names the store for messages, e.g. "file:///data/bucket/".
	String() string
	// Get returns a reader for limit bytes of key starting at off; a
	// negative limit reads to the end. Reading past the end returns what
	// exists. A missing key yields an error wrapping ErrNotFound.
	Get(ctx context.Context, key string, off, limit int64) (io.ReadCloser, error)
	// Put stores the whole content of r under key, replacing any object
	// there. A reader never sees a partially written object.
	Put(ctx context.Context, key string, r io.Reader) error
	// Delete removes key. Deleting a missing key is not an error.
	Delete(ctx context.Context, key string) error
	// Head returns the Info of key, or an error wrapping ErrNotFound.
	Head(ctx context.Context, key string) (Info, error)
	// List returns up to limit objects whose keys start with prefix and
	// sort after marker, in ascending key order. Fewer than limit results
	// mean the listing is complete.
	List(ctx context.Context, prefix, marker string, limit int) ([]Info, error)
}

// Creator is implemented by stores that can create their bucket (a local
// directory, an S3 bucket) when it does not exist yet.
type Creator interface {
	Create(ctx context.Context) error
}

// Unwrapper is implemented by decorators so callers can reach the store
// they wrap.
type Unwrapper interface {
	Unwrap() Store
}
