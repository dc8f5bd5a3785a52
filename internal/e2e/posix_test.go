package e2e

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

func statfs(t *testing.T, path string) unix.Statfs_t {
	t.Helper()
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		t.Fatalf("statfs %s: %v", path, err)
	}
	return st
}

func write(t *testing.T, path string, data []byte) {
	t.Helper()
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

func wantErrno(t *testing.T, what string, err error, want syscall.Errno) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Errorf("%s: got %v, want %v", what, err, want)
	}
}

// TestPOSIX runs file system cases through a mount of a volume on each
// metadata engine, each case checking the result or errno Linux file
// systems give.
func TestPOSIX(t *testing.T) {
	for _, engine := range metaEngines {
		t.Run(engine, func(t *testing.T) {
			v := newVolumeOn(t, engine)
			v.mount(t)
			posixCases(t, v)
		})
	}
}

func posixCases(t *testing.T, v *volume) {
	cases := []struct {
		name string
		fn   func(t *testing.T, dir string)
	}{
		{"create read write", func(t *testing.T, dir string) {
			p := filepath.Join(dir, "f")
			write(t, p, []byte("hello"))
			got, err := os.ReadFile(p)
			if err != nil || string(got) != "hello" {
				t.Fatalf("read %q, %v", got, err)
			}
		}},
		{"O_EXCL", func(t *testing.T, dir string) {
			p := filepath.Join(dir, "f")
			write(t, p, nil)
			_, err := os.OpenFile(p, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
			wantErrno(t, "O_EXCL on existing", err, syscall.EEXIST)
		}},
		{"O_TRUNC", func(t *testing.T, dir string) {
			p := filepath.Join(dir, "f")
			write(t, p, []byte("0123456789"))
			f, err := os.OpenFile(p, os.O_WRONLY|os.O_TRUNC, 0)
			if err != nil {
				t.Fatal(err)
			}
			f.Write([]byte("ab"))
			f.Close()
			if got, _ := os.ReadFile(p); string(got) != "ab" {
				t.Fatalf("after O_TRUNC: %q", got)
			}
		}},
		{"O_APPEND", func(t *testing.T, dir string) {
			p := filepath.Join(dir, "f")
			write(t, p, []byte("abc"))
			f, err := os.OpenFile(p, os.O_WRONLY|os.O_APPEND, 0)
			if err != nil {
				t.Fatal(err)
			}
			f.Write([]byte("def"))
			f.WriteAt([]byte{}, 0)
			f.Close()
			if got, _ := os.ReadFile(p); string(got) != "abcdef" {
				t.Fatalf("after append: %q", got)
			}
		}},
		{"sparse holes read zeros", func(t *testing.T, dir string) {
			p := filepath.Join(dir, "sparse")
			f, err := os.Create(p)
			if err != nil {
				t.Fatal(err)
			}
			f.WriteAt([]byte("end"), 70<<20) // in the second chunk
			f.Close()
			got, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != 70<<20+3 || !bytes.Equal(got[len(got)-3:], []byte("end")) {
				t.Fatalf("length %d", len(got))
			}
			if i := bytes.IndexFunc(got[:70<<20], func(r rune) bool { return r != 0 }); i >= 0 {
				t.Fatalf("hole has data at %d", i)
			}
		}},
		{"random writes and reads", func(t *testing.T, dir string) {
			p := filepath.Join(dir, "rnd")
			f, err := os.OpenFile(p, os.O_CREATE|os.O_RDWR, 0o644)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			model := make([]byte, 9<<20)
			rng := newRand(7)
			for i := 0; i < 200; i++ {
				off := rng.Intn(len(model) - 1)
				n := 1 + rng.Intn(min(300<<10, len(model)-off))
				buf := rng.bytes(n)
				if _, err := f.WriteAt(buf, int64(off)); err != nil {
					t.Fatal(err)
				}
				copy(model[off:], buf)
				if i%10 == 0 { // read back before and after flushes
					got := make([]byte, n)
					if _, err := f.ReadAt(got, int64(off)); err != nil || !bytes.Equal(got, buf) {
						t.Fatalf("op %d: read back differs (%v)", i, err)
					}
				}
				if i%50 == 0 {
					f.Sync()
				}
			}
			st, _ := f.Stat()
			got := make([]byte, st.Size())
			if _, err := f.ReadAt(got, 0); err != nil && err != io.EOF {
				t.Fatal(err)
			}
			if !bytes.Equal(got, model[:st.Size()]) {
				t.Fatal("file differs from model")
			}
		}},
		{"truncate down and up", func(t *testing.T, dir string) {
			p := filepath.Join(dir, "tr")
			write(t, p, bytes.Repeat([]byte("x"), 100000))
			if err := os.Truncate(p, 10); err != nil {
				t.Fatal(err)
			}
			if err := os.Truncate(p, 50000); err != nil {
				t.Fatal(err)
			}
			got, _ := os.ReadFile(p)
			want := append(bytes.Repeat([]byte("x"), 10), make([]byte, 49990)...)
			if !bytes.Equal(got, want) {
				t.Fatal("truncate down then up did not read zeros past the cut")
			}
		}},
		{"mknod types", func(t *testing.T, dir string) {
			for _, m := range []struct {
				name string
				mode uint32
				dev  int
			}{{"fifo", unix.S_IFIFO | 0o644, 0}, {"sock", unix.S_IFSOCK | 0o644, 0},
				{"chr", unix.S_IFCHR | 0o600, int(unix.Mkdev(1, 3))}, {"blk", unix.S_IFBLK | 0o600, int(unix.Mkdev(7, 0))}} {
				p := filepath.Join(dir, m.name)
				if err := unix.Mknod(p, m.mode, m.dev); err != nil {
					t.Fatalf("mknod %s: %v", m.name, err)
				}
				var st unix.Stat_t
				if err := unix.Lstat(p, &st); err != nil {
					t.Fatal(err)
				}
				if st.Mode != m.mode || st.Rdev != uint64(m.dev) {
					t.Errorf("%s: mode %o rdev %d, want %o %d", m.name, st.Mode, st.Rdev, m.mode, m.dev)
				}
			}
		}},
		{"rename flags", func(t *testing.T, dir string) {
			a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
			write(t, a, []byte("A"))
			write(t, b, []byte("B"))
			err := unix.Renameat2(unix.AT_FDCWD, a, unix.AT_FDCWD, b, unix.RENAME_NOREPLACE)
			wantErrno(t, "RENAME_NOREPLACE", err, syscall.EEXIST)
			if err := unix.Renameat2(unix.AT_FDCWD, a, unix.AT_FDCWD, b, unix.RENAME_EXCHANGE); err != nil {
				t.Fatal(err)
			}
			ga, _ := os.ReadFile(a)
			gb, _ := os.ReadFile(b)
			if string(ga) != "B" || string(gb) != "A" {
				t.Fatalf("after exchange a=%q b=%q", ga, gb)
			}
			os.MkdirAll(filepath.Join(dir, "d", "sub"), 0o755)
			err = os.Rename(filepath.Join(dir, "d"), filepath.Join(dir, "d", "sub", "x"))
			wantErrno(t, "rename into own subtree", err, syscall.EINVAL)
			os.Mkdir(filepath.Join(dir, "full"), 0o755)
			write(t, filepath.Join(dir, "full", "f"), nil)
			os.Mkdir(filepath.Join(dir, "empty"), 0o755)
			// os.Rename refuses any existing directory itself; use rename(2).
			wantErrno(t, "rename over non-empty dir", unix.Rename(filepath.Join(dir, "empty"), filepath.Join(dir, "full")), syscall.ENOTEMPTY)
			if err := unix.Rename(filepath.Join(dir, "full"), filepath.Join(dir, "empty")); err != nil {
				t.Fatalf("rename over empty dir: %v", err)
			}
		}},
		{"links", func(t *testing.T, dir string) {
			p := filepath.Join(dir, "f")
			write(t, p, []byte("data"))
			os.Mkdir(filepath.Join(dir, "other"), 0o755)
			l := filepath.Join(dir, "other", "hard")
			if err := os.Link(p, l); err != nil {
				t.Fatal(err)
			}
			var st unix.Stat_t
			unix.Stat(p, &st)
			if st.Nlink != 2 {
				t.Errorf("nlink %d, want 2", st.Nlink)
			}
			os.Remove(p)
			if got, _ := os.ReadFile(l); string(got) != "data" {
				t.Errorf("hard link reads %q", got)
			}
			s := filepath.Join(dir, "sym")
			target := string(bytes.Repeat([]byte("t/"), 2000))
			if err := os.Symlink(target, s); err != nil {
				t.Fatal(err)
			}
			if got, _ := os.Readlink(s); got != target {
				t.Error("symlink target differs")
			}
			wantErrno(t, "link to dir", os.Link(dir, filepath.Join(dir, "dl")), syscall.EPERM)
		}},
		{"unlink open file", func(t *testing.T, dir string) {
			p := filepath.Join(dir, "open")
			f, err := os.Create(p)
			if err != nil {
				t.Fatal(err)
			}
			f.Write([]byte("still here"))
			if err := os.Remove(p); err != nil {
				t.Fatal(err)
			}
			f.Write([]byte(" and more"))
			got := make([]byte, 100)
			n, _ := f.ReadAt(got, 0)
			if string(got[:n]) != "still here and more" {
				t.Errorf("open unlinked file reads %q", got[:n])
			}
			f.Close()
			if _, err := os.Stat(p); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("stat after unlink: %v", err)
			}
		}},
		{"xattrs", func(t *testing.T, dir string) {
			p := filepath.Join(dir, "x")
			write(t, p, nil)
			if err := unix.Setxattr(p, "user.k", []byte("v1"), 0); err != nil {
				t.Fatal(err)
			}
			wantErrno(t, "XATTR_CREATE on existing", unix.Setxattr(p, "user.k", []byte("v2"), unix.XATTR_CREATE), syscall.EEXIST)
			wantErrno(t, "XATTR_REPLACE on missing", unix.Setxattr(p, "user.none", []byte("v"), unix.XATTR_REPLACE), syscall.ENODATA)
			buf := make([]byte, 64)
			n, err := unix.Getxattr(p, "user.k", buf)
			if err != nil || string(buf[:n]) != "v1" {
				t.Fatalf("getxattr %q %v", buf[:n], err)
			}
			n, _ = unix.Listxattr(p, buf)
			if string(buf[:n]) != "user.k\x00" {
				t.Errorf("listxattr %q", buf[:n])
			}
			unix.Removexattr(p, "user.k")
			_, err = unix.Getxattr(p, "user.k", buf)
			wantErrno(t, "getxattr after remove", err, syscall.ENODATA)
		}},
		{"errnos", func(t *testing.T, dir string) {
			os.Mkdir(filepath.Join(dir, "d"), 0o755)
			write(t, filepath.Join(dir, "d", "f"), nil)
			wantErrno(t, "rmdir non-empty", os.Remove(filepath.Join(dir, "d")), syscall.ENOTEMPTY)
			wantErrno(t, "unlink dir", unix.Unlink(filepath.Join(dir, "d")), syscall.EISDIR)
			wantErrno(t, "rmdir file", unix.Rmdir(filepath.Join(dir, "d", "f")), syscall.ENOTDIR)
			wantErrno(t, "mkdir existing", os.Mkdir(filepath.Join(dir, "d"), 0o755), syscall.EEXIST)
			long := string(bytes.Repeat([]byte("n"), 256))
			wantErrno(t, "name of 256 bytes", os.WriteFile(filepath.Join(dir, long), nil, 0o644), syscall.ENAMETOOLONG)
			if err := os.WriteFile(filepath.Join(dir, long[:255]), nil, 0o644); err != nil {
				t.Errorf("name of 255 bytes: %v", err)
			}
			odd := "\xff\xfe name \x01"
			if err := os.WriteFile(filepath.Join(dir, odd), []byte("x"), 0o644); err != nil {
				t.Errorf("non-UTF-8 name: %v", err)
			}
		}},
		{"timestamps with nanoseconds", func(t *testing.T, dir string) {
			p := filepath.Join(dir, "ts")
			write(t, p, nil)
			ts := []unix.Timespec{{Sec: 1234567890, Nsec: 123456789}, {Sec: 987654321, Nsec: 987654321}}
			if err := unix.UtimesNano(p, ts); err != nil {
				t.Fatal(err)
			}
			var st unix.Stat_t
			unix.Stat(p, &st)
			if st.Atim != ts[0] || st.Mtim != ts[1] {
				t.Errorf("atime %v mtime %v, want %v", st.Atim, st.Mtim, ts)
			}
		}},
		{"readdir of many entries", func(t *testing.T, dir string) {
			const n = 2500 // several pages of the directory stream
			for i := 0; i < n; i++ {
				f, err := os.Create(filepath.Join(dir, fmt.Sprintf("e%05d", i)))
				if err != nil {
					t.Fatal(err)
				}
				f.Close()
			}
			names, err := readDirNames(dir)
			if err != nil {
				t.Fatal(err)
			}
			if len(names) != n {
				t.Fatalf("listed %d entries, want %d", len(names), n)
			}
			for i, name := range names {
				if name != fmt.Sprintf("e%05d", i) {
					t.Fatalf("entry %d is %q", i, name)
				}
			}
		}},
		{"largest file size", largestFileCase},
		{"fstat of a replaced directory and file", replacedWhileOpenCase},
		{"statfs", func(t *testing.T, dir string) {
			st := statfs(t, dir)
			if st.Blocks == 0 || st.Bfree > st.Blocks || st.Files == 0 || st.Namelen != 255 {
				t.Errorf("statfs %+v", st)
			}
		}},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := v.path(fmt.Sprintf("case%02d", i))
			if err := os.Mkdir(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			tc.fn(t, dir)
		})
	}
}

func readDirNames(dir string) ([]string, error) {
	f, err := os.Open(dir)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	names, err := f.Readdirnames(-1)
	sort.Strings(names)
	return names, err
}
