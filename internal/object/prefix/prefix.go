// Package prefix provides a Store decorator that keeps all keys under a
// fixed prefix, such as a volume's "<name>/" inside a shared bucket.
package prefix

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/sluicefs/sluice/internal/object"
)

// Store prepends a prefix to every key of the Store it wraps.
type Store struct {
	inner  object.Store
	prefix string
}

var (
	_ object.Store     = (*Store)(nil)
	_ object.Unwrapper = (*Store)(nil)
)

// New returns a Store that stores key as prefix+key in s and strips prefix
// from listed keys. The prefix is used as given: pass "vol/" to keep the
// keys in a directory.
func New(s object.Store, prefix string) object.Store {
	return &Store{inner: s, prefix: prefix}
}

// String returns the inner store's name followed by the prefix.
func (s *Store) String() string {
	return s.inner.String() + s.prefix
}

// Unwrap returns the wrapped store.
func (s *Store) Unwrap() object.Store {
	return s.inner
}

// Get reads from prefix+key.
func (s *Store) Get(ctx context.Context, key string, off, limit int64) (io.ReadCloser, error) {
	return s.inner.Get(ctx, s.prefix+key, off, limit)
}

// Put writes to prefix+key.
func (s *Store) Put(ctx context.Context, key string, r io.Reader) error {
	return s.inner.Put(ctx, s.prefix+key, r)
}

// Delete removes prefix+key.
func (s *Store) Delete(ctx context.Context, key string) error {
	return s.inner.Delete(ctx, s.prefix+key)
}

// Head returns the Info of prefix+key, with Key set to key.
func (s *Store) Head(ctx context.Context, key string) (object.Info, error) {
	info, err := s.inner.Head(ctx, s.prefix+key)
	if err != nil {
		return object.Info{}, err
	}
	info.Key = key
	return info, nil
}

// List lists the inner store under the prefix and strips it from the keys.
func (s *Store) List(ctx context.Context, prefix, marker string, limit int) ([]object.Info, error) {
	if marker != "" {
		marker = s.prefix + marker
	}
	infos, err := s.inner.List(ctx, s.prefix+prefix, marker, limit)
	if err != nil {
		return nil, err
	}
	for i := range infos {
		k, ok := strings.CutPrefix(infos[i].Key, s.prefix)
		if !ok {
			return nil, fmt.Errorf("%s: list: %s returned key %q outside the prefix", s, s.inner, infos[i].Key)
		}
		infos[i].Key = k
	}
	return infos, nil
}
