package dump

import (
	"context"
	"errors"
	"fmt"

	"github.com/sluicefs/sluice/internal/meta"
	"github.com/sluicefs/sluice/internal/meta/store"
)

// prepare checks that st holds no volume and marks it as being loaded. A
// store left by a load that did not finish (marked, with no settings) is
// emptied first; it reports whether it was.
func prepare(ctx context.Context, st store.Store) (wiped bool, err error) {
	var loading int64
	var hasSetting, hasRecords bool
	err = st.View(ctx, func(tx store.Tx) error {
		hasSetting, hasRecords = false, false
		if b, err := tx.Setting(); err == nil {
			hasSetting = len(b) > 0
		} else if !errors.Is(err, store.ErrNotFound) {
			return fmt.Errorf("read settings: %w", err)
		}
		if loading, err = tx.Counter(counterLoading); err != nil {
			return fmt.Errorf("read counter: %w", err)
		}
		hasRecords, err = anyRecord(tx)
		return err
	})
	if err != nil {
		return false, err
	}
	switch {
	case hasSetting:
		return false, errors.New("refusing to load: the metadata engine already holds a volume (load only into an empty database)")
	case hasRecords && loading == 0:
		return false, errors.New("refusing to load: the metadata engine holds records but no volume settings (load only into an empty database)")
	case hasRecords:
		if err := wipe(ctx, st); err != nil {
			return false, fmt.Errorf("remove an earlier load that did not finish: %w", err)
		}
		wiped = true
	}
	err = st.Update(ctx, func(tx store.Tx) error {
		if _, err := tx.Setting(); err == nil {
			return errors.New("refusing to load: a volume was formatted in the metadata engine meanwhile")
		} else if !errors.Is(err, store.ErrNotFound) {
			return err
		}
		tx.SetCounter(counterLoading, 1)
		return nil
	})
	return wiped, err
}

// anyRecord reports whether the store holds any inode record or slice
// reference.
func anyRecord(tx store.Tx) (bool, error) {
	var cursor []byte
	for {
		recs, next, err := tx.ScanInodes(cursor, 16)
		if err != nil {
			return false, fmt.Errorf("scan inodes: %w", err)
		}
		if len(recs) > 0 {
			return true, nil
		}
		if cursor = next; cursor == nil {
			break
		}
	}
	for {
		recs, next, err := tx.ScanSliceRefs(cursor, 16)
		if err != nil {
			return false, fmt.Errorf("scan slice references: %w", err)
		}
		if len(recs) > 0 {
			return true, nil
		}
		if cursor = next; cursor == nil {
			return false, nil
		}
	}
}

// wipe removes every record a load writes: the inode records (nodes,
// entries, chunks, symlinks and the extended attributes of each node),
// slice references and counters, in transactions within the engine's
// limits.
func wipe(ctx context.Context, st store.Store) error {
	per := 1000
	if m := store.LimitsOf(st).MaxTxnOps; m > 0 {
		per = max(1, m/2)
	}
	var cursor []byte
	for {
		var recs []store.InodeRecord
		err := st.View(ctx, func(tx store.Tx) error {
			var err error
			recs, cursor, err = tx.ScanInodes(cursor, per)
			return err
		})
		if err != nil {
			return fmt.Errorf("scan inodes: %w", err)
		}
		for len(recs) > 0 {
			part := recs[:min(len(recs), max(1, per/4))]
			recs = recs[len(part):]
			err := st.Update(ctx, func(tx store.Tx) error {
				var nodes []store.Ino
				for _, r := range part {
					switch {
					case r.Node != nil:
						nodes = append(nodes, r.Ino)
						tx.DeleteNode(r.Ino)
					case r.Edge != nil:
						tx.DeleteEdge(r.Ino, r.Edge.Name)
					case r.Chunk != nil:
						tx.SetChunk(r.Ino, r.Chunk.Idx, nil)
					case r.Symlink != nil:
						tx.DeleteSymlink(r.Ino)
					}
				}
				xs, err := store.ReadXattrs(tx, nodes)
				if err != nil {
					return err
				}
				for i, list := range xs {
					for _, x := range list {
						tx.DeleteXattr(nodes[i], x.Name)
					}
				}
				return nil
			})
			if err != nil {
				return fmt.Errorf("remove records: %w", err)
			}
		}
		if cursor == nil {
			break
		}
	}
	for {
		var refs []store.SliceRefRecord
		err := st.View(ctx, func(tx store.Tx) error {
			var err error
			refs, cursor, err = tx.ScanSliceRefs(cursor, per)
			return err
		})
		if err != nil {
			return fmt.Errorf("scan slice references: %w", err)
		}
		if len(refs) > 0 {
			err = st.Update(ctx, func(tx store.Tx) error {
				for _, r := range refs {
					tx.SetSliceRef(r.Id, r.Size, 0)
				}
				return nil
			})
			if err != nil {
				return fmt.Errorf("remove slice references: %w", err)
			}
		}
		if cursor == nil {
			break
		}
	}
	return st.Update(ctx, func(tx store.Tx) error {
		for _, c := range []string{meta.CounterUsedSpace, meta.CounterUsedInodes, meta.CounterNextInode, meta.CounterNextSlice, meta.CounterNextSession} {
			tx.SetCounter(c, 0)
		}
		return nil
	})
}
