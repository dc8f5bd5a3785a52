// Command nullfs mounts a FUSE file system that keeps its tree in memory
// and does no other work, with the go-fuse options and cache timeouts a
// Sluice mount uses. Whatever a workload achieves on it is the ceiling of
// the FUSE transport on the machine: compare a Sluice mount's figures
// with it to see how much of an operation is the file system's own.
//
//	go build -o /tmp/nullfs ./bench/nullfs
//	/tmp/nullfs /mnt/null &
//	python3 bench/createstat.py /mnt/null/d 10000 1.5
//	umount /mnt/null
//
// Files keep their data in memory (go-fuse's MemRegularFile); unlink and
// rmdir drop the name and nothing else, and rmdir does not check that the
// directory is empty. Its inodes outlive the kernel's (persistent inodes),
// so the tree is still there after the kernel's caches are dropped, and
// workloads that drop them between phases (fs-meta.py) measure the
// ceiling of each phase. It is a measuring device, not a file system to
// keep anything in.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// dir is a directory whose children exist only as go-fuse inodes.
type dir struct{ fs.Inode }

var (
	_ fs.NodeCreater  = (*dir)(nil)
	_ fs.NodeMkdirer  = (*dir)(nil)
	_ fs.NodeUnlinker = (*dir)(nil)
	_ fs.NodeRmdirer  = (*dir)(nil)
)

func (d *dir) Create(ctx context.Context, name string, flags, mode uint32, out *fuse.EntryOut) (*fs.Inode, fs.FileHandle, uint32, syscall.Errno) {
	ch := d.NewPersistentInode(ctx, &fs.MemRegularFile{Attr: fuse.Attr{Mode: mode}}, fs.StableAttr{Mode: syscall.S_IFREG})
	d.AddChild(name, ch, true)
	out.Mode = syscall.S_IFREG | mode
	return ch, nil, fuse.FOPEN_KEEP_CACHE, 0
}

func (d *dir) Mkdir(ctx context.Context, name string, mode uint32, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	ch := d.NewPersistentInode(ctx, &dir{}, fs.StableAttr{Mode: syscall.S_IFDIR})
	d.AddChild(name, ch, true)
	out.Mode = syscall.S_IFDIR | mode
	return ch, 0
}

func (d *dir) Unlink(ctx context.Context, name string) syscall.Errno { return 0 }

func (d *dir) Rmdir(ctx context.Context, name string) syscall.Errno { return 0 }

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: nullfs MOUNTPOINT")
		os.Exit(2)
	}
	timeout := time.Second // Sluice's default entry and attribute timeouts
	srv, err := fs.Mount(os.Args[1], &dir{}, &fs.Options{
		EntryTimeout: &timeout,
		AttrTimeout:  &timeout,
		MountOptions: fuse.MountOptions{
			FsName:        "nullfs",
			DirectMount:   true,
			MaxWrite:      1 << 20,
			MaxBackground: 64,
			EnableLocks:   true,
			AllowOther:    os.Geteuid() == 0,
			// As a Sluice mount: the kernel checks permissions against
			// the attributes it caches, refreshing a directory's after
			// every change of its entries (one GETATTR per create).
			Options: []string{"default_permissions"},
		},
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "nullfs:", err)
		os.Exit(1)
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	go func() {
		<-sig
		srv.Unmount()
	}()
	srv.Wait()
}
