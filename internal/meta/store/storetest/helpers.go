package storetest

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/sluicefs/sluice/internal/meta/store"
)

// scanAll pages through a family with the default page size.
func scanAll[T any](scan func(cursor []byte, limit int) ([]T, []byte, error)) ([]T, error) {
	return scanAllLimit(scan, 100)
}

// scanAllLimit pages through a family, limit records a page, until the
// cursor is nil; a scan that never ends fails.
func scanAllLimit[T any](scan func(cursor []byte, limit int) ([]T, []byte, error), limit int) ([]T, error) {
	var out []T
	var cursor []byte
	for pages := 0; ; pages++ {
		if pages > 100000 {
			return nil, fmt.Errorf("scan did not end after %d pages", pages)
		}
		page, next, err := scan(cursor, limit)
		if err != nil {
			return nil, err
		}
		out = append(out, page...)
		if next == nil {
			return out, nil
		}
		cursor = next
	}
}

// uniq returns the distinct elements of xs, sorted by their printed form.
func uniq[T comparable](xs []T) []T {
	seen := map[T]bool{}
	var out []T
	for _, x := range xs {
		if !seen[x] {
			seen[x] = true
			out = append(out, x)
		}
	}
	slices.SortFunc(out, func(a, b T) int { return cmp.Compare(fmt.Sprint(a), fmt.Sprint(b)) })
	return out
}

// sameSet reports whether got and want hold the same elements, ignoring
// order.
func sameSet[T comparable](got, want []T) bool {
	if len(got) != len(want) {
		return false
	}
	count := map[T]int{}
	for _, x := range want {
		count[x]++
	}
	for _, x := range got {
		if count[x]--; count[x] < 0 {
			return false
		}
	}
	return true
}

// checkVisits fails t unless a scan that returned got visited each record
// of want once (at least once with opts.ScanRepeats) and nothing else.
func checkVisits[T comparable](t *testing.T, what string, got, want []T, opts Options) {
	t.Helper()
	if opts.ScanRepeats {
		got = uniq(got)
	}
	if !sameSet(got, want) {
		t.Fatalf("%s visited %d records, want each of %d once:\n got %v\nwant %v", what, len(got), len(want), got, want)
	}
}

// describe prints an InodeRecord so that records compare by value.
func describe(r store.InodeRecord) string {
	switch {
	case r.Node != nil:
		return fmt.Sprintf("%d node %+v", r.Ino, *r.Node)
	case r.Edge != nil:
		return fmt.Sprintf("%d edge %q %d %d", r.Ino, r.Edge.Name, r.Edge.Ino, r.Edge.Type)
	case r.Chunk != nil:
		return fmt.Sprintf("%d chunk %d %+v", r.Ino, r.Chunk.Idx, r.Chunk.Slices)
	case r.Symlink != nil:
		return fmt.Sprintf("%d symlink %q", r.Ino, r.Symlink)
	}
	return fmt.Sprintf("%d empty record", r.Ino)
}

func cmpU(a, b uint64) int { return cmp.Compare(a, b) }

// Unsynced returns how many sessions st's volume has and the unsynced
// slice records of all of them, for tests of deferred syncs.
func Unsynced(t testing.TB, st store.Store) (sessions int, recs []store.UnsyncedSlice) {
	t.Helper()
	err := st.View(context.Background(), func(tx store.Tx) error {
		ss, err := tx.Sessions()
		if err != nil {
			return err
		}
		sessions, recs = len(ss), nil
		for _, s := range ss {
			us, err := tx.Unsynced(s.Sid)
			if err != nil {
				return err
			}
			recs = append(recs, us...)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("list unsynced slices: %v", err)
	}
	return sessions, recs
}
