// Package mem implements object.Store in memory. It is the in-memory twin
// of the real backends: tests use it in place of a bucket, and it follows
// the same contract, checked by the objecttest suite.
//
// Errors follow the object package convention: a missing key yields an error
// wrapping object.ErrNotFound.
package mem

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/sluicefs/sluice/internal/object"
)

// Store is an object.Store that keeps objects in a map.
type Store struct {
	name string
	mu   struct {
		sync.Mutex
		objects map[string]entry
	}
}

// entry is one stored object. data is never modified after Put, so readers
// may share it without holding the lock.
type entry struct {
	data    []byte
	modTime time.Time
}

var _ object.Store = (*Store)(nil)

// New returns an empty Store. The name only appears in String; every call
// returns a new, independent store.
func New(name string) *Store {
	s := &Store{name: name}
	s.mu.objects = make(map[string]entry)
	return s
}

// String returns "mem://" followed by the name and a slash.
func (s *Store) String() string {
	return "mem://" + s.name + "/"
}

// lookup returns the entry of key.
func (s *Store) lookup(key string) (entry, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.mu.objects[key]
	return e, ok
}

// Get returns limit bytes of key from off; a negative limit reads to the end.
func (s *Store) Get(ctx context.Context, key string, off, limit int64) (io.ReadCloser, error) {
	if off < 0 {
		return nil, fmt.Errorf("%s: get %q: negative offset %d", s, key, off)
	}
	e, ok := s.lookup(key)
	if !ok {
		return nil, fmt.Errorf("%s: get %q: %w", s, key, object.ErrNotFound)
	}
	data := e.data[min(off, int64(len(e.data))):]
	if limit >= 0 && limit < int64(len(data)) {
		data = data[:limit]
	}
	return io.NopCloser(bytes.NewReader(data)), nil
}

// Put stores a copy of the content of r under key.
func (s *Store) Put(ctx context.Context, key string, r io.Reader) error {
	if key == "" {
		return fmt.Errorf("%s: put: %w", s, errors.New("empty key"))
	}
	data, err := object.ReadAll(r)
	if err != nil {
		return fmt.Errorf("%s: put %q: %w", s, key, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.mu.objects[key] = entry{data: data, modTime: time.Now()}
	return nil
}

// Delete removes key; deleting a missing key is not an error.
func (s *Store) Delete(ctx context.Context, key string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.mu.objects, key)
	return nil
}

// Head returns the size and modification time of key.
func (s *Store) Head(ctx context.Context, key string) (object.Info, error) {
	e, ok := s.lookup(key)
	if !ok {
		return object.Info{}, fmt.Errorf("%s: head %q: %w", s, key, object.ErrNotFound)
	}
	return object.Info{Key: key, Size: int64(len(e.data)), ModTime: e.modTime}, nil
}

// List returns up to limit objects whose keys start with prefix and sort
// after marker, in ascending key order. A limit <= 0 means no limit.
func (s *Store) List(ctx context.Context, prefix, marker string, limit int) ([]object.Info, error) {
	var out []object.Info
	s.mu.Lock()
	for k, e := range s.mu.objects {
		if strings.HasPrefix(k, prefix) && k > marker {
			out = append(out, object.Info{Key: k, Size: int64(len(e.data)), ModTime: e.modTime})
		}
	}
	s.mu.Unlock()
	slices.SortFunc(out, func(a, b object.Info) int { return strings.Compare(a.Key, b.Key) })
	if limit > 0 && len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}
