package meta

import (
	"sync"
	"time"
)

// recentDirs remembers, for Config.DirAttrReuse, the attributes of the
// directories this client's own changes of their entries committed
// (create, link, unlink, rmdir, rename), so that GetAttr of such a
// directory answers without a round trip.
//
// The kernel drops its cached attributes of a directory whose entries it
// changed, and with default_permissions it needs them again at once: the
// next create in the same directory first asks for them to check write
// and search permission. Without this, every create, unlink or rename of
// a burst pays a second metadata read for the directory that its own
// transaction has just read and written.
//
// What is remembered is never older than the client's own last change of
// the directory, and at most DirAttrReuse old (another mount's change in
// that time is not seen, as it would not be through the kernel's own
// attribute cache). A change of a directory's attributes through any
// other path (setattr, xattrs and ACLs, atime, a rename of the directory
// itself, its removal, the trash) forgets it, and a record whose
// transaction ran while such a change was under way is not kept (gen).
type recentDirs struct {
	ttl time.Duration // 0: off
	now func() time.Time

	mu  sync.Mutex
	gen uint64 // bumped by every forget
	m   map[Ino]recentDir
}

type recentDir struct {
	a  Attr
	at time.Time
}

// recentMax bounds the directories remembered; past it the memory starts
// afresh (the entries are only worth DirAttrReuse anyway).
const recentMax = 4096

// begin returns the generation a change must still see when it records.
func (r *recentDirs) begin() uint64 {
	if r.ttl <= 0 {
		return 0
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.gen
}

// record remembers dirs as a change that began at generation gen
// committed them, unless something was forgotten since or a newer state
// (a later ctime) is already remembered.
func (r *recentDirs) record(gen uint64, dirs ...*Attr) {
	if r.ttl <= 0 {
		return
	}
	now := r.now()
	r.mu.Lock()
	defer r.mu.Unlock()
	if gen != r.gen {
		return
	}
	if r.m == nil || len(r.m) >= recentMax {
		r.m = map[Ino]recentDir{}
	}
	for _, d := range dirs {
		if d == nil {
			continue
		}
		if old, ok := r.m[d.Ino]; ok && newerCtime(&old.a, d) {
			continue
		}
		r.m[d.Ino] = recentDir{a: *d, at: now}
	}
}

// newerCtime reports whether a's ctime is after b's.
func newerCtime(a, b *Attr) bool {
	return a.Ctime > b.Ctime || a.Ctime == b.Ctime && a.Ctimensec > b.Ctimensec
}

// get returns a copy of ino's remembered attributes while they are fresh.
func (r *recentDirs) get(ino Ino) (*Attr, bool) {
	if r.ttl <= 0 {
		return nil, false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	e, ok := r.m[ino]
	if !ok {
		return nil, false
	}
	if age := r.now().Sub(e.at); age < 0 || age >= r.ttl {
		delete(r.m, ino)
		return nil, false
	}
	a := e.a
	return &a, true
}

// forget drops what is remembered of inos, or of every directory when
// none is named, and keeps changes under way from recording.
func (r *recentDirs) forget(inos ...Ino) {
	if r.ttl <= 0 {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.gen++
	if len(inos) == 0 {
		r.m = nil
		return
	}
	for _, ino := range inos {
		delete(r.m, ino)
	}
}

// What the session's changes run elsewhere do to the client's memory of
// recent directories goes through Caches (caches.go).

// DirsBegin returns the generation a change run elsewhere must still see
// when RecordDirs records what it committed.
func (k caches) DirsBegin() uint64 { return k.c.recent.begin() }

// RecordDirs remembers the attributes of directories a change that began
// at generation gen committed (see recentDirs).
func (k caches) RecordDirs(gen uint64, dirs ...*Attr) { k.c.recent.record(gen, dirs...) }

// Dir returns the remembered attributes of directory ino, while they are
// fresh: those of this client's last change of its entries.
func (k caches) Dir(ino Ino) (*Attr, bool) { return k.c.recent.get(ino) }

// ForgetDirs forgets what is remembered of inos, or of every directory
// when none is named, and keeps changes under way from recording.
func (k caches) ForgetDirs(inos ...Ino) { k.c.recent.forget(inos...) }
