package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/debug"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/sluicefs/sluice/internal/backup"
	"github.com/sluicefs/sluice/internal/chunk"
	"github.com/sluicefs/sluice/internal/fuse"
	"github.com/sluicefs/sluice/internal/meta"
	"github.com/sluicefs/sluice/internal/procs"
	"github.com/sluicefs/sluice/internal/vfs"
	"github.com/sluicefs/sluice/internal/volume"
)

// kernelReadahead is the kernel's readahead for the mount's files: FUSE
// starts at 128 KiB, which keeps a sequential reader waiting on each
// request; 8 MiB keeps eight 1 MiB requests in flight.
const kernelReadahead = 8 << 20

type mountOptions struct {
	background     bool
	attrCache      time.Duration
	entryCache     time.Duration
	dirEntryCache  time.Duration
	negEntryCache  time.Duration
	openCache      time.Duration
	readdirCache   bool
	readOnly       bool
	xattr          bool
	bufferSize     int64
	maxUploads     int
	logFile        string
	logRotation    logRotation // --log-max-size, --log-backups, --log-compress (logfile.go)
	debug          bool
	heartbeat      time.Duration
	sessionTimeout time.Duration // 0: meta's default, 25 heartbeats
	metaTimeout    time.Duration
	atimeMode      string
	pprof          string
	maxReadahead   int64
	prefetch       int
	maxDownloads   int
	uploadLimit    int64 // Mbps
	downloadLimit  int64 // Mbps
	cacheDir       string
	cacheSize      int64
	freeRatio      float64
	partialOnly    bool
	largeWrite     bool
	writeback      bool
	metrics        string
	hideInternal   bool
	flags          map[string]string // every flag's value, for .config
	metaURL        string            // with its password hidden, for .config
	getTimeout     time.Duration
	putTimeout     time.Duration
	backupMeta     time.Duration
	backupMetaMin  time.Duration // hidden: tests lower it
	subdir         string
	cacheGroup     volume.CacheGroupOptions
}

// minSessionHeartbeats is the shortest --session-timeout, in heartbeats.
const minSessionHeartbeats = 3

// minBackupInterval is the shortest --backup-meta, as in JuiceFS: each
// backup dumps the whole volume.
const minBackupInterval = 5 * time.Minute

func defaultLogFile() string {
	if os.Geteuid() == 0 {
		return "/var/log/sluice.log"
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "sluice.log"
	}
	return filepath.Join(home, ".sluice", "sluice.log")
}

// defaultCacheDir is where blocks are cached on local disk: a system
// directory for root, one in the home directory for other users.
func defaultCacheDir() string {
	if os.Geteuid() == 0 {
		return "/var/sluiceCache"
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "sluiceCache"
	}
	return filepath.Join(home, ".sluice", "cache")
}

// defaultMountOptions are the defaults of mount's flags, which the other
// commands that serve a volume (webdav) share.
func defaultMountOptions() mountOptions {
	return mountOptions{attrCache: time.Second, entryCache: time.Second, dirEntryCache: time.Second,
		bufferSize: 300 << 20, maxUploads: 20, maxReadahead: 64 << 20, prefetch: 1,
		maxDownloads: 200, getTimeout: time.Minute, putTimeout: time.Minute, cacheDir: defaultCacheDir(), cacheSize: 100 << 30, freeRatio: 0.1, heartbeat: 12 * time.Second,
		metaTimeout: meta.DefaultOpTimeout, backupMeta: time.Hour, backupMetaMin: minBackupInterval}
}

func newMount() *cobra.Command {
	o := defaultMountOptions()
	cmd := &cobra.Command{
		Use:   "mount META-URL MOUNTPOINT",
		Short: "Mount a volume with FUSE",
		Long: `Mount the volume whose metadata lives in META-URL at MOUNTPOINT, an existing
empty directory. In the foreground the command serves until the volume is
unmounted or it receives SIGINT or SIGTERM, which unmount cleanly. With -d it
returns once the mount is ready and serves in the background, logging to
--log. As root the mount needs no fusermount helper. Once unmounted, the
process ends its session in the metadata engine; when the engine does not
answer, that waits up to --meta-timeout, and a SIGINT or SIGTERM then gives
it up (the session is then cleaned up as after a crash, below).

Sessions: each mount registers a session in the metadata engine and renews
it every --heartbeat; the POSIX locks and flocks its programs hold, and the
files they keep open after unlink, are recorded under it. When a mount dies
without unmounting (SIGKILL, a crash), the next mount started on the same
host (same host name, boot and pid namespace) sees that its process is gone
and cleans up its session, releasing its locks, before it serves anything:
a program such as SQLite finds the volume as the dead mount's programs left
it, with no lock held for them. Mounts elsewhere clean it up once it has
been silent for --session-timeout (25 heartbeats, 5 minutes by default), a
trade between how long a crashed host's locks block the others and how long
a live mount may be cut off from the engine, or paused, before it loses its
locks to them. A read-only mount has no session and cleans up nothing.

Metadata backups (--backup-meta, default 1h; 0 disables): once per
interval, one mount of the volume (whichever takes the lease kept in the
metadata engine first) dumps the whole volume, without the object storage
secrets, into its bucket as NAME/meta/dump-YYYY-MM-DD-HHMMSS.json.gz (UTC),
encrypted with the volume's key when it has one (as JuiceFS does; not
compressed again with the volume's compression). The dump runs in the
background on two workers, in batches rather than one snapshot, so it
never holds a long transaction against the engine; it is therefore not a
point in time when the volume changes meanwhile. A volume of more than a
million files is backed up only with an interval above 1h. Read-only
mounts never back up; failures are logged and the mount goes on. The
backup of an encrypted volume is sealed whole, so it may hold at most
64 MiB of gzip.

After each backup, older ones are rotated: every backup of the last 2 days
is kept; of older ones, the oldest of each day (UTC) until they are 2 weeks
old, the oldest of each week until they are 2 months (60 days) old, and the
oldest of each month for ever. To restore, copy the object out of the
bucket and run 'sluice load NEW-META-URL dump-....json.gz' (with
--encrypt-rsa-key KEY.pem for an encrypted volume): see 'sluice load --help'.`,
		Example: `  sluice mount sqlite3://vol.db /mnt/vol          # foreground; Ctrl-C unmounts
  sluice mount -d sqlite3://vol.db /mnt/vol       # background
  sluice umount /mnt/vol`,
		Args: exactArgs(2, "META-URL and MOUNTPOINT"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if o.background && os.Getenv(readyFdEnv) == "" {
				return daemonize(cmd.OutOrStdout(), args[1], o.logFile)
			}
			o.flags = flagValues(cmd)
			o.metaURL = redactURL(args[0])
			return runMount(args[0], args[1], &o)
		},
	}
	fl := cmd.Flags()
	fl.BoolVarP(&o.background, "background", "d", false, "run in the background; return once the mount is ready")
	fl.Var(secondsValue{&o.attrCache}, "attr-cache", "how long the kernel caches attributes (seconds or a duration)")
	fl.Var(secondsValue{&o.entryCache}, "entry-cache", "how long the kernel caches file entries (seconds or a duration)")
	fl.Var(secondsValue{&o.dirEntryCache}, "dir-entry-cache", "how long the kernel caches directory entries (seconds or a duration)")
	fl.Var(secondsValue{&o.negEntryCache}, "negative-entry-cache", "how long the kernel caches that a name is missing (seconds or a duration; a name another mount creates stays hidden that long)")
	fl.Var(secondsValue{&o.openCache}, "open-cache", "how long an open of a file or directory may trust the attributes an earlier open of it on this mount read, without asking the engine (seconds or a duration; another mount's change of a file opened again within that time may go unseen until it passes; 0: ask at every open, close-to-open; not with the metadata server, whose opens are its own)")
	fl.BoolVar(&o.readdirCache, "readdir-cache", false, "let the kernel keep directory listings and list a directory again without asking while it is unchanged (checked against the engine at every opendir); for trees listed over and over with long entry and attribute caches, such as git working trees")
	fl.BoolVar(&o.readOnly, "read-only", false, "mount read-only: every change fails with EROFS")
	fl.BoolVar(&o.xattr, "enable-xattr", true, "serve extended attributes (getfattr/setfattr, file capabilities, what cp -a and rsync -X copy); --enable-xattr=false answers every xattr request ENOSYS, so that the kernel stops asking, as JuiceFS does by default: tools see EOPNOTSUPP, and small files are created and copied with fewer requests (not on a volume with POSIX ACLs)")
	fl.Var(sizeValue{&o.bufferSize, 1 << 20}, "buffer-size", "memory for write buffers (writers wait when it is used up) and, as much again, for the in-memory block cache (a plain number is MiB)")
	fl.IntVar(&o.maxUploads, "max-uploads", o.maxUploads, "number of blocks uploaded concurrently")
	fl.Var(sizeValue{&o.maxReadahead, 1 << 20}, "max-readahead", "largest readahead window of one sequential reader (a plain number is MiB; 0 disables readahead)")
	fl.IntVar(&o.prefetch, "prefetch", o.prefetch, "blocks a random read may fetch whole in the background, concurrently (0: fetch only the bytes read; on a local bucket, only reads that had to wait for its disk fetch)")
	fl.IntVar(&o.maxDownloads, "max-downloads", o.maxDownloads, "number of blocks downloaded concurrently")
	fl.Int64Var(&o.uploadLimit, "upload-limit", 0, "bandwidth limit of uploads in Mbps (0: the volume's setting, else unlimited)")
	fl.Int64Var(&o.downloadLimit, "download-limit", 0, "bandwidth limit of downloads in Mbps (0: the volume's setting, else unlimited)")
	fl.Var(secondsValue{&o.getTimeout}, "get-timeout", "longest one download of a block may take before it is retried (seconds or a duration)")
	fl.Var(secondsValue{&o.putTimeout}, "put-timeout", "longest one upload (or other object request) may take before it is retried (seconds or a duration)")
	fl.StringVar(&o.cacheDir, "cache-dir", o.cacheDir, "directories of the local block cache, separated by ':'; 'memory' keeps blocks in memory only")
	fl.Var(sizeValue{&o.cacheSize, 1 << 20}, "cache-size", "size of the local block cache, across its directories (a plain number is MiB)")
	fl.Float64Var(&o.freeRatio, "free-space-ratio", o.freeRatio, "share of each cache directory's disk kept free: below it cached blocks are evicted")
	fl.BoolVar(&o.partialOnly, "cache-partial-only", false, "do not cache the blocks this mount writes (never cached on file storage, which is local already)")
	fl.BoolVar(&o.largeWrite, "cache-large-write", false, "cache the written blocks of the full block size too, not only shorter ones (small files, a file's last block)")
	fl.BoolVar(&o.writeback, "writeback", false, "acknowledge writes once their blocks are staged durably in the cache directory, and upload in the background (see `sluice umount --flush`)")
	fl.StringVar(&o.metrics, "metrics", "", "serve the mount's metrics (FUSE, metadata and object storage latency, caches, buffers, usage, CPU and memory) for Prometheus at http://ADDR/metrics (e.g. 127.0.0.1:9567); the file .stats at the mount's root shows the same")
	fl.BoolVar(&o.hideInternal, "hide-internal", false, "leave the internal files (.accesslog, .stats, .config, .control) out of listings of the root; they can still be opened by name")
	fl.StringVar(&o.logFile, "log", defaultLogFile(), "log file of a background mount")
	o.logRotation.addFlags(fl)
	fl.StringVar(&o.atimeMode, "atime-mode", meta.AtimeNone, "when reads update access times: noatime (never), relatime (as Linux's relatime), strictatime (every open file's first read, every listing)")
	fl.Var(secondsValue{&o.metaTimeout}, "meta-timeout", "longest a metadata operation may wait for the metadata engine, retries included, before it fails with EIO; once one has, the next fail at once until the engine answers again (seconds or a duration; 0: wait for ever)")
	fl.Var(secondsValue{&o.heartbeat}, "heartbeat", "interval of session heartbeats; a mount silent for the session timeout is cleaned up by the others (use one value on all mounts)")
	fl.Var(secondsValue{&o.sessionTimeout}, "session-timeout", "how long another mount may go without a heartbeat before this one cleans up its session, releasing its locks and deleting the files it kept open after unlink (seconds or a duration, at least 3 heartbeats). Shorter frees the locks of a crashed host sooner; but a live mount cut off from the engine, or paused (a VM, SIGSTOP), for longer loses its locks and open deleted files to the others while its programs go on. Use one value on all mounts. A killed mount is cleaned up at once by the next mount on its host, whatever this is. 0: 25 heartbeats, 5 minutes with the default heartbeat")
	fl.BoolVar(&o.debug, "debug", false, "log every FUSE request")
	fl.Var(secondsValue{&o.backupMeta}, "backup-meta", "interval of automatic metadata backups into the bucket's meta/ directory, by one mount of the volume (seconds or a duration, at least 5m; 0 disables)")
	fl.Var(secondsValue{&o.backupMetaMin}, "backup-meta-min", "shortest --backup-meta accepted (for tests)")
	_ = fl.MarkHidden("backup-meta-min")
	fl.StringVar(&o.pprof, "pprof", "", "serve Go's pprof profiles over HTTP at this address (e.g. 127.0.0.1:6060)")
	fl.StringVar(&o.subdir, "subdir", "", "mount only this directory of the volume (a path from its root) as the root: nothing outside it can be reached, by name, by '..' or by a file handle; symlinks pointing out of it resolve in the host's tree, as any symlink's target does")
	o.addCacheGroupFlags(fl)
	return cmd
}

// effectiveHeartbeat is the interval of the mount's heartbeats: --heartbeat,
// or meta's default for 0.
func (o *mountOptions) effectiveHeartbeat() time.Duration {
	if o.heartbeat <= 0 {
		return meta.DefaultHeartbeat
	}
	return o.heartbeat
}

// validate checks the flags that take numbers and paths.
func (o *mountOptions) validate() error {
	switch {
	case o.prefetch < 0:
		return fmt.Errorf("--prefetch %d: must be 0 or more", o.prefetch)
	case o.maxReadahead < 0:
		return fmt.Errorf("--max-readahead: must be 0 or more")
	case o.maxUploads < 1:
		return fmt.Errorf("--max-uploads %d: must be 1 or more", o.maxUploads)
	case o.maxDownloads < 1:
		return fmt.Errorf("--max-downloads %d: must be 1 or more", o.maxDownloads)
	case o.uploadLimit < 0 || o.downloadLimit < 0:
		return fmt.Errorf("--upload-limit and --download-limit must be 0 (unlimited) or more")
	case o.freeRatio < 0 || o.freeRatio >= 1:
		return fmt.Errorf("--free-space-ratio %v: must be from 0 to below 1", o.freeRatio)
	case o.bufferSize < 1<<20:
		return fmt.Errorf("--buffer-size: must be at least 1 MiB")
	case o.backupMeta > 0 && o.backupMeta < o.backupMetaMin:
		return fmt.Errorf("--backup-meta %v: must be 0 (no backups) or at least %v", o.backupMeta, o.backupMetaMin)
	case o.sessionTimeout > 0 && o.sessionTimeout < minSessionHeartbeats*o.effectiveHeartbeat():
		// Heartbeats come on a one-second tick, and an engine may take a
		// while to answer one: a shorter timeout would have mounts clean
		// up after live ones.
		return fmt.Errorf("--session-timeout %v: must be 0 (25 heartbeats) or at least %d heartbeats (%v)",
			o.sessionTimeout, minSessionHeartbeats, minSessionHeartbeats*o.effectiveHeartbeat())
	}
	if o.cacheSize == 0 {
		o.cacheDir = "memory"
	}
	if err := o.validateCacheGroup(); err != nil {
		return err
	}
	if o.writeback && o.cacheDir == "memory" {
		return fmt.Errorf("--writeback needs a --cache-dir on disk (and a --cache-size above 0)")
	}
	dirs := filepath.SplitList(o.cacheDir)
	for i, d := range dirs {
		if d == "" || d == "memory" && len(dirs) > 1 {
			return fmt.Errorf("--cache-dir %q: give directories separated by ':', or 'memory' alone", o.cacheDir)
		}
		if d != "memory" {
			abs, err := filepath.Abs(d)
			if err != nil {
				return fmt.Errorf("--cache-dir %s: %w", d, err)
			}
			dirs[i] = abs
		}
	}
	o.cacheDir = strings.Join(dirs, string(filepath.ListSeparator))
	return nil
}

// checkMountPoint refuses a missing mount point, a file, or one that is
// mounted already.
func checkMountPoint(mp string) (string, error) {
	abs, err := filepath.Abs(mp)
	if err != nil {
		return "", fmt.Errorf("mount point %s: %w", mp, err)
	}
	fi, err := os.Stat(abs)
	if errors.Is(err, os.ErrNotExist) {
		return "", fmt.Errorf("mount point %s does not exist: create it first (mkdir -p %s)", abs, abs)
	}
	if err != nil {
		return "", fmt.Errorf("mount point %s: %w", abs, err)
	}
	if !fi.IsDir() {
		return "", fmt.Errorf("mount point %s is not a directory", abs)
	}
	// The mount table names the directory with links resolved, as the
	// kernel mounts it; so must every lookup there, here and once mounted.
	if abs, err = filepath.EvalSymlinks(abs); err != nil {
		return "", fmt.Errorf("mount point %s: %w", mp, err)
	}
	if src, ok := mountedAt(abs); ok {
		return "", fmt.Errorf("%s is already mounted (by %s): unmount it first", abs, src)
	}
	return abs, nil
}

func runMount(metaURL, mp string, o *mountOptions) (err error) {
	ready := readyReporter()
	defer func() {
		if err != nil {
			ready(err)
		}
	}()
	mp, err = checkMountPoint(mp)
	if err != nil {
		return err
	}
	if o.atimeMode, err = meta.ParseAtimeMode(o.atimeMode); err != nil {
		return err
	}
	if err := o.validate(); err != nil {
		return err
	}
	log, closeLog := mountLogger(o.debug, o.logFile, o.logRotation)
	defer closeLog()
	// Catch signals from the start: one that arrives while the mount is
	// being set up (the kernel may already show the mount) is handled
	// once it is ready, by unmounting, instead of killing the process.
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	defer signal.Stop(sigs)
	if o.pprof != "" {
		if err := servePprof(o.pprof, log); err != nil {
			return err
		}
	}
	ctx := context.Background()
	vol, err := volume.Open(ctx, metaURL, o.volumeOptions(mp, log))
	if err != nil {
		return err
	}
	defer func() {
		if cerr := vol.Close(ctx); cerr != nil {
			err = errors.Join(err, cerr)
		}
	}()
	f := vol.Format()
	debug.SetMemoryLimit(memoryLimit(o.bufferSize, f.Storage))
	if o.metrics != "" {
		if err := serveMetrics(o.metrics, log, vol.Telemetry().Handler()); err != nil {
			return err
		}
	}
	srv, err := fuse.Mount(vol.VFS(), mp, fuse.Options{FsName: "sluice:" + f.Name, KernelReadahead: kernelReadahead,
		ReadOnly: o.readOnly, Debug: o.debug, ACL: f.EnableACL, NoXattr: !o.xattr, Metrics: vol.Telemetry()}, log)
	if err != nil {
		return err
	}
	// One P while requests come one at a time, all of them under load
	// (see package procs). It starts after the server, which sizes its
	// pool of readers to the maximum.
	sched := procs.Start(0, log)
	defer sched.Stop()
	log.Info("volume mounted", "volume", f.Name, "mountpoint", mp, "meta", vol.Store().Name(), "pid", os.Getpid())
	if os.Getenv(readyFdEnv) == "" {
		fmt.Printf("Volume %s mounted at %s; press Ctrl-C or run `sluice umount %s` to unmount.\n", f.Name, mp, mp)
	}
	ready(nil)
	stopBackups := startBackups(vol, o, log)
	defer stopBackups() // before the deferred Close; a no-op once called

	gone := make(chan struct{})
	go func() { srv.Wait(); close(gone) }()
	for done := false; !done; {
		select {
		case sig := <-sigs:
			log.Info("unmounting", "signal", sig.String(), "mountpoint", mp)
			if err := srv.Unmount(); err != nil {
				log.Error("unmount failed; still serving (close files using the mount, or `sluice umount --force`)", "mountpoint", mp, "err", err)
			}
		case <-gone:
			done = true
		}
	}
	stopBackups()
	// The kernel has let go of the mount; closing the volume still talks
	// to the engine (buffered commits, the last syncs, the session's
	// record), for up to --meta-timeout when it does not answer. SIGINT
	// or SIGTERM now gives that up, as an operator who will not wait for
	// a dead engine means: the session is then cleaned up as after a
	// crash, at once by the next mount of this host, after its timeout
	// by the others.
	closeCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		for {
			select {
			case sig := <-sigs:
				if sig == syscall.SIGHUP {
					continue
				}
				log.Warn("giving up closing the volume; the next mount cleans up its session", "signal", sig.String())
				cancel()
				return
			case <-closeCtx.Done():
				return
			}
		}
	}()
	err = vol.Close(closeCtx)
	log.Info("volume unmounted", "mountpoint", mp)
	return err
}

// memoryLimit returns the soft memory limit of a mount. Write buffers and
// the memory block cache are each bounded by bufferSize; a limit a little
// above both makes the garbage collector keep the process near that
// instead of at twice its live heap. A mem bucket keeps every block in the
// heap as well: a limit below them would keep the collector running and
// handing pages back to the system, to fault them in again, so there is
// none.
func memoryLimit(bufferSize int64, storage string) int64 {
	if storage == "mem" {
		return math.MaxInt64
	}
	return 2*bufferSize + 256<<20
}

// startBackups starts the metadata backups of --backup-meta in the
// background and returns the function that stops them, waiting for a
// backup in progress to give up; it may be called more than once. Read-only
// mounts do not back up.
func startBackups(vol *volume.Volume, o *mountOptions, log *slog.Logger) (stop func()) {
	if o.backupMeta <= 0 {
		return func() {}
	}
	if o.readOnly {
		log.Info("metadata backups are off on a read-only mount")
		return func() {}
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		backup.Run(ctx, backup.Config{Interval: o.backupMeta, Client: vol.Client(), Store: vol.Store(),
			Objects: vol.SealedObjects(), Logger: log.With("task", "backup-meta")})
	}()
	log.Info("metadata backups on", "interval", o.backupMeta)
	return func() {
		cancel()
		<-done
	}
}

// dirAttrReuse is meta.Config.DirAttrReuse of a mount whose attribute
// cache is at least that long.
const dirAttrReuse = 100 * time.Millisecond

// statahead is the longest meta.Config.Statahead of a mount: a listing
// older than that answers no lookup, whatever the kernel's cache times.
const statahead = time.Second

// volumeOptions maps the mount's flags onto the options of volume.Open,
// for a mount at mp that logs to log.
func (o *mountOptions) volumeOptions(mp string, log *slog.Logger) volume.Options {
	opts := volumeOptions(volume.FileSystem, log, o.metaTimeout)
	opts.Subdir = o.subdir
	opts.CacheGroup = o.cacheGroup
	opts.WrapBucket = faultHook(log)
	opts.Objects = volume.ObjectOptions{
		MaxDownloads:  o.maxDownloads,
		UploadLimit:   o.uploadLimit * 1e6 / 8, // Mbps to bytes per second
		DownloadLimit: o.downloadLimit * 1e6 / 8,
		PutTimeout:    o.putTimeout,
		GetTimeout:    o.getTimeout,
	}
	opts.Chunks = chunk.Config{
		MaxUploads:       o.maxUploads,
		BufferSize:       o.bufferSize,
		MemoryCacheSize:  o.bufferSize,
		CacheDirs:        filepath.SplitList(o.cacheDir),
		CacheSize:        o.cacheSize,
		FreeSpaceRatio:   o.freeRatio,
		CachePartialOnly: o.partialOnly,
		CacheLargeWrite:  o.largeWrite,
		Writeback:        o.writeback,
		MaxReadahead:     o.maxReadahead,
		Prefetch:         o.prefetch,
	}
	opts.Meta = meta.Config{
		ReadOnly:       o.readOnly,
		Heartbeat:      o.heartbeat,
		SessionTimeout: o.sessionTimeout,
		OpTimeout:      opTimeout(o.metaTimeout),
		// The kernel asks again for the attributes of a directory whose
		// entries it just changed (to check permissions on the next
		// change): answer those from this mount's own change for a
		// moment, never longer than the kernel itself may cache them.
		DirAttrReuse: min(o.attrCache, dirAttrReuse),
		// Lookups of a directory walked name after name answer from one
		// listing of it; each answer is cached by the kernel only for
		// what is left of these times after its listing was read.
		Statahead:   min(o.entryCache, o.attrCache, statahead),
		OpenCache:   o.openCache,
		AtimeMode:   o.atimeMode,
		SessionInfo: meta.SessionInfo{MountPoint: mp, Version: Version},
	}
	opts.VFS = vfs.Config{AttrTimeout: o.attrCache, EntryTimeout: o.entryCache,
		DirEntryTimeout: o.dirEntryCache, NegEntryTimeout: o.negEntryCache, ReaddirCache: o.readdirCache,
		HideInternal: o.hideInternal, Settings: mountSettings{MetaURL: o.metaURL, MountPoint: mp, Version: Version, PID: os.Getpid(), Flags: o.flags}}
	return opts
}

// Background mounts: the parent re-runs itself with readyFdEnv naming an
// inherited pipe; the child reports "ok" or an error there once the mount
// is ready or has failed, and the parent exits accordingly.
const readyFdEnv = "_SLUICE_READY_FD"

func daemonize(out io.Writer, mp string, logFile string) error {
	if _, err := checkMountPoint(mp); err != nil {
		return err
	}
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("find own executable: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(logFile), 0o755); err != nil {
		return fmt.Errorf("log directory: %w", err)
	}
	logf, err := os.OpenFile(logFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("open log %s: %w", logFile, err)
	}
	defer logf.Close()
	r, w, err := os.Pipe()
	if err != nil {
		return err
	}
	defer r.Close()
	args := append(os.Args[1:], "--background=false")
	proc, err := os.StartProcess(exe, append([]string{exe}, args...), &os.ProcAttr{
		Env:   append(os.Environ(), readyFdEnv+"=3"),
		Files: []*os.File{nil, logf, logf, w},
		Sys:   &syscall.SysProcAttr{Setsid: true},
	})
	w.Close()
	if err != nil {
		return fmt.Errorf("start background mount: %w", err)
	}
	msg, _ := io.ReadAll(r)
	if string(msg) == "ok" {
		fmt.Fprintf(out, "Volume mounted at %s (pid %d, log %s); unmount with `sluice umount %s`.\n", mp, proc.Pid, logFile, mp)
		proc.Release()
		return nil
	}
	proc.Wait()
	if len(msg) == 0 {
		return fmt.Errorf("background mount exited before the mount was ready; see %s", logFile)
	}
	return errors.New(string(msg))
}

// readyReporter returns a function that reports the mount's outcome to a
// waiting parent, once; without a parent it does nothing.
func readyReporter() func(error) {
	if os.Getenv(readyFdEnv) == "" {
		return func(error) {}
	}
	f := os.NewFile(3, "ready")
	done := false
	return func(err error) {
		if done || f == nil {
			return
		}
		done = true
		if err != nil {
			fmt.Fprint(f, err.Error())
		} else {
			fmt.Fprint(f, "ok")
		}
		f.Close()
		os.Unsetenv(readyFdEnv)
	}
}

// opTimeout maps --meta-timeout to meta.Config.OpTimeout, where 0 means
// the default and a negative value no bound.
func opTimeout(d time.Duration) time.Duration {
	if d == 0 {
		return -1
	}
	return d
}
