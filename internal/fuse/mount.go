package fuse

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"syscall"

	gofuse "github.com/hanwen/go-fuse/v2/fuse"

	"github.com/sluicefs/sluice/internal/meta"
	"github.com/sluicefs/sluice/internal/mountinfo"
	"github.com/sluicefs/sluice/internal/telemetry"
	"github.com/sluicefs/sluice/internal/vfs"
)

// Options tune a mount.
type Options struct {
	// FsName is shown as the mount's source in /proc/mounts.
	FsName string
	// ReadOnly mounts read-only.
	ReadOnly bool
	// Debug logs every FUSE request.
	Debug bool
	// AllowOther lets users other than the mounting one use the mount;
	// it defaults to on when mounting as root.
	AllowOther bool
	// ACL turns on POSIX ACLs: the kernel caches them and checks
	// permissions with them too, and leaves the umask to Sluice so that
	// default ACLs can replace it.
	ACL bool
	// NoXattr answers every extended-attribute request (get, set, list,
	// remove) ENOSYS, so that the kernel stops sending them after the
	// first of each: tools see EOPNOTSUPP, and a new file's first write
	// is spared the kernel's security.capability lookup. JuiceFS mounts
	// this way unless given --enable-xattr. Not with ACL, which are
	// extended attributes.
	NoXattr bool
	// KernelReadahead is the kernel's readahead for files of the mount,
	// in bytes (0 keeps the kernel's default, 128 KiB). Setting it needs
	// root; failing to is logged, not fatal.
	KernelReadahead int
	// Metrics, when set, receives the latency of every request.
	Metrics *telemetry.Mount
}

// Server is a running mount.
type Server struct {
	srv        *gofuse.Server
	MountPoint string
}

// Mount mounts v at mountPoint and serves requests in the background. It
// returns once the kernel has the mount. As root it mounts directly,
// without the fusermount helper; otherwise it needs fusermount3.
func Mount(v *vfs.VFS, mountPoint string, opts Options, log *slog.Logger) (*Server, error) {
	if opts.NoXattr && opts.ACL {
		return nil, fmt.Errorf("mount %s: POSIX ACLs are extended attributes: they cannot be served with extended attributes off", mountPoint)
	}
	fs := newFileSystem(v, log)
	mo := &gofuse.MountOptions{
		FsName:               opts.FsName,
		Name:                 "sluice",
		AllowOther:           opts.AllowOther || os.Geteuid() == 0,
		MaxWrite:             1 << 20,
		MaxReadAhead:         1 << 20,
		MaxBackground:        64,
		DirectMount:          true,
		Debug:                opts.Debug,
		EnableSymlinkCaching: true,
		// Locks are kept in the metadata engine so they hold across
		// mounts; a read-only mount cannot record them and leaves them
		// to the kernel.
		EnableLocks: !opts.ReadOnly,
		EnableAcl:   opts.ACL,
		// go-fuse answers them itself (LISTXATTR too).
		DisableXAttrs: opts.NoXattr,
	}
	if opts.ACL {
		mo.ExtraCapabilities |= gofuse.CAP_DONT_MASK
	}
	// Sluice drops setuid and setgid itself on writes, truncations and
	// chown (the kernel flags which ones; see fileSystem.Write), so the
	// kernel need not ask for security.capability before every write,
	// nor fetch the attributes again before every chown.
	mo.ExtraCapabilities |= gofuse.CAP_HANDLE_KILLPRIV_V2
	// File handles (name_to_handle_at, open_by_handle_at, NFS re-export)
	// outlive the kernel's inode: to decode one it no longer caches, the
	// kernel asks the file system with a LOOKUP of "." on the handle's
	// node id, and connects a directory to the tree with LOOKUPs of "..",
	// but only when this is set (see fileSystem.Lookup). Without it every
	// such handle is ESTALE.
	mo.ExtraCapabilities |= gofuse.CAP_EXPORT_SUPPORT
	// The kernel checks permissions itself against the attributes it
	// caches (refreshing them before it denies): otherwise it would not
	// check search permission on path components it finds in its dentry
	// cache, nor the mode of a FIFO, which it opens without asking.
	// Sluice still checks every request it receives. (A mount with ACLs
	// has this on anyway: FUSE_POSIX_ACL implies it.)
	mo.Options = append(mo.Options, "default_permissions")
	if opts.ReadOnly {
		mo.Options = append(mo.Options, "ro")
	}
	srv, err := gofuse.NewServer(observe(fs, opts.Metrics, v.AccessLog()), mountPoint, mo)
	if err != nil {
		return nil, fmt.Errorf("mount %s: %w", mountPoint, err)
	}
	go srv.Serve()
	// NewServer returns once the kernel has the mount, so
	// srv.WaitMount is not called: on Linux all it adds is go-fuse's
	// poll probe, which opens a file on this very mount from this
	// process. A process killed (kill -9, the OOM killer) while that
	// file is open flushes it on exit to its own mount, whose serving
	// threads are gone, and hangs unkillable, the mount with it, until
	// the connection is aborted by hand. The kernel learns that Sluice
	// has no poll from the first POLL request instead, which go-fuse
	// answers with ENOSYS.
	v.SetKernel(kernelCache{srv})
	if opts.KernelReadahead > 0 {
		if err := setKernelReadahead(mountPoint, opts.KernelReadahead); err != nil {
			log.Warn("cannot raise the kernel's readahead; sequential reads will be slower", "err", err)
		}
	}
	return &Server{srv: srv, MountPoint: mountPoint}, nil
}

// setKernelReadahead sets the readahead of the mount's backing device
// info, which FUSE caps at 128 KiB at mount time, through sysfs. It finds
// the mount's device number in the mount table, not by stat: a request
// from this process to its own mount hangs it for good if it is killed
// while the request is being served.
func setKernelReadahead(mountPoint string, bytes int) error {
	abs, err := filepath.Abs(mountPoint)
	if err != nil {
		return fmt.Errorf("mount point %s: %w", mountPoint, err)
	}
	m, ok := mountinfo.At(abs)
	if !ok {
		return fmt.Errorf("%s is not in the mount table", abs)
	}
	path := fmt.Sprintf("/sys/class/bdi/%s/read_ahead_kb", m.Dev)
	if err := os.WriteFile(path, []byte(strconv.Itoa(bytes>>10)), 0); err != nil {
		return fmt.Errorf("set readahead: %w", err)
	}
	return nil
}

// Unmount asks the kernel to unmount; it fails while the mount is busy.
func (s *Server) Unmount() error { return s.srv.Unmount() }

// Wait blocks until the mount is gone (unmounted by anyone).
func (s *Server) Wait() { s.srv.Wait() }

// kernelCache is the kernel's cache of a mount, reached through FUSE
// notifications.
type kernelCache struct{ srv *gofuse.Server }

var _ vfs.Kernel = kernelCache{}

func (k kernelCache) InvalidateInode(ino meta.Ino, data bool) error {
	off := int64(-1) // attributes only
	if data {
		off = 0 // and every page
	}
	return notifyErr(k.srv.InodeNotify(uint64(ino), off, 0))
}

func (k kernelCache) InvalidateEntry(parent meta.Ino, name []byte) error {
	return notifyErr(k.srv.EntryNotify(uint64(parent), string(name)))
}

// notifyErr turns a notification's status into an error; ENOENT means
// the kernel did not hold what was invalidated.
func notifyErr(st gofuse.Status) error {
	if st == gofuse.OK {
		return nil
	}
	return fmt.Errorf("fuse notification: %w", syscall.Errno(st))
}
