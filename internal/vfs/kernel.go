package vfs

import (
	"sync"
	"time"

	"github.com/sluicefs/sluice/internal/meta"
	"github.com/sluicefs/sluice/internal/meta/store"
)

// Kernel is the cache in front of a mount that the access path keeps: the
// kernel's entries (names), attributes and pages under FUSE. The VFS tells
// it when what it may hold has changed in another mount. Both calls must
// not be made while the kernel waits on the caller for the same directory
// or file (they are made from lock and open requests, which hold neither).
type Kernel interface {
	// InvalidateInode drops the kernel's attributes of ino and, when data
	// is set, its cached pages.
	InvalidateInode(ino meta.Ino, data bool) error
	// InvalidateEntry drops the kernel's entry for name in parent, found
	// or missing, so that the next use of the name looks it up again.
	InvalidateEntry(parent meta.Ino, name []byte) error
}

// SetKernel tells the VFS the kernel cache in front of it, once the mount
// exists. Without one, nothing is invalidated: the access path caches
// nothing, or its caches expire by themselves.
func (v *VFS) SetKernel(k Kernel) {
	v.kernelMu.Lock()
	v.kernel = k
	v.kernelMu.Unlock()
}

func (v *VFS) kernelCache() Kernel {
	v.kernelMu.Lock()
	defer v.kernelMu.Unlock()
	return v.kernel
}

// kernelView remembers what the kernel may still cache: the names it was
// given in each directory, found or missing, and the length and
// modification time of each regular file and directory whose attributes
// it was given (what decides where the kernel stops reading and appends,
// and whether it keeps its pages or its listing of a directory; a change
// of the change time alone, by a rename or a chmod, does not count). The kernel forgets an entry
// or an attribute once its timeout passes, so the view only needs to keep
// each record for that long. It keeps two generations of maps and drops
// the older one every period, which keeps every record for at least one
// period at the cost of a map write per reply and no per-record timers.
type kernelView struct {
	period time.Duration // 0: the kernel caches nothing
	now    func() time.Time

	mu struct {
		sync.Mutex
		rotated   time.Time
		cur, prev viewGen
	}
}

// viewGen is one generation of the kernel view.
type viewGen struct {
	names  map[meta.Ino]map[string]struct{}
	attrs  map[meta.Ino]kernelAttr
	listed map[meta.Ino]time.Time // when the kernel last began to list a directory afresh
}

func newViewGen() viewGen {
	return viewGen{names: map[meta.Ino]map[string]struct{}{}, attrs: map[meta.Ino]kernelAttr{}, listed: map[meta.Ino]time.Time{}}
}

// kernelAttr is what the view keeps of a file's or a directory's
// attributes.
type kernelAttr struct {
	length    uint64
	mtime     int64
	mtimensec uint32
}

func kernelAttrOf(v meta.Version) kernelAttr {
	return kernelAttr{length: v.Length, mtime: v.Mtime, mtimensec: v.Mtimensec}
}

// newKernelView returns a view whose records last at least as long as
// the longest of the kernel's cache timeouts. The kernel counts a timeout
// from the moment it reads the reply, in jiffies, so a margin covers the
// reply's way and the rounding.
func newKernelView(timeouts ...time.Duration) *kernelView {
	kv := &kernelView{now: time.Now}
	for _, t := range timeouts {
		kv.period = max(kv.period, t)
	}
	if kv.period > 0 {
		kv.period += kv.period/8 + 20*time.Millisecond
	}
	kv.mu.cur, kv.mu.prev = newViewGen(), newViewGen()
	kv.mu.rotated = kv.now()
	return kv
}

// rotate drops the older generation when a period has passed; kv.mu is
// held.
func (kv *kernelView) rotate(now time.Time) {
	if now.Sub(kv.mu.rotated) < kv.period {
		return
	}
	if now.Sub(kv.mu.rotated) >= 2*kv.period {
		kv.mu.prev = newViewGen() // both generations are too old
	} else {
		kv.mu.prev = kv.mu.cur
	}
	kv.mu.cur = newViewGen()
	kv.mu.rotated = now
}

// lock locks the view and drops what the kernel has forgotten; it
// reports false, locking nothing, when the kernel caches nothing.
func (kv *kernelView) lock() bool {
	if kv.period == 0 {
		return false
	}
	kv.mu.Lock()
	kv.rotate(kv.now())
	return true
}

// name records that the kernel was given the entry name of parent.
func (kv *kernelView) name(parent meta.Ino, name []byte) {
	if !kv.lock() {
		return
	}
	defer kv.mu.Unlock()
	names := kv.mu.cur.names[parent]
	if names == nil {
		names = map[string]struct{}{}
		kv.mu.cur.names[parent] = names
	}
	names[string(name)] = struct{}{}
}

// attr records that the kernel was given the attributes a.
func (kv *kernelView) attr(a *meta.Attr) {
	if a == nil || (a.Type != store.TypeFile && a.Type != store.TypeDir) || !kv.lock() {
		return
	}
	defer kv.mu.Unlock()
	kv.mu.cur.attrs[a.Ino] = kernelAttrOf(meta.VersionOf(a))
}

// entry records a reply that gives the kernel both a name and the
// attributes of what it names.
func (kv *kernelView) entry(parent meta.Ino, name []byte, a *meta.Attr) {
	kv.name(parent, name)
	kv.attr(a)
}

// advance moves the record of ino from before to after when this mount
// changed the file (a commit of its own writes, which the kernel applied
// to its attributes itself) and nobody else did in between.
func (kv *kernelView) advance(ino meta.Ino, before, after meta.Version) {
	if !kv.lock() {
		return
	}
	defer kv.mu.Unlock()
	b, n := kernelAttrOf(before), kernelAttrOf(after)
	for _, g := range []viewGen{kv.mu.cur, kv.mu.prev} {
		if old, ok := g.attrs[ino]; ok && old == b {
			g.attrs[ino] = n
		}
	}
}

// attrChanged reports whether the kernel may hold attributes of a's inode
// that differ from a.
func (kv *kernelView) attrChanged(a *meta.Attr) bool {
	if !kv.lock() {
		return false
	}
	defer kv.mu.Unlock()
	want := kernelAttrOf(meta.VersionOf(a))
	if old, ok := kv.mu.cur.attrs[a.Ino]; ok {
		return old != want // the newer record
	}
	old, ok := kv.mu.prev.attrs[a.Ino]
	return ok && old != want
}

// listing records that the kernel begins a listing of directory ino now,
// which it may keep (Config.ReaddirCache).
func (kv *kernelView) listing(ino meta.Ino) {
	if !kv.lock() {
		return
	}
	defer kv.mu.Unlock()
	kv.mu.cur.listed[ino] = kv.now()
}

// listedSettled reports whether the kernel's last listing of directory a
// began at least settle after a's modification time: then no change of
// its entries that left that time alone (meta.Config.DirMtimeSkip) can
// have come after the listing. Without a record it reports false.
func (kv *kernelView) listedSettled(a *meta.Attr, settle time.Duration) bool {
	if !kv.lock() {
		return false
	}
	defer kv.mu.Unlock()
	at, ok := kv.mu.cur.listed[a.Ino]
	if !ok {
		at, ok = kv.mu.prev.listed[a.Ino]
	}
	return ok && !at.Before(time.Unix(a.Mtime, int64(a.Mtimensec)).Add(settle))
}

// takeNames returns the names of parent the kernel may still cache and
// forgets them: the caller invalidates them.
func (kv *kernelView) takeNames(parent meta.Ino) []string {
	if !kv.lock() {
		return nil
	}
	defer kv.mu.Unlock()
	var out []string
	for name := range kv.mu.cur.names[parent] {
		out = append(out, name)
	}
	for name := range kv.mu.prev.names[parent] {
		if _, dup := kv.mu.cur.names[parent][name]; !dup {
			out = append(out, name)
		}
	}
	delete(kv.mu.cur.names, parent)
	delete(kv.mu.prev.names, parent)
	return out
}

// staleRetry is how long after refusing a request with ESTALE the same
// process's request on the same inode is taken as the kernel's retry.
const staleRetry = 2 * time.Second

// staleInodes remembers, per process, the inodes whose open or stat was
// refused with ESTALE a moment ago (see VFS.Open). It holds only those,
// for staleRetry, so it stays small.
type staleInodes struct {
	mu sync.Mutex
	m  map[staleKey]time.Time
}

type staleKey struct {
	ino meta.Ino
	pid uint32
}

// refuse reports whether pid's request on ino should fail with ESTALE: yes
// the first time, no for the retry that follows within staleRetry.
func (s *staleInodes) refuse(ino meta.Ino, pid uint32) bool {
	now := time.Now()
	k := staleKey{ino, pid}
	s.mu.Lock()
	defer s.mu.Unlock()
	if t, ok := s.m[k]; ok && now.Sub(t) < staleRetry {
		delete(s.m, k)
		return false
	}
	if s.m == nil {
		s.m = map[staleKey]time.Time{}
	}
	for k, t := range s.m {
		if now.Sub(t) >= staleRetry {
			delete(s.m, k)
		}
	}
	s.m[k] = now
	return true
}

// passed forgets a refusal of pid's request on ino once a request went
// through without one (the retry looked the name up again).
func (s *staleInodes) passed(ino meta.Ino, pid uint32) {
	s.mu.Lock()
	if len(s.m) > 0 {
		delete(s.m, staleKey{ino, pid})
	}
	s.mu.Unlock()
}
