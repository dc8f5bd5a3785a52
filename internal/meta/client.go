package meta

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/sluicefs/sluice/internal/meta/store"
)

// Re-exported record types, so callers of meta need not import store.
type (
	// Ino is an inode number.
	Ino = store.Ino
	// Attr holds the attributes of an inode.
	Attr = store.Node
	// Slice is one element of a chunk's slice list.
	Slice = store.Slice
	// UnsyncedSlice is a slice committed before its blocks were durable.
	UnsyncedSlice = store.UnsyncedSlice
)

// RootIno is the inode of the root directory.
const RootIno = store.RootIno

// ChunkSize is the size of the file range one slice list describes.
const ChunkSize = 64 << 20

// MaxFileSize is the largest size of a file, 128 PiB (2^31 chunks): the
// bound JuiceFS has too, so a volume moves between the two (dump, load)
// with every file intact. No byte of a file lies at or past it: a write,
// truncation, fallocate or copy_file_range that would reach past it fails
// with EFBIG (a write that starts below it is cut short there, as a local
// file system does), so every chunk index fits the 32 bits every engine
// and the metadata server encode it in, and no offset arithmetic wraps.
const MaxFileSize = ChunkSize << 31

// Counter names, which tools working on a whole volume (dump, load) read
// and write too.
const (
	CounterNextInode   = "nextInode"
	CounterNextSlice   = "nextChunk"
	CounterNextSession = "nextSession"
	CounterUsedSpace   = "usedSpace"
	CounterUsedInodes  = "usedInodes"
)

// Config tunes a Client.
type Config struct {
	// ReadOnly refuses every change with EROFS.
	ReadOnly bool
	// Heartbeat is the interval of session heartbeats.
	Heartbeat time.Duration
	// SessionTimeout is how long a session may miss heartbeats before any
	// live client cleans up after it (releases its locks, deletes the
	// files it kept open after unlink). Default 25 heartbeats (5 minutes
	// with the default heartbeat).
	SessionTimeout time.Duration
	// Now is the client's clock: every time the core stamps (atime,
	// mtime and ctime of each change, session start and heartbeats, the
	// deletion queue, the trash's hour directories) or compares (relatime,
	// the directory mtime skip, session expiry, trash expiry, when queued
	// data is due for deletion) comes from it, so tests, and a server
	// that replays operations, decide the time. Background work is paced
	// by real timers, not by Now. Default time.Now.
	Now func() time.Time
	// DeleteSlice removes the stored blocks of a slice whose last reference
	// is gone. Nil leaves deletions queued. It is called from several
	// goroutines at once.
	DeleteSlice func(ctx context.Context, id uint64, size uint32) error
	// RestoreSlice makes every block of a slice readable again after its
	// session's host may have crashed before the object store made the
	// blocks durable (see WriteSliceAttr's unsynced): a block found
	// missing or short is replaced, durably, by zeros, and lost counts
	// them. Cleaning up after a dead session calls it for each slice the
	// session committed unsynced that a file still holds; without it such
	// sessions are left for a client that has it.
	RestoreSlice func(ctx context.Context, id uint64, size uint32) (lost int, err error)
	// DeleteWorkers bounds how many slices are deleted at once. Default 10.
	DeleteWorkers int
	// TruncateSyncBatches is how many bounded transactions a truncation
	// spends dropping the chunks past the new end before it returns; the
	// background drops the rest. Default 64 (at least 1536 chunks, 96 GiB
	// of a densely written file); negative leaves all to the background.
	TruncateSyncBatches int
	// OpTimeout bounds each metadata transaction, its retries included:
	// when the engine stops answering, the operation fails with EIO after
	// this long rather than hanging the application. Default
	// DefaultOpTimeout; negative: no bound.
	OpTimeout time.Duration
	// SessionInfo describes the mount for `sluice status`.
	SessionInfo SessionInfo
	// Figures, when set, gives the figures each heartbeat publishes in
	// SessionInfo.Figures (a cache group's hits and bytes served).
	Figures func() map[string]uint64
	// DirAttrReuse is how long GetAttr of a directory whose entries this
	// client changed answers from the attributes the change committed,
	// without a round trip (see recentDirs); keep it at most the kernel's
	// attribute cache time. 0, the default, always reads the engine.
	DirAttrReuse time.Duration
	// Statahead lets the kernel's lookups of names in a directory walked
	// name after name answer from one listing of it read up to this long
	// ago (see statahead); keep it at most the kernel's entry and
	// attribute cache times. 0, the default, reads the engine each time.
	Statahead time.Duration
	// OpenCache lets an open of a regular file, or of a directory,
	// answer from the attributes an open of it on this client read from
	// the engine up to this long ago (OpenCached, OpenDirCached; see
	// openCache for what it gives up). 0, the default, reads the engine
	// at every open.
	OpenCache time.Duration
	// DirMtimeSkip lets a change of a directory's entries leave its times
	// alone when they were set less than this long ago (and its link
	// count does not change), so concurrent creates in one directory do
	// not all write its record. Default DefaultDirMtimeSkip; negative
	// disables. It is disabled on an engine that misses phantoms
	// (store.Limits).
	DirMtimeSkip time.Duration
	// AtimeMode is AtimeNone (default), AtimeRelative or AtimeStrict.
	AtimeMode string
	// Logger receives background errors. Nil discards them.
	Logger *slog.Logger
	// OnFormatChange, when set, is called with the volume's settings each
	// time the client reloads them and finds them changed (`sluice
	// config`): on every heartbeat, from the client's background
	// goroutine, so it must return quickly. The client itself applies
	// capacity, inode limit and trash days; the callback applies what
	// other layers own (the bandwidth limits). The Format is the
	// callback's to keep.
	OnFormatChange func(*Format)
}

// DefaultHeartbeat is Config.Heartbeat when it is zero.
const DefaultHeartbeat = 12 * time.Second

// DefaultDirMtimeSkip is Config.DirMtimeSkip when it is zero.
const DefaultDirMtimeSkip = 10 * time.Millisecond

// DefaultSessionTimeout is Config.SessionTimeout of a client with the
// default heartbeat: 25 heartbeats.
const DefaultSessionTimeout = 25 * DefaultHeartbeat

// SessionInfo describes one mount.
type SessionInfo struct {
	Host       string
	MountPoint string
	Version    string
	PID        int
	Started    int64
	// BootID and PIDNamespace name the kernel boot and the pid
	// namespace PID belongs to, and ProcStart is the start time of that
	// process in clock ticks after boot (see hostproc.go): a new client
	// on the same host cleans up at once after a session whose process
	// is gone. A client fills them in for its own process; records
	// without them (older ones) expire by heartbeat only.
	BootID       string `json:",omitempty"`
	PIDNamespace string `json:",omitempty"`
	ProcStart    uint64 `json:",omitempty"`
	// OpenFiles is how many files the mount had open at its last
	// heartbeat, and Open the inodes of up to OpenListed of them, lowest
	// first: the mount publishes them with each heartbeat instead of a
	// write at every open and close.
	OpenFiles int   `json:",omitempty"`
	Open      []Ino `json:",omitempty"`
	// CacheGroup names the cache group the mount is a member of, and
	// CacheID, CacheAddr and CacheWeight describe it as a member
	// (package cachegroup): its peers find it here.
	CacheGroup  string `json:",omitempty"`
	CacheID     string `json:",omitempty"`
	CacheAddr   string `json:",omitempty"`
	CacheWeight int    `json:",omitempty"`
	// Figures are what Config.Figures gave at the last heartbeat.
	Figures map[string]uint64 `json:",omitempty"`
}

// OpenListed bounds the open files a session record lists.
const OpenListed = 100

// openFiles returns how many files this client has open and the lowest
// OpenListed of their inodes.
func (c *Client) openFiles() (int, []Ino) {
	c.mu.Lock()
	inos := make([]Ino, 0, len(c.mu.open))
	for ino := range c.mu.open {
		inos = append(inos, ino)
	}
	c.mu.Unlock()
	slices.Sort(inos)
	n := len(inos)
	if n > OpenListed {
		inos = inos[:OpenListed]
	}
	return n, inos
}

// Client is one mount's handle on a volume's metadata.
type Client struct {
	st   store.Store
	conf Config
	// format holds the settings the client opened with: what only a new
	// mount applies (ACLs) is read here.
	format *Format
	// settings holds them as last reloaded (see ReloadFormat): capacity,
	// inode limit and trash days are read here, so that `sluice config`
	// reaches live clients within a heartbeat.
	settings atomic.Pointer[Format]
	// reloadMu serializes applying reloaded settings, so that
	// OnFormatChange sees them in order.
	reloadMu sync.Mutex
	log      *slog.Logger

	inodes, slices idPool

	// commits has the slice commits of one file take turns (turns.go).
	commits turns

	// Usage deltas not yet written to the shared counters; flushed in the
	// background so creates do not all serialize on one counter record.
	usedSpace, usedInodes atomic.Int64
	// flushMu is held for writing by flushUsage from taking the deltas to
	// the commit of the counters, and for reading by usage around its
	// transaction, so a reader never sees deltas in neither place. Take it
	// before, never inside, a store transaction.
	flushMu sync.RWMutex

	sid uint64

	// batch sizes the batched transactions within the engine's limits.
	batch batches

	// recent remembers the directories this client's changes committed.
	recent recentDirs
	// ahead answers lookups from listings of directories being walked.
	ahead statahead
	// opened answers opens from the attributes earlier opens read.
	opened openCache

	// delMu serializes rounds of the deletion queues (background and
	// FlushDeletions), so that one client never works on a slice twice.
	delMu sync.Mutex
	dels  deletionCounters
	// changes counts the calls that began changing the volume for a
	// caller (see writable): while it moves, the background deletion
	// round drops one batch, and leaves the rest for when callers pause.
	changes atomic.Uint64

	mu struct {
		sync.Mutex
		open      map[Ino]int  // open handles per inode
		sustained map[Ino]bool // unlinked while open
		// unnamed lists the files made by Tmpfile that have had no
		// link since: only those may Link give a first name.
		unnamed map[Ino]bool
		// posix lists the inodes on which this session ever asked for a
		// POSIX lock: only there can ReleaseLocks find records to drop.
		posix map[Ino]bool
		// sessions is what the client last saw of the session list
		// (orphan.go); nil before it looked.
		sessions *sessionsSeen
	}

	// orphanMu serializes CollectOrphans, and guards the round this
	// session last answered and the one it started (orphan.go).
	orphanMu      sync.Mutex
	orphanAcked   int64
	orphanPending *orphanRound

	cancel context.CancelFunc
	done   chan struct{}
	// attached is set on a client working for a session another client
	// owns (Attach).
	attached bool
}

// idPool hands out ids from batches reserved in the engine.
type idPool struct {
	mu        sync.Mutex
	next, end uint64
}

// Load reads the volume settings from st.
func Load(ctx context.Context, st store.Store) (*Format, error) {
	var f *Format
	err := st.View(ctx, func(tx store.Tx) error {
		b, err := tx.Setting()
		if errors.Is(err, store.ErrNotFound) {
			return notFormatted(st)
		}
		if err != nil {
			return err
		}
		f, err = DecodeFormat(b)
		return err
	})
	return f, err
}

// notFormatted is the error of a store that holds no volume.
func notFormatted(st store.Store) error {
	return fmt.Errorf("no volume found in %s (not formatted): run `sluice format` first", st.Name())
}

// FormatVolume stores new settings and creates the root directory. When a
// volume already exists it may change only mutable settings (capacity,
// inodes, trash days, limits) and must keep the immutable ones, its
// storage and its bucket (see checkImmutable).
func FormatVolume(ctx context.Context, st store.Store, f *Format) (created bool, err error) {
	if err := f.Validate(); err != nil {
		return false, err
	}
	now := time.Now() // a volume is formatted outside any client, by the real clock
	err = st.Update(ctx, func(tx store.Tx) error {
		f.MetaVersion = MetaVersion
		b, err := tx.Setting()
		if err == nil {
			old, err := DecodeFormat(b)
			if err != nil {
				return err
			}
			f.UUID = old.UUID
			f.MetaVersion = old.MetaVersion // its records are of that layout
			if err := f.checkImmutable(old); err != nil {
				return err
			}
			created = false
		} else if errors.Is(err, store.ErrNotFound) {
			created = true
			tx.SetNode(&store.Node{Ino: RootIno, Type: store.TypeDir, Mode: 0o777, Nlink: 2,
				Atime: now.Unix(), Mtime: now.Unix(), Ctime: now.Unix(),
				Atimensec: uint32(now.Nanosecond()), Mtimensec: uint32(now.Nanosecond()), Ctimensec: uint32(now.Nanosecond()),
				Length: 4096, Parent: RootIno})
			tx.SetCounter(CounterNextInode, 2)
			tx.SetCounter(CounterNextSlice, 1)
			tx.SetCounter(CounterNextSession, 1)
		} else {
			return err
		}
		return setFormatTx(tx, f, now)
	})
	return created, err
}

// setFormatTx stores f, creating the trash directory when f has a trash.
func setFormatTx(tx store.Tx, f *Format, now time.Time) error {
	if f.TrashDays > 0 {
		if err := ensureTrashTx(tx, now); err != nil {
			return err
		}
	}
	b, err := json.Marshal(f)
	if err != nil {
		return err
	}
	tx.SetSetting(b)
	return nil
}

// ErrFormatChanged reports that UpdateFormat found other settings stored
// than the ones it was to change.
var ErrFormatChanged = errors.New("the volume's settings changed meanwhile")

// UpdateFormat replaces the settings of an existing volume, old, by f in
// one transaction, and fails with ErrFormatChanged when the stored
// settings are no longer old (another change came first). Unlike
// FormatVolume it may change the storage, bucket and credentials (`sluice
// config` moves a volume to a bucket its objects were copied to); what the
// stored data depends on stays refused (CheckImmutable). Live clients pick
// the change up on their next heartbeat.
func UpdateFormat(ctx context.Context, st store.Store, old, f *Format) error {
	if err := f.Validate(); err != nil {
		return err
	}
	if err := f.CheckImmutable(old); err != nil {
		return err
	}
	// Settings change the layout of no record.
	f.MetaVersion = old.MetaVersion
	now := time.Now() // as FormatVolume: outside any client
	return st.Update(ctx, func(tx store.Tx) error {
		b, err := tx.Setting()
		if errors.Is(err, store.ErrNotFound) {
			return notFormatted(st)
		}
		if err != nil {
			return err
		}
		cur, err := DecodeFormat(b)
		if err != nil {
			return err
		}
		if *cur != *old {
			return fmt.Errorf("volume %q: %w; run the command again", old.Name, ErrFormatChanged)
		}
		return setFormatTx(tx, f, now)
	})
}

// NewSession opens the volume in st for one mount and starts its session
// and background work. Close stops them.
func NewSession(ctx context.Context, st store.Store, conf Config) (*Session, error) {
	c, err := newClient(ctx, st, conf)
	if err != nil {
		return nil, err
	}
	if !conf.ReadOnly {
		if err := c.registerSession(ctx); err != nil {
			return nil, err
		}
		// Before the caller serves anything: a program here may need a
		// lock that a killed mount of this host still holds.
		if err := c.cleanDeadLocalSessions(ctx); err != nil {
			c.log.Warn("clean up after dead mounts of this host; their sessions expire by heartbeat", "err", err)
		}
	}
	bg, cancel := context.WithCancel(context.Background())
	c.cancel = cancel
	go c.background(bg)
	return &Session{Client: c}, nil
}

// Guard runs call, an exchange with the metadata engine made outside
// the client's transactions (an operation the metadata server runs for
// the session, internal/meta/remote), under the bound and the outage
// watch of the client's own transactions: its context ends after
// Config.OpTimeout, and while the engine is known not to answer, Guard
// fails at once without calling it (see outage).
func (s *Session) Guard(ctx context.Context, call func(context.Context) error) error {
	c := s.Client
	b, ok := c.st.(bounded)
	if !ok {
		return call(ctx)
	}
	return b.guard(ctx, call, func(error) bool { return false })
}

// GuardWait is Guard for a call that may rightly wait longer than
// Config.OpTimeout, a lock request that waits for another holder: it
// fails at once while the engine is known not to answer, but does not
// bound the call, which ends when the lock is granted, the request is
// interrupted, or its connection fails.
func (s *Session) GuardWait(ctx context.Context, call func(context.Context) error) error {
	c := s.Client
	if b, ok := c.st.(bounded); ok {
		if err := b.o.check(); err != nil {
			return err
		}
	}
	return call(ctx)
}

// newClient returns a client over st with conf's defaults filled in,
// before it has a session or background work.
func newClient(ctx context.Context, st store.Store, conf Config) (*Client, error) {
	f, err := Load(ctx, st)
	if err != nil {
		return nil, err
	}
	if conf.Heartbeat <= 0 {
		conf.Heartbeat = DefaultHeartbeat
	}
	if conf.SessionTimeout <= 0 {
		conf.SessionTimeout = 25 * conf.Heartbeat
	}
	if conf.DirMtimeSkip == 0 {
		conf.DirMtimeSkip = DefaultDirMtimeSkip
	}
	if conf.Now == nil {
		conf.Now = time.Now
	}
	if conf.DeleteWorkers <= 0 {
		conf.DeleteWorkers = 10
	}
	if conf.TruncateSyncBatches == 0 {
		conf.TruncateSyncBatches = 64
	}
	if conf.OpTimeout == 0 {
		conf.OpTimeout = DefaultOpTimeout
	}
	limits := store.LimitsOf(st)
	if limits.MissesPhantoms {
		// An rmdir's emptiness scan would not conflict with a create
		// that left the directory's node unwritten.
		conf.DirMtimeSkip = -1
	}
	batch := batchesFor(limits)
	st = bound(st, conf.OpTimeout, conf.Logger)
	c := &Client{st: st, conf: conf, format: f, log: conf.Logger, batch: batch, done: make(chan struct{}),
		recent: recentDirs{ttl: conf.DirAttrReuse, now: conf.Now}}
	var ws watchers
	if conf.Statahead > 0 {
		c.ahead = statahead{ttl: conf.Statahead, now: conf.Now}
		ws = append(ws, &c.ahead)
	}
	if conf.OpenCache > 0 {
		c.opened = openCache{ttl: conf.OpenCache, now: conf.Now}
		ws = append(ws, &c.opened)
	}
	switch len(ws) {
	case 0:
	case 1:
		c.st = watchedStore{Store: c.st, w: ws[0]}
	default:
		c.st = watchedStore{Store: c.st, w: ws}
	}
	if c.log == nil {
		c.log = slog.New(slog.DiscardHandler)
	}
	c.settings.Store(f)
	c.mu.open = map[Ino]int{}
	c.mu.sustained = map[Ino]bool{}
	c.mu.unnamed = map[Ino]bool{}
	c.mu.posix = map[Ino]bool{}
	return c, nil
}

// current returns the volume settings as the client last reloaded them (on
// every heartbeat); callers must not change them.
func (c *Client) current() *Format { return c.settings.Load() }

// Close flushes usage counters, ends the session and stops background work.
// Files this session kept open after unlink are deleted (unless another
// session may hold them) and its locks released.
func (s *Session) Close(ctx context.Context) error {
	c := s.Client
	c.cancel()
	select {
	case <-c.done:
	case <-ctx.Done():
		// The background work is stuck in a transaction that does not
		// see its cancellation (a driver read that ends only at its
		// deadline, up to --meta-timeout away); the caller gives up,
		// and closing the engine then ends the read.
		return fmt.Errorf("close the session: background work still running: %w", ctx.Err())
	}
	if c.attached {
		return c.flushUsage(ctx)
	}
	var errs []error
	if !c.conf.ReadOnly {
		// Release this session's locks, delete the files it kept open
		// after unlink, and end the session; then flush the usage that
		// changed.
		errs = append(errs, c.cleanSession(ctx, c.sid))
		c.mu.Lock()
		clear(c.mu.sustained)
		c.mu.Unlock()
		errs = append(errs, c.flushUsage(ctx))
	}
	return errors.Join(errs...)
}

func (c *Client) registerSession(ctx context.Context) error {
	info := c.conf.SessionInfo
	if self, ok := thisProcess(); ok {
		self.describe(&info)
	} else if info.PID == 0 {
		info.PID = os.Getpid()
	}
	if info.Started == 0 {
		info.Started = c.conf.Now().Unix()
	}
	return c.st.Update(ctx, func(tx store.Tx) error {
		n, err := tx.Counter(CounterNextSession)
		if err != nil {
			return err
		}
		// A new session holds none of the files that lost their last
		// name before it: it has answered every orphan round so far.
		round, err := tx.Counter(counterOrphanRound)
		if err != nil {
			return err
		}
		b, err := json.Marshal(sessionRecord{SessionInfo: info, OrphanAck: round})
		if err != nil {
			return err
		}
		tx.SetCounter(CounterNextSession, n+1)
		c.sid = uint64(n)
		c.orphanAcked = round
		seen, err := c.readSessions(tx, n+1)
		if err != nil {
			return err
		}
		c.mu.sessions = seen
		tx.SetSession(store.Session{Sid: c.sid, Heartbeat: c.conf.Now().Unix(), Info: b})
		return nil
	})
}

// SessionStatus is one registered mount, for `sluice status`.
type SessionStatus struct {
	Sid       uint64
	Heartbeat time.Time
	SessionInfo
}

// Sessions lists the mounts registered with the volume in st.
func Sessions(ctx context.Context, st store.Store) ([]SessionStatus, error) {
	var out []SessionStatus
	err := st.View(ctx, func(tx store.Tx) error {
		ss, err := tx.Sessions()
		if err != nil {
			return err
		}
		out = out[:0]
		for _, s := range ss {
			st := SessionStatus{Sid: s.Sid, Heartbeat: time.Unix(s.Heartbeat, 0)}
			_ = json.Unmarshal(s.Info, &st.SessionInfo) // unknown info still lists the session
			out = append(out, st)
		}
		return nil
	})
	return out, err
}

// allocate returns a fresh id from pool, reserving batches of n in counter.
func (c *Client) allocate(ctx context.Context, p *idPool, counter string, n uint64) (uint64, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.next == p.end {
		var start int64
		// The reservation is not the effect of the call it runs under.
		err := c.st.Update(store.WithoutCall(ctx), func(tx store.Tx) error {
			v, err := tx.Counter(counter)
			if err != nil {
				return err
			}
			start = v
			tx.SetCounter(counter, v+int64(n))
			return nil
		})
		if err != nil {
			return 0, fmt.Errorf("allocate %s: %w", counter, err)
		}
		p.next, p.end = uint64(start), uint64(start)+n
	}
	id := p.next
	p.next++
	return id, nil
}

// newIno returns a new inode number. No number is ever given twice, so an
// inode number alone names one file for the life of the volume, and the
// file handles the FUSE binding gives the kernel carry generation 0: the
// numbers come from the volume's nextInode counter, which only grows
// (each client reserves batches of it and drops what it did not use;
// load keeps the dumped counter, or the largest loaded inode plus one);
// the root, the trash and the internal files have fixed numbers that
// always name the same thing, and a trash hour directory is numbered by
// its hour, which does not come again. The one exception is loading an
// older dump (a metadata backup) in place of a volume's metadata, which
// rolls the counter back with the rest: numbers given after that dump
// may then name other files, so handles taken before (an NFS client's)
// must be dropped, by mounting again.
func (c *Client) newIno(ctx context.Context) (Ino, error) {
	id, err := c.allocate(ctx, &c.inodes, CounterNextInode, 128)
	return Ino(id), err
}

// NewSliceID returns a volume-wide unique slice id.
func (c *Client) NewSliceID(ctx context.Context) (uint64, error) {
	return c.allocate(ctx, &c.slices, CounterNextSlice, 256)
}

func (c *Client) flushUsage(ctx context.Context) error {
	c.flushMu.Lock()
	defer c.flushMu.Unlock()
	space, inodes := c.usedSpace.Swap(0), c.usedInodes.Swap(0)
	if space == 0 && inodes == 0 {
		return nil
	}
	err := c.st.Update(ctx, func(tx store.Tx) error {
		s, err := tx.Counter(CounterUsedSpace)
		if err != nil {
			return err
		}
		i, err := tx.Counter(CounterUsedInodes)
		if err != nil {
			return err
		}
		tx.SetCounter(CounterUsedSpace, s+space)
		tx.SetCounter(CounterUsedInodes, i+inodes)
		return nil
	})
	if err != nil {
		c.usedSpace.Add(space)
		c.usedInodes.Add(inodes)
	}
	return err
}

// flushTimeout bounds a periodic usage flush that Close waits for.
const flushTimeout = 10 * time.Second

// flushUsageDetached runs a periodic flush that Close cannot cut short. A
// flush cancelled while its commit is on the wire has an unknown outcome:
// the engine may have applied it after the client gave up, and flushUsage,
// seeing an error, keeps the deltas for the next flush, which would count
// them twice. So the flush runs to its end (or flushTimeout) and Close, which
// waits for the background loop, flushes only what is left.
func (c *Client) flushUsageDetached(ctx context.Context) error {
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), flushTimeout)
	defer cancel()
	return c.flushUsage(fctx)
}

// background owns the periodic work of a client: usage flushes,
// heartbeats (which reload the volume's settings), data deletion and
// trash expiry. It stops when ctx is cancelled.
func (c *Client) background(ctx context.Context) {
	defer close(c.done)
	if c.conf.ReadOnly {
		c.followSettings(ctx)
		return
	}
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	lastBeat := time.Now()
	lastTrash := time.Now() // first expiry a minute after mounting
	var changesSeen uint64
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		// A tick that was due when ctx ended may win the select: without
		// this, a stalled engine could keep Close waiting for flushes of
		// flushTimeout each, one after another.
		if ctx.Err() != nil {
			return
		}
		if err := c.flushUsageDetached(ctx); err != nil {
			c.log.Warn("flush usage counters", "err", err)
		}
		c.ahead.prune()
		if time.Since(lastBeat) >= c.conf.Heartbeat {
			lastBeat = time.Now()
			if err := c.heartbeat(ctx); err != nil && ctx.Err() == nil {
				c.log.Warn("session heartbeat", "sid", c.sid, "err", err)
			}
			if err := c.cleanStaleSessions(ctx); err != nil && ctx.Err() == nil {
				c.log.Warn("clean stale sessions", "err", err)
			}
		}
		if err := c.collectOrphans(ctx); err != nil && ctx.Err() == nil {
			c.log.Warn("collect orphaned files", "err", err)
		}
		if err := c.processDeletions(ctx, c.deletionRound(&changesSeen)); err != nil && ctx.Err() == nil {
			c.log.Warn("delete data", "err", err)
		}
		if time.Since(lastTrash) >= time.Minute {
			lastTrash = time.Now()
			if _, err := c.expireTrash(ctx); err != nil && ctx.Err() == nil {
				c.log.Warn("expire trash", "err", err)
			}
		}
	}
}

// Errno extracts the POSIX error number of err: the wrapped syscall.Errno,
// EIO for a network errno (transportErrnos) and for any other failure,
// EINTR for a cancellation, 0 for nil.
func Errno(err error) syscall.Errno {
	if err == nil {
		return 0
	}
	var e syscall.Errno
	if errors.As(err, &e) {
		if transportErrnos[e] {
			// The engine, the metadata server or the object store
			// could not be reached: no file system answers that, and
			// programs understand EIO.
			return syscall.EIO
		}
		return e
	}
	if errors.Is(err, context.Canceled) {
		return syscall.EINTR
	}
	return syscall.EIO
}

// transportErrnos are the errnos of a network connection (to a metadata
// engine, the metadata server, an object store) that a failure to reach
// it carries. They are never the answer of a file system operation:
// Errno turns them into EIO.
var transportErrnos = map[syscall.Errno]bool{
	syscall.ECONNREFUSED: true, syscall.ECONNRESET: true, syscall.ECONNABORTED: true,
	syscall.ENOTCONN: true, syscall.ETIMEDOUT: true, syscall.EHOSTUNREACH: true,
	syscall.ENETUNREACH: true, syscall.ENETDOWN: true, syscall.ENETRESET: true,
	syscall.EHOSTDOWN: true, syscall.EPIPE: true, syscall.ESHUTDOWN: true,
	syscall.EADDRNOTAVAIL: true, syscall.EPROTO: true,
}
