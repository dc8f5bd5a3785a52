// Package all builds the registry of object storage backends in one place:
// Open maps a storage name to the backend package that implements it. It
// lives apart from package object so that object does not import its
// backends.
package all

import (
	"errors"
	"fmt"
	"strings"

	"github.com/sluicefs/sluice/internal/object"
	"github.com/sluicefs/sluice/internal/object/file"
	"github.com/sluicefs/sluice/internal/object/mem"
)

// backend opens one kind of storage from a bucket string.
type backend struct {
	name string
	open func(bucket string) (object.Store, error)
}

// backends lists the supported storages, in the order error messages name
// them.
var backends = []backend{
	{"file", openFile},
	{"mem", func(bucket string) (object.Store, error) { return mem.New(bucket), nil }},
}

// Open returns the Store for a storage name and a bucket:
//
//   - "file": bucket is a directory path, optionally starting with
//     "file://". The directory need not exist; see object.Creator.
//   - "mem": bucket is a name. Each call returns a new, empty store.
func Open(storage, bucket string) (object.Store, error) {
	for _, b := range backends {
		if b.name == storage {
			s, err := b.open(bucket)
			if err != nil {
				return nil, fmt.Errorf("open %s storage %q: %w", storage, bucket, err)
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

// openFile opens a directory-backed store.
func openFile(bucket string) (object.Store, error) {
	dir := strings.TrimPrefix(bucket, "file://")
	if dir == "" {
		return nil, errors.New("empty directory")
	}
	return file.New(dir)
}
