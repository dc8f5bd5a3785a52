package meta

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/sluicefs/sluice/internal/meta/store"
)

// What `sluice status` shows beyond the session list: what the engine
// records of each session (the inodes it sustains and the locks it
// holds), what the trash holds, and which deletions wait for something.
//
// The engine does not record every file a session holds open: mounts
// count their handles in memory, because a write at every open and close
// would cost every workload (see orphan.go). What it does record of a
// session's open files is
//
//   - the files it sustains: their last name went while the session held
//     them open, and they are deleted at its last close (or when the
//     session ends or expires);
//   - the files it holds locks on: a flock lives as long as the open file
//     description that took it, a POSIX lock until its process closes
//     the file, so a locked file is an open one.
//
// Every function here reads through store.Store in short read-only
// transactions, so it works on every engine and on a volume in use; its
// figures then mix moments.

// DetailOptions tune SessionDetails.
type DetailOptions struct {
	// Limit bounds how many sustained inodes and how many locks are
	// listed; the counts are exact whatever it is. 0 lists none.
	Limit int
	// Paths resolves the path of each listed inode: a walk up the
	// parent pointers that scans each directory on the way for the
	// entry naming its child (once per directory for the whole list),
	// so it costs a listing of those directories.
	Paths bool
}

// SessionFile is an inode a session sustains.
type SessionFile struct {
	Ino    Ino
	Length uint64 // 0 when the inode is gone already
	// Path is empty unless DetailOptions.Paths asked for it, and when
	// the inode has no name (a sustained file usually has none; with a
	// trash it may have expired from there) or several (hard links in
	// several directories).
	Path string
}

// Lock kinds of a HeldLock.
const (
	LockKindFlock = "flock"
	LockKindPosix = "posix"
)

// HeldLock is a lock a session holds: one flock, or one range of an
// owner's POSIX locks.
type HeldLock struct {
	Ino   Ino
	Kind  string // LockKindFlock or LockKindPosix
	Type  string // "read" or "write"
	Owner uint64 // the lock owner the kernel gave (per open file or per process)
	// Start and End (inclusive; End is LockEnd up to the end of the
	// file) and Pid, the process that took it, of a POSIX range; zero
	// for a flock.
	Start, End uint64
	Pid        uint32
	Path       string // as SessionFile.Path
}

// SessionDetail is what the engine records of one session.
type SessionDetail struct {
	Sid uint64
	// SustainedCount is the number of inodes the session sustains;
	// Sustained lists up to DetailOptions.Limit of them, in inode order.
	SustainedCount int
	Sustained      []SessionFile
	// LockCount is the number of locks the session holds (a flock or a
	// POSIX range each); Locks lists up to DetailOptions.Limit of them,
	// by inode.
	LockCount int
	Locks     []HeldLock
}

// detailPage bounds the inodes whose records one transaction of this
// file reads.
const detailPage = 256

// SessionDetails reads what the engine records of session sid: the
// inodes it sustains and the locks it holds. A session that ended (or
// never existed) has none.
func SessionDetails(ctx context.Context, st store.Store, sid uint64, opts DetailOptions) (*SessionDetail, error) {
	d := &SessionDetail{Sid: sid}
	var sustained, locked []Ino
	err := st.View(ctx, func(tx store.Tx) error {
		var err error
		if sustained, err = tx.Sustained(sid); err != nil {
			return err
		}
		locked, err = tx.LockedInodes(sid)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("session %d: %w", sid, err)
	}
	slices.Sort(sustained)
	slices.Sort(locked)
	d.SustainedCount = len(sustained)
	if n := min(len(sustained), max(opts.Limit, 0)); n > 0 {
		list := sustained[:n]
		err := st.View(ctx, func(tx store.Tx) error {
			nodes, err := tx.Nodes(list)
			if err != nil {
				return err
			}
			d.Sustained = d.Sustained[:0]
			for i, ino := range list {
				f := SessionFile{Ino: ino}
				if nodes[i] != nil {
					f.Length = nodes[i].Length
				}
				d.Sustained = append(d.Sustained, f)
			}
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("session %d: sustained inodes: %w", sid, err)
		}
	}
	for page := range slices.Chunk(locked, detailPage) {
		var count int
		var held []HeldLock
		err := st.View(ctx, func(tx store.Tx) error {
			count, held = 0, held[:0]
			for _, ino := range page {
				n, got, err := sessionLocks(tx, sid, ino, opts.Limit-len(d.Locks)-len(held))
				if err != nil {
					return err
				}
				count += n
				held = append(held, got...)
			}
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("session %d: locks: %w", sid, err)
		}
		d.LockCount += count
		d.Locks = append(d.Locks, held...)
	}
	if opts.Paths && (len(d.Sustained) > 0 || len(d.Locks) > 0) {
		var inos []Ino
		for _, f := range d.Sustained {
			inos = append(inos, f.Ino)
		}
		for _, l := range d.Locks {
			inos = append(inos, l.Ino)
		}
		paths, err := Paths(ctx, st, inos)
		if err != nil {
			return nil, fmt.Errorf("session %d: %w", sid, err)
		}
		for i := range d.Sustained {
			d.Sustained[i].Path = paths[d.Sustained[i].Ino]
		}
		for i := range d.Locks {
			d.Locks[i].Path = paths[d.Locks[i].Ino]
		}
	}
	return d, nil
}

// sessionLocks counts the locks session sid holds on ino and returns up
// to limit of them. (The locked-inode index may name inodes the session
// no longer locks: unlocks leave it.)
func sessionLocks(tx store.Tx, sid uint64, ino Ino, limit int) (int, []HeldLock, error) {
	var count int
	var out []HeldLock
	add := func(l HeldLock) {
		count++
		if len(out) < limit {
			out = append(out, l)
		}
	}
	flocks, err := tx.Locks(ino, store.LockFlock)
	if err != nil {
		return 0, nil, err
	}
	for _, h := range flocks {
		if h.Sid == sid && len(h.Data) == 1 {
			add(HeldLock{Ino: ino, Kind: LockKindFlock, Type: lockTypeName(uint32(h.Data[0])), Owner: h.Owner})
		}
	}
	posix, err := tx.Locks(ino, store.LockPosix)
	if err != nil {
		return 0, nil, err
	}
	for _, h := range posix {
		if h.Sid != sid {
			continue
		}
		ranges, err := decodeRanges(h.Data)
		if err != nil {
			return 0, nil, fmt.Errorf("inode %d: %w", ino, err)
		}
		for _, r := range ranges {
			add(HeldLock{Ino: ino, Kind: LockKindPosix, Type: lockTypeName(r.Type), Owner: h.Owner,
				Start: r.Start, End: r.End, Pid: r.Pid})
		}
	}
	return count, out, nil
}

func lockTypeName(typ uint32) string {
	switch typ {
	case LockRead:
		return "read"
	case LockWrite:
		return "write"
	}
	return fmt.Sprintf("type %d", typ)
}

// maxPathDepth bounds the walk up parent pointers, so that a corrupt
// volume whose parents loop cannot keep Paths going.
const maxPathDepth = 4096

// Paths returns the path of each of inos that has exactly one, found
// by walking up the parent pointers (Attr.Parent) to the root and, for
// each step, scanning the parent's entries for the one naming the child.
// Each directory on the way is scanned at most once for the whole list,
// and only until every entry wanted from it is found. Inodes left out
// have no name (no attributes, no link, or an entry missing from their
// parent) or several parents (Parent 0: hard links in several
// directories).
func Paths(ctx context.Context, st store.Store, inos []Ino) (map[Ino]string, error) {
	parent := map[Ino]Ino{RootIno: RootIno} // inode → its parent, once read
	name := map[Ino]string{}                // inode → its name in its parent, once found
	todo := slices.Clone(inos)
	for depth := 0; len(todo) > 0 && depth < maxPathDepth; depth++ {
		var ask []Ino
		for _, ino := range todo {
			if _, ok := parent[ino]; !ok && !slices.Contains(ask, ino) {
				ask = append(ask, ino)
			}
		}
		if len(ask) == 0 {
			break
		}
		// Read the attributes of this level, and list what each parent
		// directory must name.
		want := map[Ino][]Ino{}
		for page := range slices.Chunk(ask, detailPage) {
			err := st.View(ctx, func(tx store.Tx) error {
				nodes, err := tx.Nodes(page)
				if err != nil {
					return err
				}
				for i, n := range nodes {
					p := Ino(0)
					if n != nil && n.Nlink > 0 {
						p = n.Parent
					}
					parent[page[i]] = p
				}
				return nil
			})
			if err != nil {
				return nil, fmt.Errorf("read attributes for paths: %w", err)
			}
		}
		todo = todo[:0]
		for _, ino := range ask {
			if p := parent[ino]; p != 0 && !slices.Contains(want[p], ino) {
				want[p] = append(want[p], ino)
			}
		}
		for dir, children := range want {
			found, err := entryNames(ctx, st, dir, children)
			if err != nil {
				return nil, err
			}
			for ino, n := range found {
				name[ino] = n
			}
			todo = append(todo, dir)
		}
	}
	out := map[Ino]string{}
	for _, ino := range inos {
		if p, ok := pathFrom(ino, parent, name); ok {
			out[ino] = p
		}
	}
	return out, nil
}

// pathFrom composes the path of ino from the parents and names Paths
// found, reporting false when a step is missing.
func pathFrom(ino Ino, parent map[Ino]Ino, name map[Ino]string) (string, bool) {
	if ino == RootIno {
		return "/", true
	}
	var parts []string
	for cur := ino; cur != RootIno; cur = parent[cur] {
		n, ok := name[cur]
		if !ok || len(parts) > maxPathDepth {
			return "", false
		}
		parts = append(parts, n)
	}
	slices.Reverse(parts)
	return "/" + strings.Join(parts, "/"), true
}

// entryNames scans directory dir, one page per View, until it has found
// an entry for each of children, and returns the names found.
func entryNames(ctx context.Context, st store.Store, dir Ino, children []Ino) (map[Ino]string, error) {
	found := map[Ino]string{}
	var after []byte
	for len(found) < len(children) {
		var es []store.Edge
		err := st.View(ctx, func(tx store.Tx) error {
			var err error
			es, err = tx.Edges(dir, after, scanPage)
			return err
		})
		if err != nil {
			return nil, fmt.Errorf("list directory %d for paths: %w", dir, err)
		}
		for _, e := range es {
			if _, ok := found[e.Ino]; !ok && slices.Contains(children, e.Ino) {
				found[e.Ino] = string(e.Name)
			}
		}
		if len(es) < scanPage {
			break
		}
		after = es[len(es)-1].Name
		if err := ctx.Err(); err != nil {
			return nil, err
		}
	}
	return found, nil
}

// TrashReport is what the trash holds.
type TrashReport struct {
	// Dirs counts the directories below .trash (its hour directories).
	Dirs int64
	// Files counts the other entries: the removed files (and symlinks,
	// devices...) waiting there until they expire.
	Files int64
	// Bytes is the sum of the lengths of the regular files among them.
	Bytes int64
}

// TrashUsage walks the trash (the .trash directory, TrashIno, and every
// directory below it), one page of entries per View, and counts what it
// holds. A volume without a trash holds nothing.
func TrashUsage(ctx context.Context, st store.Store) (*TrashReport, error) {
	r := &TrashReport{}
	dirs := []Ino{TrashIno}
	for len(dirs) > 0 {
		dir := dirs[len(dirs)-1]
		dirs = dirs[:len(dirs)-1]
		var after []byte
		for {
			var es []store.Edge
			var subdirs []Ino
			var files, bytes int64
			err := st.View(ctx, func(tx store.Tx) error {
				subdirs, files, bytes = subdirs[:0], 0, 0
				var err error
				if es, err = tx.Edges(dir, after, scanPage); err != nil { // none when there is no trash
					return err
				}
				var inos []Ino
				for _, e := range es {
					if e.Type == store.TypeDir {
						subdirs = append(subdirs, e.Ino)
						continue
					}
					files++
					if e.Type == store.TypeFile {
						inos = append(inos, e.Ino)
					}
				}
				if len(inos) == 0 {
					return nil
				}
				nodes, err := tx.Nodes(inos)
				if err != nil {
					return err
				}
				for _, n := range nodes {
					if n != nil {
						bytes += int64(n.Length)
					}
				}
				return nil
			})
			if err != nil {
				return nil, fmt.Errorf("walk trash: %w", err)
			}
			r.Dirs += int64(len(subdirs))
			r.Files += files
			r.Bytes += bytes
			dirs = append(dirs, subdirs...)
			if len(es) < scanPage {
				break
			}
			after = es[len(es)-1].Name
			if err := ctx.Err(); err != nil {
				return nil, err
			}
		}
	}
	return r, nil
}

// PendingReport counts the deletions that wait for something other than
// the deletion queues' workers (those are SpaceReport.Backlog).
type PendingReport struct {
	// Orphans are files whose last name went while other sessions were
	// live: they stay, with no name, until every live session has said
	// whether it holds them open (see orphan.go). OrphanBytes sums their
	// lengths.
	Orphans, OrphanBytes int64
	// Sustained are files whose last name went while a session held them
	// open: each is deleted at that session's last close, or when the
	// session ends or expires. Counted once however many sessions hold
	// one; an orphan some session already said it holds counts here
	// too. SustainedBytes sums their lengths.
	Sustained, SustainedBytes int64
	// Truncations are files shrunk past many chunks whose chunks beyond
	// the new end are still to be dropped (store.Truncation).
	Truncations int64
}

// PendingDeletions counts the orphans, the files sessions sustain and
// the unfinished truncations of the volume in st.
func PendingDeletions(ctx context.Context, st store.Store) (*PendingReport, error) {
	var orphans []Ino
	held := map[Ino]bool{}
	var truncations int
	err := st.View(ctx, func(tx store.Tx) error {
		clear(held)
		var err error
		if orphans, err = tx.Sustained(orphanSid); err != nil {
			return err
		}
		ss, err := tx.Sessions()
		if err != nil {
			return err
		}
		for _, s := range ss {
			inos, err := tx.Sustained(s.Sid)
			if err != nil {
				return err
			}
			for _, ino := range inos {
				held[ino] = true
			}
		}
		ts, err := tx.Truncations(0)
		truncations = len(ts)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("pending deletions: %w", err)
	}
	r := &PendingReport{Orphans: int64(len(orphans)), Sustained: int64(len(held)), Truncations: int64(truncations)}
	if r.OrphanBytes, err = sumLengths(ctx, st, orphans); err != nil {
		return nil, fmt.Errorf("orphans: %w", err)
	}
	sustained := make([]Ino, 0, len(held))
	for ino := range held {
		sustained = append(sustained, ino)
	}
	if r.SustainedBytes, err = sumLengths(ctx, st, sustained); err != nil {
		return nil, fmt.Errorf("sustained files: %w", err)
	}
	return r, nil
}

// sumLengths returns the sum of the lengths of inos (0 for those gone).
func sumLengths(ctx context.Context, st store.Store, inos []Ino) (int64, error) {
	var total int64
	for page := range slices.Chunk(inos, detailPage) {
		var sum int64
		err := st.View(ctx, func(tx store.Tx) error {
			sum = 0
			nodes, err := tx.Nodes(page)
			if err != nil {
				return err
			}
			for _, n := range nodes {
				if n != nil {
					sum += int64(n.Length)
				}
			}
			return nil
		})
		if err != nil {
			return 0, err
		}
		total += sum
	}
	return total, nil
}
