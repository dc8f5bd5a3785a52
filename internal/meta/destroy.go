package meta

import (
	"context"
	"fmt"

	"github.com/sluicefs/sluice/internal/meta/store"
)

// counters lists every counter the core and the tools keep, which Destroy
// deletes: counters have no scan.
var counters = []string{CounterNextInode, CounterNextSlice, CounterNextSession, CounterUsedSpace,
	CounterUsedInodes, counterOrphanRound, counterTrashClean, counterLastBackup}

// DestroyOptions tune Destroy.
type DestroyOptions struct {
	// Progress, when set, is called after each transaction with the
	// records deleted so far.
	Progress func(records int64)
}

// Destroy deletes every record of the volume in st, whose UUID must be
// uuid: the sessions with their locks and held inodes, every inode record
// (nodes, entries, chunks, symlinks, extended attributes), slice
// references, both deletion queues, unfinished truncations, the counters
// and, last, the settings, so that an interrupted Destroy leaves a volume
// that a new Destroy finishes. It runs as many transactions within the
// engine's bounds and returns how many records it deleted. The volume's
// objects are the caller's to delete, first (they are found through the
// settings). Mounts must be gone: a live client writes its records back.
func Destroy(ctx context.Context, st store.Store, uuid string, opts DestroyOptions) (int64, error) {
	f, err := Load(ctx, st)
	if err != nil {
		return 0, err
	}
	if f.UUID != uuid {
		return 0, fmt.Errorf("volume %q has UUID %s, not %s: refusing to destroy it", f.Name, f.UUID, uuid)
	}
	e := &eraser{st: st, per: batchesFor(store.LimitsOf(st)).dropBudget, progress: opts.Progress}
	for _, step := range []struct {
		what string
		fn   func(context.Context) error
	}{
		{"sessions", e.sessions},
		{"inode records", e.inodes},
		{"slice references", e.sliceRefs},
		{"deletion queues", e.queues},
		{"truncations", e.truncations},
	} {
		if err := step.fn(ctx); err != nil {
			return e.done, fmt.Errorf("destroy volume %q: delete %s: %w", f.Name, step.what, err)
		}
	}
	err = st.Update(ctx, func(tx store.Tx) error {
		b, err := tx.Setting()
		if err != nil {
			return err
		}
		if cur, err := DecodeFormat(b); err != nil || cur.UUID != uuid {
			return fmt.Errorf("the volume's settings changed meanwhile (%v)", err) //lint:nowrap err may be nil here
		}
		for _, c := range counters {
			tx.SetCounter(c, 0)
		}
		tx.SetSetting(nil)
		return nil
	})
	if err != nil {
		return e.done, fmt.Errorf("destroy volume %q: delete settings: %w", f.Name, err)
	}
	e.done += int64(len(counters)) + 1
	e.report()
	return e.done, nil
}

// eraser deletes records in transactions of at most per deletions.
type eraser struct {
	st       store.Store
	per      int
	ops      []func(store.Tx)
	done     int64
	progress func(int64)
}

// add queues one deletion, and commits the queue when it is full.
func (e *eraser) add(ctx context.Context, op func(store.Tx)) error {
	e.ops = append(e.ops, op)
	if len(e.ops) < e.per {
		return nil
	}
	return e.flush(ctx)
}

// flush commits the queued deletions in one transaction. Deleting is
// idempotent, so a retried transaction is harmless.
func (e *eraser) flush(ctx context.Context) error {
	if len(e.ops) == 0 {
		return nil
	}
	err := e.st.Update(ctx, func(tx store.Tx) error {
		for _, op := range e.ops {
			op(tx)
		}
		return nil
	})
	if err != nil {
		return err
	}
	e.done += int64(len(e.ops))
	e.ops = e.ops[:0]
	e.report()
	return nil
}

func (e *eraser) report() {
	if e.progress != nil {
		e.progress(e.done)
	}
}

// sessions deletes every session with what it holds: lock records (found
// through the session's locked inodes), sustained inodes and unsynced
// slices; and the list of orphans, kept as the inodes orphanSid sustains.
func (e *eraser) sessions(ctx context.Context) error {
	var ss []store.Session
	if err := e.st.View(ctx, func(tx store.Tx) (err error) { ss, err = tx.Sessions(); return err }); err != nil {
		return err
	}
	for _, s := range append(ss, store.Session{Sid: orphanSid}) {
		var locked, sustained []Ino
		var unsynced []UnsyncedSlice
		var locks []func(store.Tx)
		err := e.st.View(ctx, func(tx store.Tx) error {
			var err error
			if locked, err = tx.LockedInodes(s.Sid); err != nil {
				return err
			}
			if sustained, err = tx.Sustained(s.Sid); err != nil {
				return err
			}
			if unsynced, err = tx.Unsynced(s.Sid); err != nil {
				return err
			}
			locks = locks[:0]
			for _, ino := range locked {
				for _, kind := range []byte{store.LockFlock, store.LockPosix} {
					held, err := tx.Locks(ino, kind)
					if err != nil {
						return err
					}
					for _, h := range held {
						if h.Sid == s.Sid {
							rec := store.LockRecord{Sid: h.Sid, Owner: h.Owner}
							locks = append(locks, func(tx store.Tx) { tx.SetLock(ino, kind, rec) })
						}
					}
				}
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("session %d: %w", s.Sid, err)
		}
		for _, op := range locks {
			if err := e.add(ctx, op); err != nil {
				return err
			}
		}
		for _, ino := range locked {
			if err := e.add(ctx, func(tx store.Tx) { tx.SetLockedInode(s.Sid, ino, false) }); err != nil {
				return err
			}
		}
		for _, ino := range sustained {
			if err := e.add(ctx, func(tx store.Tx) { tx.SetSustained(s.Sid, ino, false) }); err != nil {
				return err
			}
		}
		for _, u := range unsynced {
			if err := e.add(ctx, func(tx store.Tx) { tx.SetUnsynced(s.Sid, u, false) }); err != nil {
				return err
			}
		}
		if err := e.add(ctx, func(tx store.Tx) { tx.DeleteSession(s.Sid) }); err != nil {
			return err
		}
	}
	return e.flush(ctx)
}

// inodes deletes every record ScanInodes reports, and the extended
// attributes of each node.
func (e *eraser) inodes(ctx context.Context) error {
	return e.drain(ctx, func(tx store.Tx, cursor []byte) ([]func(store.Tx), []byte, error) {
		recs, next, err := tx.ScanInodes(cursor, e.per)
		if err != nil {
			return nil, nil, err
		}
		var ops []func(store.Tx)
		var nodes []Ino
		for _, r := range recs {
			ops = append(ops, inodeDeletion(r))
			if r.Node != nil || r.Err != nil {
				nodes = append(nodes, r.Ino)
			}
		}
		xattrs, err := store.ReadXattrs(tx, nodes)
		if err != nil {
			return nil, nil, err
		}
		for i, list := range xattrs {
			for _, x := range list {
				ino, name := nodes[i], x.Name
				ops = append(ops, func(tx store.Tx) { tx.DeleteXattr(ino, name) })
			}
		}
		return ops, next, nil
	})
}

// inodeDeletion returns the deletion of the record r names. A record that
// does not decode (r.Err) is deleted as a node and as a symlink, the
// records keyed by the inode alone.
func inodeDeletion(r store.InodeRecord) func(store.Tx) {
	switch {
	case r.Node != nil:
		return func(tx store.Tx) { tx.DeleteNode(r.Ino) }
	case r.Edge != nil:
		return func(tx store.Tx) { tx.DeleteEdge(r.Ino, r.Edge.Name) }
	case r.Chunk != nil:
		return func(tx store.Tx) { tx.SetChunk(r.Ino, r.Chunk.Idx, nil) }
	case r.Symlink != nil:
		return func(tx store.Tx) { tx.DeleteSymlink(r.Ino) }
	}
	return func(tx store.Tx) { tx.DeleteNode(r.Ino); tx.DeleteSymlink(r.Ino) }
}

// sliceRefs deletes every slice reference count.
func (e *eraser) sliceRefs(ctx context.Context) error {
	return e.drain(ctx, func(tx store.Tx, cursor []byte) ([]func(store.Tx), []byte, error) {
		refs, next, err := tx.ScanSliceRefs(cursor, e.per)
		ops := make([]func(store.Tx), len(refs))
		for i, r := range refs {
			ops[i] = func(tx store.Tx) { tx.SetSliceRef(r.Id, r.Size, 0) }
		}
		return ops, next, err
	})
}

// queues deletes both deletion queues: the files and the slices whose
// data was still to be deleted (the caller deleted every object).
func (e *eraser) queues(ctx context.Context) error {
	err := e.drain(ctx, func(tx store.Tx, cursor []byte) ([]func(store.Tx), []byte, error) {
		fs, next, err := tx.ScanDelFiles(cursor, e.per)
		ops := make([]func(store.Tx), len(fs))
		for i, f := range fs {
			ops[i] = func(tx store.Tx) { tx.SetDelFile(f, false) }
		}
		return ops, next, err
	})
	if err != nil {
		return err
	}
	return e.drain(ctx, func(tx store.Tx, cursor []byte) ([]func(store.Tx), []byte, error) {
		ss, next, err := tx.ScanDelSlices(cursor, e.per)
		ops := make([]func(store.Tx), len(ss))
		for i, s := range ss {
			ops[i] = func(tx store.Tx) { tx.SetDelSlice(s.Id, s.Size, false) }
		}
		return ops, next, err
	})
}

// truncations deletes the records of unfinished truncations, a page
// (without a cursor) at a time.
func (e *eraser) truncations(ctx context.Context) error {
	for {
		var ts []store.Truncation
		if err := e.st.View(ctx, func(tx store.Tx) (err error) { ts, err = tx.Truncations(e.per); return err }); err != nil {
			return err
		}
		if len(ts) == 0 {
			return nil
		}
		for _, t := range ts {
			if err := e.add(ctx, func(tx store.Tx) { tx.SetTruncation(t, false) }); err != nil {
				return err
			}
		}
		if err := e.flush(ctx); err != nil {
			return err
		}
	}
}

// maxPasses bounds the whole scans drain makes.
const maxPasses = 5

// drain deletes what page lists, one page (in one View) at a time: the
// deletions of its records and the cursor of the next page, nil after
// the last. Then it scans again, until a whole scan finds nothing: a scan
// may miss records deleted behind it on some engines (redis pages in no
// order).
func (e *eraser) drain(ctx context.Context, page func(tx store.Tx, cursor []byte) ([]func(store.Tx), []byte, error)) error {
	for pass := 0; ; pass++ {
		found := false
		var cursor []byte
		for {
			var ops []func(store.Tx)
			err := e.st.View(ctx, func(tx store.Tx) (err error) {
				ops, cursor, err = page(tx, cursor)
				return err
			})
			if err != nil {
				return err
			}
			if len(ops) > 0 {
				found = true
				if pass >= maxPasses {
					return fmt.Errorf("records remain after %d rounds of deletion", maxPasses)
				}
			}
			for _, op := range ops {
				if err := e.add(ctx, op); err != nil {
					return err
				}
			}
			if cursor == nil {
				break
			}
		}
		if err := e.flush(ctx); err != nil {
			return err
		}
		if !found {
			return nil
		}
	}
}
