// Package vfstest is a behaviour suite for package vfs that needs no
// kernel: it calls a VFS the way an access path does (the FUSE binding,
// and later the S3 gateway and the SDKs) and checks what applications
// would see — open, read and write, handles, renames, POSIX and BSD
// locks with their owners, directory streams, and the errno of each
// failure.
//
// Run takes a constructor, so the same suite runs over any configuration
// of a VFS; New builds one over a freshly formatted volume on the
// in-memory metadata engine (or another store.Store) and the in-memory
// object store:
//
//	func TestVFS(t *testing.T) {
//		vfstest.Run(t, func(t *testing.T) *vfs.VFS { return vfstest.New(t, vfstest.Options{}) })
//	}
//
// The suite follows the kernel's side of the contract where it matters:
// an Open refused with ESTALE (see vfs.VFS.Open) is retried once, as
// Linux does after looking the path up again.
package vfstest

import (
	"context"
	"errors"
	"syscall"
	"testing"

	"github.com/sluicefs/sluice/internal/chunk"
	"github.com/sluicefs/sluice/internal/meta"
	"github.com/sluicefs/sluice/internal/meta/engine/mem"
	"github.com/sluicefs/sluice/internal/meta/store"
	"github.com/sluicefs/sluice/internal/meta/store/kvstore"
	"github.com/sluicefs/sluice/internal/object"
	objmem "github.com/sluicefs/sluice/internal/object/mem"
	"github.com/sluicefs/sluice/internal/vfs"
)

// BlockSize is the block size of the volumes New formats: small, so that
// modest files span several blocks.
const BlockSize = 64 << 10

// Options configure the VFS New builds.
type Options struct {
	// Store opens the metadata store of the volume; nil uses a fresh
	// in-memory engine.
	Store func(t *testing.T) store.Store
	// Meta configures the metadata client.
	Meta meta.Config
	// Object, when set, wraps the in-memory object store (to hold or
	// fail requests).
	Object func(object.Store) object.Store
	// Chunk configures the chunk store; BlockSize is always BlockSize.
	Chunk chunk.Config
	// VFS configures the VFS.
	VFS vfs.Config
	// OnClient, when set, returns the Meta the VFS runs on, given the
	// volume's client (the client of the metadata server that sends the
	// session's operations whole, for one); a Meta with a Close(ctx)
	// method is closed after the VFS and before the client.
	OnClient func(t *testing.T, c *meta.Session) vfs.Meta
}

// New formats a volume and returns a VFS over it, closed when the test
// ends (its buffered writes are committed then, and must commit).
func New(t *testing.T, o Options) *vfs.VFS {
	t.Helper()
	ctx := context.Background()
	var st store.Store
	if o.Store != nil {
		st = o.Store(t)
	} else {
		st = kvstore.New(mem.New(t.Name()))
	}
	f := &meta.Format{Name: "vfstest", UUID: "vfstest-uuid", Storage: "mem", Bucket: "b",
		BlockSize: BlockSize >> 10, TrashDays: 0}
	if _, err := meta.FormatVolume(ctx, st, f); err != nil {
		t.Fatalf("format: %v", err)
	}
	cc := o.Chunk
	cc.BlockSize = BlockSize
	if len(cc.CacheDirs) > 0 && cc.VolumeUUID == "" {
		cc.VolumeUUID = f.UUID
	}
	var obj object.Store = objmem.New("vfstest")
	if o.Object != nil {
		obj = o.Object(obj)
	}
	s, err := chunk.Open(obj, cc)
	if err != nil {
		t.Fatalf("open chunk store: %v", err)
	}
	mc := o.Meta
	if mc.RestoreSlice == nil {
		mc.RestoreSlice = s.RestoreSlice
	}
	c, err := meta.NewSession(ctx, st, mc)
	if err != nil {
		t.Fatalf("new meta client: %v", err)
	}
	s.TrackSyncs(c.Synced)
	var m vfs.Meta = c
	if o.OnClient != nil {
		m = o.OnClient(t, c)
	}
	v := vfs.New(m, s, o.VFS)
	t.Cleanup(func() {
		if err := v.Close(ctx); err != nil {
			t.Errorf("close vfs: %v", err)
		}
		if err := s.StopSyncs(ctx); err != nil {
			t.Errorf("sync stored blocks: %v", err)
		}
		if cl, ok := m.(interface{ Close(context.Context) error }); ok && m != vfs.Meta(c) {
			if err := cl.Close(ctx); err != nil {
				t.Errorf("close meta: %v", err)
			}
		}
		if err := c.Close(ctx); err != nil {
			t.Errorf("close meta client: %v", err)
		}
		if err := s.Close(ctx); err != nil {
			t.Errorf("close chunk store: %v", err)
		}
	})
	return v
}

// Run runs the suite; newVFS returns a VFS over a fresh, empty volume
// for each test.
func Run(t *testing.T, newVFS func(t *testing.T) *vfs.VFS) {
	groups := []struct {
		name  string
		tests []test
	}{
		{"Files", fileTests},
		{"Handles", handleTests},
		{"Tmpfile", tmpfileTests},
		{"Names", nameTests},
		{"Errors", errorTests},
		{"Locks", lockTests},
		{"ReadDir", readDirTests},
		{"Interrupts", interruptTests},
		{"Internal", internalTests},
	}
	for _, g := range groups {
		t.Run(g.name, func(t *testing.T) {
			for _, tc := range g.tests {
				t.Run(tc.name, func(t *testing.T) {
					tc.fn(t, &fsys{t: t, v: newVFS(t)})
				})
			}
		})
	}
}

// test is one case of the suite.
type test struct {
	name string
	fn   func(t *testing.T, fs *fsys)
}

// Callers: root (pid 100) and two unprivileged users.
const (
	rootPid = 100
	uidA    = 1000
	uidB    = 1001
)

// asRoot is the context of a root process.
func asRoot() context.Context {
	return meta.WithCred(context.Background(), meta.Cred{Pid: rootPid})
}

// asUser is the context of a process of user uid (its group is uid too).
func asUser(uid uint32) context.Context {
	return meta.WithCred(context.Background(), meta.Cred{Uid: uid, Gid: uid, Pid: uid})
}

// fsys is the VFS under test with helpers that fail the test on errors.
type fsys struct {
	t *testing.T
	v *vfs.VFS
}

// mkdir makes directory name in parent as root.
func (fs *fsys) mkdir(parent meta.Ino, name string, mode uint16) meta.Ino {
	fs.t.Helper()
	a, err := fs.v.Mknod(asRoot(), parent, []byte(name), meta.NewNode{Type: store.TypeDir, Mode: mode})
	if err != nil {
		fs.t.Fatalf("mkdir %s: %v", name, err)
	}
	return a.Ino
}

// create makes file name in parent as root with the given content and
// mode, and closes it.
func (fs *fsys) create(parent meta.Ino, name string, mode uint16, data []byte) meta.Ino {
	fs.t.Helper()
	ctx := asRoot()
	a, fh, err := fs.v.Create(ctx, parent, []byte(name), mode, 0, syscall.O_RDWR|syscall.O_CREAT|syscall.O_EXCL)
	if err != nil {
		fs.t.Fatalf("create %s: %v", name, err)
	}
	if len(data) > 0 {
		if err := fs.v.Write(ctx, fh, 0, data); err != nil {
			fs.t.Fatalf("write %s: %v", name, err)
		}
	}
	fs.close(fh)
	return a.Ino
}

// openAs opens ino the way the kernel does: an ESTALE refusal is retried
// once.
func (fs *fsys) openAs(ctx context.Context, ino meta.Ino, flags uint32) (uint64, error) {
	_, fh, err := fs.v.Open(ctx, ino, flags)
	if errors.Is(err, syscall.ESTALE) {
		_, fh, err = fs.v.Open(ctx, ino, flags)
	}
	return fh, err
}

// open opens ino as root.
func (fs *fsys) open(ino meta.Ino, flags uint32) uint64 {
	fs.t.Helper()
	fh, err := fs.openAs(asRoot(), ino, flags)
	if err != nil {
		fs.t.Fatalf("open %d: %v", ino, err)
	}
	return fh
}

// close flushes and releases fh, as the last close(2) of a descriptor.
func (fs *fsys) close(fh uint64) {
	fs.t.Helper()
	if err := fs.v.Flush(asRoot(), fh, 0); err != nil {
		fs.t.Fatalf("flush %d: %v", fh, err)
	}
	if err := fs.v.Release(asRoot(), fh, 0); err != nil {
		fs.t.Fatalf("release %d: %v", fh, err)
	}
}

// write writes data at off through fh.
func (fs *fsys) write(fh uint64, off uint64, data []byte) {
	fs.t.Helper()
	if err := fs.v.Write(asRoot(), fh, off, data); err != nil {
		fs.t.Fatalf("write %d bytes at %d: %v", len(data), off, err)
	}
}

// read reads up to n bytes at off through fh.
func (fs *fsys) read(fh uint64, off uint64, n int) []byte {
	fs.t.Helper()
	p := make([]byte, n)
	got, err := fs.v.Read(asRoot(), fh, off, p)
	if err != nil {
		fs.t.Fatalf("read %d bytes at %d: %v", n, off, err)
	}
	return p[:got]
}

// readAll reads fh from offset 0 to the end, in pieces of at most 1 MiB,
// as a reader that stops at the first short read does.
func (fs *fsys) readAll(fh uint64) []byte {
	fs.t.Helper()
	var out []byte
	for {
		p := fs.read(fh, uint64(len(out)), 1<<20)
		out = append(out, p...)
		if len(p) < 1<<20 {
			return out
		}
	}
}

// content opens ino read-only, reads it whole and closes it.
func (fs *fsys) content(ino meta.Ino) []byte {
	fs.t.Helper()
	fh := fs.open(ino, syscall.O_RDONLY)
	defer fs.close(fh)
	return fs.readAll(fh)
}

// lookup looks name up in parent as root.
func (fs *fsys) lookup(parent meta.Ino, name string) *meta.Attr {
	fs.t.Helper()
	a, err := fs.v.Lookup(asRoot(), parent, []byte(name))
	if err != nil {
		fs.t.Fatalf("lookup %s: %v", name, err)
	}
	return a
}

// wantErrno checks that err carries errno want.
func wantErrno(t *testing.T, what string, err error, want syscall.Errno) {
	t.Helper()
	if got := meta.Errno(err); got != want {
		t.Errorf("%s: got %v (%v), want %v", what, got, err, want)
	}
}

// pattern returns n bytes that differ with seed and position, so a
// misplaced block shows.
func pattern(n int, seed byte) []byte {
	p := make([]byte, n)
	for i := range p {
		p[i] = byte(i/251) ^ byte(i) ^ seed
	}
	return p
}
