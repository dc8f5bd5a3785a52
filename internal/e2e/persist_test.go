package e2e

import (
	"crypto/sha256"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"testing"

	"golang.org/x/sys/unix"
)

// entryState is what an application can observe of one path.
type entryState struct {
	Mode, Uid, Gid, Nlink uint32
	Size                  int64
	Ino                   uint64
	Atime, Mtime          unix.Timespec
	Rdev                  uint64
	Target                string
	Sum                   string
	Xattrs                map[string]string
}

// mountFiles are the internal files every mount shows at its root.
var mountFiles = map[string]bool{".accesslog": true, ".stats": true, ".config": true, ".control": true}

// snapshot walks root and records every entry but the mount's internal
// files.
func snapshot(t *testing.T, root string) map[string]entryState {
	t.Helper()
	out := map[string]entryState{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		if filepath.Dir(p) == root && mountFiles[d.Name()] {
			return nil // each mount's own, not the volume's
		}
		var st unix.Stat_t
		if err := unix.Lstat(p, &st); err != nil {
			return err
		}
		e := entryState{Mode: st.Mode, Uid: st.Uid, Gid: st.Gid, Nlink: uint32(st.Nlink), Size: st.Size, Ino: st.Ino,
			Atime: st.Atim, Mtime: st.Mtim, Rdev: st.Rdev}
		switch st.Mode & unix.S_IFMT {
		case unix.S_IFLNK:
			e.Target, _ = os.Readlink(p)
		case unix.S_IFREG:
			e.Sum = fileSum(t, p)
		}
		if st.Mode&unix.S_IFMT == unix.S_IFREG || st.Mode&unix.S_IFMT == unix.S_IFDIR {
			e.Xattrs = xattrs(t, p)
		}
		out[rel] = e
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func fileSum(t *testing.T, p string) string {
	t.Helper()
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		t.Fatalf("read %s: %v", p, err)
	}
	return fmt.Sprintf("%x", h.Sum(nil))
}

func xattrs(t *testing.T, p string) map[string]string {
	t.Helper()
	buf := make([]byte, 4096)
	n, err := unix.Llistxattr(p, buf)
	if err != nil {
		t.Fatalf("listxattr %s: %v", p, err)
	}
	out := map[string]string{}
	for _, name := range splitNames(buf[:n]) {
		v := make([]byte, 4096)
		m, err := unix.Lgetxattr(p, name, v)
		if err != nil {
			t.Fatalf("getxattr %s %s: %v", p, name, err)
		}
		out[name] = string(v[:m])
	}
	return out
}

func splitNames(b []byte) []string {
	var out []string
	for len(b) > 0 {
		i := 0
		for i < len(b) && b[i] != 0 {
			i++
		}
		out = append(out, string(b[:i]))
		b = b[min(i+1, len(b)):]
	}
	sort.Strings(out)
	return out
}

// populate makes a tree with every kind of entry, odd modes, owners,
// nanosecond timestamps, hard links across directories and xattrs.
func populate(t *testing.T, root string) {
	t.Helper()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.MkdirAll(filepath.Join(root, "a", "b", "c"), 0o755))
	must(os.Mkdir(filepath.Join(root, "tmp"), 0o755))
	must(os.Chmod(filepath.Join(root, "tmp"), 0o1777))
	must(os.Mkdir(filepath.Join(root, "sgid"), 0o755))
	must(os.Chmod(filepath.Join(root, "sgid"), 0o2775))
	g := newRand(11)
	for i, size := range []int{0, 1, 4095, 4096, 65537, 1 << 20, 5<<20 + 3} {
		must(os.WriteFile(filepath.Join(root, "a", fmt.Sprintf("f%d", i)), g.bytes(size), 0o640))
	}
	p := filepath.Join(root, "a", "b", "suid")
	must(os.WriteFile(p, []byte("#!/bin/sh\n"), 0o755))
	must(os.Chmod(p, 0o4755))
	must(os.Chown(filepath.Join(root, "a", "f1"), 1000, 1001))
	must(os.Link(filepath.Join(root, "a", "f2"), filepath.Join(root, "a", "b", "c", "hard")))
	must(os.Symlink("../f3", filepath.Join(root, "a", "b", "sym")))
	must(os.Symlink("/nonexistent/target", filepath.Join(root, "dangling")))
	must(unix.Mkfifo(filepath.Join(root, "fifo"), 0o600))
	must(unix.Mknod(filepath.Join(root, "null"), unix.S_IFCHR|0o666, int(unix.Mkdev(1, 3))))
	must(unix.Setxattr(filepath.Join(root, "a", "f0"), "user.tag", []byte("blue\x00\xff"), 0))
	must(unix.Setxattr(filepath.Join(root, "a"), "user.dir", []byte("d"), 0))
	for i, name := range []string{"a/f4", "a/b", "fifo"} {
		ts := []unix.Timespec{{Sec: 1000000000 + int64(i), Nsec: 111111111 * int64(i+1)}, {Sec: 1500000000 + int64(i), Nsec: 1 + int64(i)}}
		must(unix.UtimesNanoAt(unix.AT_FDCWD, filepath.Join(root, name), ts, unix.AT_SYMLINK_NOFOLLOW))
	}
}

// TestRemountKeepsEverything writes a tree, unmounts, mounts in a new
// process and checks that every entry, attribute and byte is the same.
func TestRemountKeepsEverything(t *testing.T) {
	for _, engine := range metaEngines {
		t.Run(engine, func(t *testing.T) { remountKeepsEverything(t, newVolumeOn(t, engine)) })
	}
}

func remountKeepsEverything(t *testing.T, v *volume) {
	v.mount(t)
	populate(t, v.mnt)
	before := snapshot(t, v.mnt)
	v.umount(t)
	if mounted(v.mnt) {
		t.Fatal("still mounted after umount")
	}
	v.mount(t)
	after := snapshot(t, v.mnt)
	compareSnapshots(t, before, after)
}

func compareSnapshots(t *testing.T, before, after map[string]entryState) {
	t.Helper()
	for name, b := range before {
		a, ok := after[name]
		if !ok {
			t.Errorf("%s: missing after remount", name)
			continue
		}
		if name == "." {
			// The root's atime is not part of the contract.
			a.Atime, b.Atime = unix.Timespec{}, unix.Timespec{}
		}
		if !reflect.DeepEqual(a, b) {
			t.Errorf("%s changed across remount:\nbefore %+v\nafter  %+v", name, b, a)
		}
	}
	for name := range after {
		if _, ok := before[name]; !ok {
			t.Errorf("%s: appeared after remount", name)
		}
	}
}

// TestLargeFile writes a file of several chunks, overwrites its middle,
// truncates it down and extends it, and checks every byte before and
// after a remount.
func TestLargeFile(t *testing.T) {
	v := newVolume(t)
	v.mount(t)
	const size = 200 << 20
	p := v.path("big")
	g := newRand(3)
	model := g.bytes(size)
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	for off := 0; off < size; off += 1 << 20 {
		if _, err := f.Write(model[off : off+1<<20]); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	check := func(stage string) {
		t.Helper()
		got, err := os.ReadFile(p)
		if err != nil {
			t.Fatalf("%s: %v", stage, err)
		}
		if len(got) != len(model) || sha256.Sum256(got) != sha256.Sum256(model) {
			t.Fatalf("%s: content differs (length %d, want %d)", stage, len(got), len(model))
		}
	}
	check("after write")

	// Overwrite across the boundary of chunks 1 and 2.
	patch := g.bytes(3 << 20)
	off := 128<<20 - 12345
	f, err = os.OpenFile(p, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(patch, int64(off)); err != nil {
		t.Fatal(err)
	}
	f.Close()
	copy(model[off:], patch)
	check("after overwrite")

	if err := os.Truncate(p, 150<<20+7); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(p, 180<<20); err != nil {
		t.Fatal(err)
	}
	model = append(model[:150<<20+7], make([]byte, 180<<20-(150<<20+7))...)
	check("after truncate down and up")

	v.umount(t)
	v.mount(t)
	check("after remount")
}
