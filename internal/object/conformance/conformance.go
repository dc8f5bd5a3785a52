// Package conformance holds the checks of what Sluice needs of an object
// store: round trips, overwrites, ranges, missing keys, deletes, listing
// in key order with pages, concurrent use, atomic overwrites, objects of
// several multipart parts, and puts whose content fails. Each check is a
// function that returns an error describing every problem it found, so
// that both the Go tests (objecttest.Run, for every backend and decorator)
// and `sluice objbench` (against a real bucket) run the same checks.
//
// Every check needs a fresh, empty store of its own (a prefix of a bucket
// will do), and never uses a key that is a path prefix of another key
// ("a/b" and "a/b/c"): a directory-backed store cannot hold both.
package conformance

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"sync"

	"github.com/sluicefs/sluice/internal/object"
)

// DefaultPartSize is the Config.PartSize the Go tests run with: the
// smallest part S3 allows, which the S3 tests configure.
const DefaultPartSize = 5 << 20

// Config adapts the checks to the store under check.
type Config struct {
	// PartSize is the size of the store's multipart parts: the large
	// objects span more than two parts and reads cross part boundaries.
	// Default DefaultPartSize.
	PartSize int64
	// ExactSizes requires Head to report the bytes put. Backends do (and
	// fsck relies on it for plain volumes); decorators that change what
	// they store (compress, encrypt) report stored sizes and leave it
	// false.
	ExactSizes bool
}

// Check is one conformance check.
type Check struct {
	// Name is short and without spaces, for a subtest name.
	Name string
	// Doc says what the check checks, in a few words.
	Doc string
	// Run checks s, which must be fresh and empty, and returns every
	// problem found, joined; nil when s conforms.
	Run func(ctx context.Context, s object.Store) error
}

// Checks returns every check, configured by cfg.
func Checks(cfg Config) []Check {
	if cfg.PartSize <= 0 {
		cfg.PartSize = DefaultPartSize
	}
	c := checker{cfg}
	return []Check{
		{"RoundTrip", "put, then get and head the same object", c.roundTrip},
		{"Overwrite", "overwrite replaces the object", overwrite},
		{"Ranges", "ranged gets, also past the end", ranges},
		{"NotFound", "missing keys are not found (get, head)", notFound},
		{"Delete", "delete, also of a missing key", deleteKeys},
		{"List", "list in key order, by prefix and marker", list},
		{"ListPages", "list in pages", listPages},
		{"Concurrent", "concurrent puts and gets", concurrent},
		{"AtomicOverwrite", "readers never see a torn overwrite", atomicOverwrite},
		{"Large", "objects of several multipart parts", c.large},
		{"FailedPut", "a put whose content fails leaves no trace", c.failedPut},
	}
}

// checker holds the configuration of the checks that need it.
type checker struct{ cfg Config }

// Data returns n deterministic pseudo-random (incompressible) bytes.
func Data(seed uint64, n int) []byte {
	r := rand.New(rand.NewPCG(seed, 0))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// Get reads key with off and limit.
func Get(ctx context.Context, s object.Store, key string, off, limit int64) ([]byte, error) {
	rc, err := s.Get(ctx, key, off, limit)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	return io.ReadAll(rc)
}

// put stores data under key.
func put(ctx context.Context, s object.Store, key string, data []byte) error {
	if err := s.Put(ctx, key, bytes.NewReader(data)); err != nil {
		return fmt.Errorf("Put(%q): %w", key, err)
	}
	return nil
}

// get reads key with off and limit, naming them in its error.
func get(ctx context.Context, s object.Store, key string, off, limit int64) ([]byte, error) {
	b, err := Get(ctx, s, key, off, limit)
	if err != nil {
		return nil, fmt.Errorf("Get(%q, %d, %d): %w", key, off, limit, err)
	}
	return b, nil
}

// problems collects the problems of one check; safe for concurrent use.
type problems struct {
	mu   sync.Mutex
	errs []error
}

func (p *problems) addf(format string, args ...any) {
	p.add(fmt.Errorf(format, args...))
}

func (p *problems) add(err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.errs = append(p.errs, err)
}

func (p *problems) err() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return errors.Join(p.errs...)
}

// checkBytes records a problem if got differs from want, without printing
// megabytes of data.
func (p *problems) checkBytes(what string, got, want []byte) {
	if !bytes.Equal(got, want) {
		p.addf("%s: got %d bytes, want %d bytes (equal prefix %d)", what, len(got), len(want), commonPrefix(got, want))
	}
}

// commonPrefix returns the length of the common prefix of a and b.
func commonPrefix(a, b []byte) int {
	n := min(len(a), len(b))
	for i := range n {
		if a[i] != b[i] {
			return i
		}
	}
	return n
}

// keys returns the keys of infos.
func keys(infos []object.Info) []string {
	var out []string
	for _, i := range infos {
		out = append(out, i.Key)
	}
	return out
}
