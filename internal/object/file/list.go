package file

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/sluicefs/sluice/internal/object"
)

// List returns up to limit objects whose keys start with prefix and sort
// after marker, in ascending key order. A limit <= 0 means no limit.
//
// The walk yields keys in string order without sorting the whole result:
// within a directory, a subdirectory "b" holds exactly the keys starting
// with "b/", so ordering the entries by name, with "/" appended to
// directory names, orders the keys ("a/b-c" < "a/b/c" although the
// directory "b" sorts before the file "b-c"). Subtrees that cannot match
// prefix or lie entirely at or before marker are not read, and the walk
// stops at limit.
func (s *Store) List(ctx context.Context, prefix, marker string, limit int) ([]object.Info, error) {
	start := prefix[:strings.LastIndex(prefix, "/")+1] // the directory part, "" or ending in "/"
	if _, err := s.path(start + "x"); err != nil {
		return nil, nil // no valid key starts with prefix; never walk outside the root
	}
	l := lister{ctx: ctx, prefix: prefix, marker: marker, limit: limit}
	if err := l.walk(filepath.Join(s.dir, filepath.FromSlash(start)), start); err != nil {
		return nil, fmt.Errorf("%s: list %q: %w", s, prefix, err)
	}
	return l.out, nil
}

// lister holds the state of one List walk.
type lister struct {
	ctx            context.Context
	prefix, marker string
	limit          int
	out            []object.Info
}

// full reports whether the walk has collected limit results.
func (l *lister) full() bool {
	return l.limit > 0 && len(l.out) >= l.limit
}

// walk lists the directory at path, whose keys start with rel ("" or ending
// in "/").
func (l *lister) walk(path, rel string) error {
	if err := l.ctx.Err(); err != nil {
		return err
	}
	entries, err := os.ReadDir(path)
	if isNotFound(err) {
		return nil // removed concurrently, or prefix names no directory
	}
	if err != nil {
		return err
	}
	type entry struct {
		key string // directories end in "/"
		de  fs.DirEntry
	}
	keys := make([]entry, 0, len(entries))
	for _, de := range entries {
		k := rel + de.Name()
		if de.IsDir() {
			k += "/"
		} else if !de.Type().IsRegular() || isTemp(de.Name()) {
			continue
		}
		keys = append(keys, entry{k, de})
	}
	slices.SortFunc(keys, func(a, b entry) int { return strings.Compare(a.key, b.key) })
	for _, e := range keys {
		if l.full() {
			return nil
		}
		if e.de.IsDir() {
			if !l.wantDir(e.key) {
				continue
			}
			if err := l.walk(filepath.Join(path, e.de.Name()), e.key); err != nil {
				return err
			}
			continue
		}
		if !strings.HasPrefix(e.key, l.prefix) || e.key <= l.marker {
			continue
		}
		fi, err := e.de.Info()
		if isNotFound(err) {
			continue // deleted concurrently
		}
		if err != nil {
			return err
		}
		l.out = append(l.out, object.Info{Key: e.key, Size: fi.Size(), ModTime: fi.ModTime()})
	}
	return nil
}

// wantDir reports whether the subtree of keys starting with dir (ending in
// "/") may hold keys that match prefix and sort after marker.
func (l *lister) wantDir(dir string) bool {
	if !strings.HasPrefix(dir, l.prefix) && !strings.HasPrefix(l.prefix, dir) {
		return false
	}
	// Every key in the subtree is <= marker iff dir < marker and marker
	// does not extend dir.
	return dir >= l.marker || strings.HasPrefix(l.marker, dir)
}
