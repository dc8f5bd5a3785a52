// Package volume opens a Sluice volume as a library: from a metadata URL
// it assembles the layers every command and access path needs, and
// releases them in the right order. Commands only print what the
// libraries return; a new command or server calls Open and never wires
// engines, buckets and caches together by hand.
//
// What Open builds, by Level:
//
//   - Metadata: the metadata engine the URL names (meta/engine/all) and
//     the volume's settings (meta.Format).
//   - Data: the object storage of the volume's blocks, as a stack of
//     decorators from the bucket out: the test hook WrapBucket, the
//     volume's layout (the NAME/ prefix, encryption with the volume's key,
//     compression as the volume says), metrics, concurrency and bandwidth
//     limits, and retries of transient errors.
//   - Client: a chunk store over that stack (block caches, writeback) and
//     a metadata client with a session, whose deletions go to the chunk
//     store.
//   - FileSystem: a VFS over both, with the background compactor unless
//     the mount is read-only.
//
// Close releases them from the top: the VFS (flushing open files), the
// metadata client (ending its session), the chunk store (stopping
// background uploads), then the metadata engine.
package volume

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/sluicefs/sluice/internal/cachegroup"
	"github.com/sluicefs/sluice/internal/chunk"
	"github.com/sluicefs/sluice/internal/compact"
	"github.com/sluicefs/sluice/internal/control"
	"github.com/sluicefs/sluice/internal/meta"
	"github.com/sluicefs/sluice/internal/meta/engine/all"
	"github.com/sluicefs/sluice/internal/meta/remote"
	"github.com/sluicefs/sluice/internal/meta/store"
	"github.com/sluicefs/sluice/internal/meta/store/kvstore"
	"github.com/sluicefs/sluice/internal/meta/subtree"
	"github.com/sluicefs/sluice/internal/object"
	objall "github.com/sluicefs/sluice/internal/object/all"
	"github.com/sluicefs/sluice/internal/object/compress"
	"github.com/sluicefs/sluice/internal/object/encrypt"
	"github.com/sluicefs/sluice/internal/object/limit"
	"github.com/sluicefs/sluice/internal/object/metrics"
	"github.com/sluicefs/sluice/internal/object/prefix"
	"github.com/sluicefs/sluice/internal/object/retry"
	"github.com/sluicefs/sluice/internal/telemetry"
	"github.com/sluicefs/sluice/internal/vfs"
)

// Volume is an opened volume: the layers Open assembled up to its Level.
// Its methods return nil for the layers of higher levels.
type Volume struct {
	level   Level
	st      store.Store
	raw     store.Store // st as the engine opened it, unwrapped
	format  *meta.Format
	objects object.Store
	sealed  object.Store
	metrics *metrics.Store
	limits  *limit.Store // bandwidth limits, which follow the volume's settings
	chunks  *chunk.Store
	client  *meta.Session
	remote  *remote.Client // the session's operations on the metadata server, when they run there
	fs      *vfs.VFS
	// group is the cache group the mount is a member of, serving its
	// peers on groupListener; nil when none.
	group         *cachegroup.Group
	groupListener net.Listener

	telemetry *telemetry.Mount // Level FileSystem
	usageMu   sync.Mutex
	usageAt   time.Time
	usageLast usageFigures
}

// Open opens the volume whose metadata lives at metaURL, up to
// opts.Level. On error it releases whatever it had opened.
func Open(ctx context.Context, metaURL string, opts Options) (v *Volume, err error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	v = &Volume{level: opts.Level}
	defer func() {
		if err != nil {
			v.Close(context.WithoutCancel(ctx))
			v = nil
		}
	}()
	if err := v.openMeta(ctx, metaURL, opts.OpenTimeout); err != nil {
		return v, err
	}
	if opts.Level >= FileSystem {
		v.telemetry = telemetry.New()
		v.st = v.telemetry.WrapStore(v.st)
	}
	v.st = meta.Bound(v.st, opts.TxTimeout)
	if opts.Level < Data {
		return v, nil
	}
	if v.objects, v.sealed, v.metrics, v.limits, err = openObjects(v.format, &opts); err != nil {
		return v, err
	}
	if opts.Level < Client {
		return v, nil
	}
	if v.chunks, err = chunk.Open(v.objects, chunkConfig(v.format, &opts)); err != nil {
		return v, err
	}
	mconf := opts.Meta
	mconf.DeleteSlice = v.chunks.Delete
	mconf.RestoreSlice = v.chunks.RestoreSlice
	if mconf.SessionInfo.Host == "" {
		mconf.SessionInfo.Host, _ = os.Hostname()
	}
	if mconf.Logger == nil {
		mconf.Logger = opts.logger()
	}
	// The client reloads the settings every heartbeat; the bandwidth
	// limits follow the volume's (`sluice config`) unless the options
	// set their own.
	objects, onChange := opts.Objects, mconf.OnFormatChange
	mconf.OnFormatChange = func(f *meta.Format) {
		v.limits.SetRate(bandwidth(f, &objects))
		if onChange != nil {
			onChange(f)
		}
	}
	if err := v.openCacheGroup(&opts, &mconf); err != nil {
		return v, err
	}
	if v.client, err = meta.NewSession(ctx, v.st, mconf); err != nil {
		return v, err
	}
	v.startCacheGroup(ctx)
	if !mconf.ReadOnly {
		v.chunks.TrackSyncs(v.client.Synced)
	}
	if opts.Level < FileSystem {
		return v, nil
	}
	var fsMeta vfs.Meta = v.client
	if db := serverOps(v.raw); db != nil && !mconf.ReadOnly {
		// The metadata server runs the session's operations itself.
		ro := remote.Options{AtimeMode: mconf.AtimeMode, DirAttrReuse: mconf.DirAttrReuse}
		if v.telemetry != nil {
			ro.Observe = v.telemetry.MetaCall
		}
		if v.remote, err = remote.New(ctx, db, v.client, ro); err != nil {
			return v, err
		}
		fsMeta = v.remote
	}
	if opts.Subdir != "" {
		root, err := subdirIno(ctx, v.client, opts.Subdir)
		if err != nil {
			return v, err
		}
		fsMeta = subtree.New(fsMeta, root)
	}
	vc := vfsConfig(v.chunks, v.client, &opts)
	vc.Stats = v.telemetry.WriteText
	tools := addToolControls(&vc, v.chunks, v.client) // info, summary, warmup, rmr (controls.go)
	v.fs = vfs.New(fsMeta, v.chunks, vc)
	tools.fs.Store(v.fs)
	if err := v.registerMetrics(); err != nil {
		return v, fmt.Errorf("register metrics: %w", err)
	}
	return v, nil
}

// subdirIno returns the inode of the directory dir, a path from the
// volume's root, looked up as root.
func subdirIno(ctx context.Context, mc *meta.Session, dir string) (meta.Ino, error) {
	ctx = meta.WithCred(ctx, meta.Cred{})
	ino := meta.RootIno
	for _, name := range strings.Split(path.Clean("/"+dir), "/") {
		if name == "" {
			continue
		}
		a, err := mc.Lookup(ctx, ino, []byte(name))
		if err != nil {
			return 0, fmt.Errorf("subdir %s: %w", dir, err)
		}
		if a.Type != store.TypeDir {
			return 0, fmt.Errorf("subdir %s: %s is not a directory: %w", dir, name, syscall.ENOTDIR)
		}
		ino = a.Ino
	}
	return ino, nil
}

// openMeta opens the metadata engine and reads the volume's settings,
// within timeout when it is above 0.
func (v *Volume) openMeta(ctx context.Context, metaURL string, timeout time.Duration) (err error) {
	octx := ctx
	if timeout > 0 {
		var cancel context.CancelFunc
		octx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
		defer func() {
			if err != nil && octx.Err() != nil && ctx.Err() == nil {
				err = fmt.Errorf("%w (the metadata engine did not answer within %v)", err, timeout)
			}
		}()
	}
	if v.st, err = all.Open(octx, metaURL, false); err != nil {
		return err
	}
	v.raw = v.st
	v.format, err = meta.Load(octx, v.st)
	return err
}

// serverOps returns the connection to the metadata server of st when a
// mount's operations should run on the server (the engine's database
// offers remote.Server and the volume's URL asks for it), nil otherwise.
func serverOps(st store.Store) remote.Server {
	var kv *kvstore.Store
	switch s := st.(type) {
	case *kvstore.Store:
		kv = s
	case *kvstore.BulkStore:
		kv = s.Store
	default:
		return nil
	}
	if srv, ok := kv.DB().(remote.Server); ok && srv.ServerOps() {
		return srv
	}
	return nil
}

// chunkConfig returns opts.Chunks with the fields the volume decides.
func chunkConfig(f *meta.Format, opts *Options) chunk.Config {
	c := opts.Chunks
	c.BlockSize = f.BlockSize << 10
	c.HashPrefix = f.HashPrefix
	c.VolumeUUID = f.UUID
	c.RangedReads = plainBlocks(f)
	c.CachePartialOnly = c.CachePartialOnly || localStorage(f.Storage)
	c.FetchToMemory = localStorage(f.Storage) && c.RangedReads
	c.PrefetchCold = c.FetchToMemory
	if c.Logger == nil {
		c.Logger = opts.logger()
	}
	return c
}

// vfsConfig returns opts.VFS with the flush control and the compactor.
func vfsConfig(cs *chunk.Store, mc *meta.Session, opts *Options) vfs.Config {
	c := opts.VFS
	if c.Logger == nil {
		c.Logger = opts.logger()
	}
	controls := map[string]vfs.Control{
		"flush": func(ctx context.Context, _ control.Request, _ func(any)) (any, error) {
			if !meta.CredOf(ctx).IsRoot() {
				return nil, syscall.EPERM
			}
			return struct{}{}, cs.FlushStaged(ctx)
		},
	}
	for name, fn := range c.Controls {
		controls[name] = fn
	}
	c.Controls = controls
	if !opts.Meta.ReadOnly && c.Compactor == nil {
		c.Compactor = compact.New(mc, cs, compact.Config{Logger: c.Logger})
	}
	return c
}

// plainBlocks reports whether the volume stores blocks as they are, so
// that a block's stored size is its length and a range of it can be read
// alone.
func plainBlocks(f *meta.Format) bool {
	return (f.Compression == "" || f.Compression == "none") && f.EncryptKey == ""
}

// localStorage reports whether a storage keeps its objects on this host.
func localStorage(storage string) bool { return storage == "file" || storage == "mem" }

// Level returns how much of the volume is open.
func (v *Volume) Level() Level { return v.level }

// Store returns the metadata engine.
func (v *Volume) Store() store.Store { return v.st }

// Format returns the volume's settings, as read when the volume was
// opened. The caller must not modify them.
func (v *Volume) Format() *meta.Format { return v.format }

// Objects returns the object storage of the volume's blocks: keys are
// relative to the volume ("chunks/..."), and blocks are compressed and
// encrypted as the volume says. Nil below Level Data.
func (v *Volume) Objects() object.Store { return v.objects }

// SealedObjects returns the volume's object storage for objects that are
// not blocks, such as the metadata backups under "meta/": keys are
// relative to the volume, and objects are encrypted as blocks are when the
// volume has a key, but never compressed with the volume's compression,
// and not limited in size by it. This is how JuiceFS lays out its own
// "meta/" objects (its compression applies to blocks only), so either
// system reads the other's. Retries apply as in Objects; bandwidth limits
// and metrics do not. Nil below Level Data.
func (v *Volume) SealedObjects() object.Store { return v.sealed }

// Metrics returns the request metrics of Objects, for serving. Nil below
// Level Data.
func (v *Volume) Metrics() *metrics.Store { return v.metrics }

// PlainBlocks reports whether blocks are stored as they are (neither
// compressed nor encrypted): then a block's stored size is its length.
func (v *Volume) PlainBlocks() bool { return plainBlocks(v.format) }

// Chunks returns the chunk store. Nil below Level Client.
func (v *Volume) Chunks() *chunk.Store { return v.chunks }

// Client returns the metadata client. Nil below Level Client.
func (v *Volume) Client() *meta.Session { return v.client }

// VFS returns the file system. Nil below Level FileSystem.
func (v *Volume) VFS() *vfs.VFS { return v.fs }

// Close releases what Open opened, from the top: it flushes the VFS's
// open files, ends the client's session, stops the chunk store's
// background uploads (staged blocks stay staged for the next run) and
// closes the metadata engine. ctx bounds the flushes and waits. It
// returns every error, joined; a Volume must not be used after Close.
func (v *Volume) Close(ctx context.Context) error {
	var errs []error
	if v.fs != nil {
		if err := v.fs.Close(ctx); err != nil {
			errs = append(errs, fmt.Errorf("close file system: %w", err))
		}
	}
	if v.chunks != nil {
		// Before the session ends: it must end with every block synced.
		if err := v.chunks.StopSyncs(ctx); err != nil {
			errs = append(errs, fmt.Errorf("sync stored blocks: %w", err))
		}
	}
	if v.group != nil {
		v.group.Close() // nothing it serves or fetches can fail the volume
	} else if v.groupListener != nil {
		v.groupListener.Close()
	}
	if v.remote != nil {
		if err := v.remote.Close(ctx); err != nil {
			errs = append(errs, fmt.Errorf("close metadata server session: %w", err))
		}
	}
	if v.client != nil {
		if err := v.client.Close(ctx); err != nil {
			errs = append(errs, fmt.Errorf("close metadata client: %w", err))
		}
	}
	if v.chunks != nil {
		if err := v.chunks.Close(ctx); err != nil {
			errs = append(errs, fmt.Errorf("close chunk store: %w", err))
		}
	}
	if v.st != nil {
		if err := v.st.Close(); err != nil {
			errs = append(errs, fmt.Errorf("close metadata engine: %w", err))
		}
	}
	v.fs, v.remote, v.client, v.chunks, v.st, v.group = nil, nil, nil, nil, nil, nil
	return errors.Join(errs...)
}

// openObjects builds the object storage stack from the bucket out: the
// WrapBucket hook, the volume's layout, metrics, limits and retries. It
// also returns the stack of objects that are not blocks (see
// Volume.SealedObjects): the layout without compression, with retries.
func openObjects(f *meta.Format, opts *Options) (blocks, sealed object.Store, _ *metrics.Store, _ *limit.Store, err error) {
	bucket, err := openBucket(f, opts)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	if opts.WrapBucket != nil {
		if bucket, err = opts.WrapBucket(bucket); err != nil {
			return nil, nil, nil, nil, fmt.Errorf("object storage: %w", err)
		}
	}
	enc, err := sealedLayout(bucket, f, opts.Passphrase)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	s, err := compress.New(enc, f.Compression)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	m := metrics.New(s)
	o := opts.Objects
	upload, download := bandwidth(f, &o)
	l, err := limit.New(m, limit.Config{MaxDownloads: o.MaxDownloads, UploadLimit: upload, DownloadLimit: download})
	if err != nil {
		return nil, nil, nil, nil, err
	}
	log := opts.logger()
	conf := retry.Config{
		Timeout:    o.PutTimeout,
		GetTimeout: o.GetTimeout,
		OnRetry: func(op, key string, attempt int, err error, wait time.Duration) {
			log.Warn("object storage: retrying", "op", op, "key", key, "attempt", attempt, "err", err, "wait", wait)
		}}
	if blocks, err = retry.New(l, conf); err != nil {
		return nil, nil, nil, nil, err
	}
	if sealed, err = retry.New(enc, conf); err != nil {
		return nil, nil, nil, nil, err
	}
	return blocks, sealed, m, l, nil
}

// bandwidth returns the upload and download limits of the object
// storage stack in bytes per second: each the options' when set, else the
// volume's (Mbps in its settings), else 0 (unlimited).
func bandwidth(f *meta.Format, o *ObjectOptions) (upload, download int64) {
	upload, download = o.UploadLimit, o.DownloadLimit
	if upload == 0 {
		upload = f.UploadLimit * 1e6 / 8 // Mbps to bytes per second
	}
	if download == 0 {
		download = f.DownloadLimit * 1e6 / 8
	}
	return upload, download
}

// openBucket opens the volume's raw bucket with the stored credentials,
// each replaced by the one in opts when that is set.
func openBucket(f *meta.Format, opts *Options) (object.Store, error) {
	keys := objall.Options{AccessKey: f.AccessKey, SecretKey: f.SecretKey, SessionToken: f.SessionToken}
	for _, k := range []struct {
		dst *string
		src string
	}{
		{&keys.AccessKey, opts.AccessKey}, {&keys.SecretKey, opts.SecretKey}, {&keys.SessionToken, opts.SessionToken},
	} {
		if k.src != "" {
			*k.dst = k.src
		}
	}
	s, err := objall.Open(f.Storage, f.Bucket, keys)
	if err != nil {
		return nil, fmt.Errorf("object storage: %w", err)
	}
	return s, nil
}

// sealedLayout wraps a bucket the way the volume's objects are laid out
// in it, before the compression of blocks (which openObjects adds on top):
// every key under "NAME/", encrypted when the volume has a key (unlocked
// with passphrase when it is protected by one).
func sealedLayout(bucket object.Store, f *meta.Format, passphrase string) (object.Store, error) {
	s := prefix.New(bucket, f.Name+"/")
	if f.EncryptKey == "" {
		return s, nil
	}
	key, err := encrypt.ParsePrivateKey([]byte(f.EncryptKey), []byte(passphrase))
	if err != nil {
		if f.KeyEncrypted && passphrase == "" {
			return nil, fmt.Errorf("the volume's encryption key is protected by a passphrase: set %s (or %s)", encrypt.PassphraseEnv, encrypt.PassphraseEnvJuiceFS)
		}
		return nil, fmt.Errorf("the volume's encryption key: %w", err)
	}
	enc, err := encrypt.New(s, key, f.EncryptAlgo)
	if err != nil {
		return nil, err
	}
	return enc, nil
}
