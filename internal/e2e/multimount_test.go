package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// twoMountEngines are the engines the two-mount tests run on: the
// embedded default, and the metadata server, whose mounts send their
// operations whole, on one server and on a replicated group of three.
var twoMountEngines = []string{"sqlite3", "sluice", "sluice3"}

// twoMountsOn mounts a fresh volume on engine twice, in two processes,
// with short kernel caches so that changes show up on the other mount
// quickly.
func twoMountsOn(t *testing.T, engine string) (v *volume, a, b string) {
	t.Helper()
	v = newVolumeOn(t, engine)
	a, b = v.mnt, filepath.Join(v.dir, "mnt2")
	cache := []string{"--attr-cache", "0.1", "--entry-cache", "0.1", "--dir-entry-cache", "0.1"}
	v.mountAt(t, a, cache...)
	v.mountAt(t, b, cache...)
	return v, a, b
}

// eventually retries check until it passes or the deadline (well past the
// cache timeouts) is reached.
func eventually(t *testing.T, what string, check func() error) {
	t.Helper()
	eventuallyWithin(t, 5*time.Second, what, check)
}

func eventuallyWithin(t *testing.T, d time.Duration, what string, check func() error) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		err := check()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %v", what, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestTwoMountsCloseToOpen checks close-to-open consistency between two
// mounts of one volume.
func TestTwoMountsCloseToOpen(t *testing.T) {
	for _, engine := range twoMountEngines {
		t.Run(engine, func(t *testing.T) {
			_, a, b := twoMountsOn(t, engine)
			write(t, filepath.Join(a, "f"), []byte("version 1"))
			got, err := os.ReadFile(filepath.Join(b, "f"))
			if err != nil || string(got) != "version 1" {
				t.Fatalf("b reads %q, %v after a closed the file", got, err)
			}
			// Overwrite on b, longer: a's next open sees the new content.
			write(t, filepath.Join(b, "f"), []byte("version 2, longer"))
			eventually(t, "a sees b's write after open", func() error {
				got, err := os.ReadFile(filepath.Join(a, "f"))
				if err != nil || string(got) != "version 2, longer" {
					return fmt.Errorf("a reads %q, %v", got, err)
				}
				return nil
			})
			// Directory changes on a list on b within the cache timeouts.
			os.Mkdir(filepath.Join(a, "d"), 0o755)
			for i := 0; i < 20; i++ {
				write(t, filepath.Join(a, "d", fmt.Sprintf("x%d", i)), nil)
			}
			os.Remove(filepath.Join(a, "d", "x3"))
			eventually(t, "b lists a's directory", func() error {
				names, err := readDirNames(filepath.Join(b, "d"))
				if err != nil || len(names) != 19 {
					return fmt.Errorf("b lists %d entries (%v)", len(names), err)
				}
				return nil
			})
		})
	}
}

// TestTwoMountsConcurrentChanges creates, renames and unlinks entries of
// one directory from both mounts at once; nothing is lost or corrupted.
func TestTwoMountsConcurrentChanges(t *testing.T) {
	for _, engine := range twoMountEngines {
		t.Run(engine, func(t *testing.T) {
			_, a, b := twoMountsOn(t, engine)
			os.Mkdir(filepath.Join(a, "d"), 0o755)
			const n = 300
			var wg sync.WaitGroup
			errs := make(chan error, 8)
			for w, root := range []string{a, b} {
				for j := 0; j < 2; j++ {
					wg.Add(1)
					go func() {
						defer wg.Done()
						for i := 0; i < n; i++ {
							name := fmt.Sprintf("w%d-%d-%d", w, j, i)
							p := filepath.Join(root, "d", name)
							if err := os.WriteFile(p, []byte(name), 0o644); err != nil {
								errs <- err
								return
							}
							switch i % 3 {
							case 1:
								if err := os.Rename(p, p+".r"); err != nil {
									errs <- err
									return
								}
							case 2:
								if err := os.Remove(p); err != nil {
									errs <- err
									return
								}
							}
						}
					}()
				}
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Fatal(err)
			}
			want := map[string]bool{}
			for w := 0; w < 2; w++ {
				for j := 0; j < 2; j++ {
					for i := 0; i < n; i++ {
						name := fmt.Sprintf("w%d-%d-%d", w, j, i)
						switch i % 3 {
						case 0:
							want[name] = true
						case 1:
							want[name+".r"] = true
						}
					}
				}
			}
			for _, root := range []string{a, b} {
				eventually(t, "listing of "+root, func() error {
					names, err := readDirNames(filepath.Join(root, "d"))
					if err != nil {
						return err
					}
					if len(names) != len(want) {
						return fmt.Errorf("%d entries, want %d", len(names), len(want))
					}
					for _, name := range names {
						if !want[name] {
							return fmt.Errorf("unexpected entry %s", name)
						}
						got, err := os.ReadFile(filepath.Join(root, "d", name))
						if err != nil || !bytes.Equal(got, []byte(trimR(name))) {
							return fmt.Errorf("%s reads %q, %v", name, got, err)
						}
					}
					return nil
				})
			}
			var st unix.Stat_t
			if err := unix.Stat(filepath.Join(b, "d"), &st); err != nil || st.Nlink != 2 {
				t.Errorf("directory nlink %d (%v), want 2", st.Nlink, err)
			}
		})
	}
}

func trimR(name string) string {
	if len(name) > 2 && name[len(name)-2:] == ".r" {
		return name[:len(name)-2]
	}
	return name
}

// TestTwoMountsLocks checks that flock and fcntl locks taken on one mount
// hold against the other.
func TestTwoMountsLocks(t *testing.T) {
	for _, engine := range twoMountEngines {
		t.Run(engine, func(t *testing.T) {
			_, a, b := twoMountsOn(t, engine)
			write(t, filepath.Join(a, "lock"), []byte("x"))
			fa, err := os.OpenFile(filepath.Join(a, "lock"), os.O_RDWR, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer fa.Close()
			fb, err := os.OpenFile(filepath.Join(b, "lock"), os.O_RDWR, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer fb.Close()

			if err := unix.Flock(int(fa.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
				t.Fatal(err)
			}
			wantErrno(t, "flock on b while a holds it", unix.Flock(int(fb.Fd()), unix.LOCK_EX|unix.LOCK_NB), syscall.EWOULDBLOCK)
			got := make(chan error, 1)
			go func() { got <- unix.Flock(int(fb.Fd()), unix.LOCK_EX) }()
			time.Sleep(100 * time.Millisecond) // let b start waiting; the result does not depend on it
			if err := unix.Flock(int(fa.Fd()), unix.LOCK_UN); err != nil {
				t.Fatal(err)
			}
			select {
			case err := <-got:
				if err != nil {
					t.Fatalf("blocking flock on b: %v", err)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("blocking flock on b did not get the lock after a unlocked")
			}
			unix.Flock(int(fb.Fd()), unix.LOCK_UN)

			lk := unix.Flock_t{Type: unix.F_WRLCK, Whence: 0, Start: 0, Len: 100}
			if err := unix.FcntlFlock(fa.Fd(), unix.F_SETLK, &lk); err != nil {
				t.Fatal(err)
			}
			probe := unix.Flock_t{Type: unix.F_WRLCK, Start: 50, Len: 10}
			if err := unix.FcntlFlock(fb.Fd(), unix.F_GETLK, &probe); err != nil {
				t.Fatal(err)
			}
			if probe.Type != unix.F_WRLCK || probe.Start != 0 || probe.Len != 100 {
				t.Errorf("F_GETLK on b reports %+v, want a's write lock on [0,100)", probe)
			}
			other := unix.Flock_t{Type: unix.F_WRLCK, Start: 200, Len: 10}
			if err := unix.FcntlFlock(fb.Fd(), unix.F_SETLK, &other); err != nil {
				t.Errorf("b locks a range a does not hold: %v", err)
			}
			clash := unix.Flock_t{Type: unix.F_RDLCK, Start: 90, Len: 20}
			wantErrno(t, "b locks a's range", unix.FcntlFlock(fb.Fd(), unix.F_SETLK, &clash), syscall.EAGAIN)
			// Closing a's descriptor drops a's locks.
			fa.Close()
			eventually(t, "b locks after a closed", func() error { return unix.FcntlFlock(fb.Fd(), unix.F_SETLK, &clash) })
		})
	}
}

// TestKilledMountReleasesLocks kills one mount with SIGKILL while it holds
// a lock; the other mount, live since before the kill, takes the lock once
// the dead session expires: after --session-timeout 3, well before the
// 25 heartbeats of 1 s that would pass without the flag.
func TestKilledMountReleasesLocks(t *testing.T) {
	v := newVolume(t)
	a, b := v.mnt, filepath.Join(v.dir, "mnt2")
	fast := []string{"--heartbeat", "1", "--session-timeout", "3", "--attr-cache", "0.1", "--entry-cache", "0.1"}
	v.mountAt(t, a, fast...)
	v.mountAt(t, b, fast...)
	write(t, filepath.Join(a, "lock"), []byte("x"))
	fa, err := os.OpenFile(filepath.Join(a, "lock"), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.Flock(int(fa.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		t.Fatal(err)
	}
	fb, err := os.OpenFile(filepath.Join(b, "lock"), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer fb.Close()
	wantErrno(t, "flock on b while a holds it", unix.Flock(int(fb.Fd()), unix.LOCK_EX|unix.LOCK_NB), syscall.EWOULDBLOCK)

	pid := mountPID(t, v, a)
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	fa.Close() // fails on the dead mount; the lock stays recorded
	// 3 s counted in whole seconds, the heartbeat that notices, and a
	// cleanup round: the default of 25 heartbeats would take 25 s.
	eventuallyWithin(t, 12*time.Second, "b takes the lock after a's session expired", func() error {
		return unix.Flock(int(fb.Fd()), unix.LOCK_EX|unix.LOCK_NB)
	})
	t.Logf("b took the lock %v after the kill", time.Since(killed).Round(100*time.Millisecond))
	if r := sluice(t, "umount", "--force", a); r.code != 0 {
		t.Errorf("umount --force of the dead mount: %s", r.stderr)
	}
}

// mountPID returns the pid of the process serving mnt, from sluice status.
func mountPID(t *testing.T, v *volume, mnt string) int {
	t.Helper()
	var st struct {
		Sessions []struct {
			MountPoint string
			PID        int
		}
	}
	if err := json.Unmarshal([]byte(mustSluice(t, "status", v.metaURL)), &st); err != nil {
		t.Fatal(err)
	}
	for _, s := range st.Sessions {
		if s.MountPoint == mnt {
			return s.PID
		}
	}
	t.Fatalf("no session for %s", mnt)
	return 0
}

// TestReopenAfterSameSizeWrite checks that a mount keeps its kernel's
// pages of a file across opens only while the file is unchanged: a's
// pages of f are cached by earlier reads, b rewrites f with other bytes of
// the same length, and a's very next open and read, with no retry, must
// return b's bytes.
func TestReopenAfterSameSizeWrite(t *testing.T) {
	for _, engine := range twoMountEngines {
		t.Run(engine, func(t *testing.T) {
			_, a, b := twoMountsOn(t, engine)
			for i := range 6 {
				data := bytes.Repeat([]byte{byte('A' + i)}, 3<<20+17)
				writer, reader := b, a
				if i%2 == 1 {
					writer, reader = a, b
				}
				// The reader caches the old version's pages (twice: the second
				// read comes from its page cache).
				for range 2 {
					if _, err := os.ReadFile(filepath.Join(reader, "f")); err != nil && i > 0 {
						t.Fatal(err)
					}
				}
				write(t, filepath.Join(writer, "f"), data)
				got, err := os.ReadFile(filepath.Join(reader, "f"))
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(got, data) {
					t.Fatalf("round %d: the other mount read %d bytes starting %q, want %d of %q", i, len(got), got[:min(len(got), 4)], len(data), data[:4])
				}
				// And the writer's own re-read, from its cache or not, is right.
				if got, err := os.ReadFile(filepath.Join(writer, "f")); err != nil || !bytes.Equal(got, data) {
					t.Fatalf("round %d: the writer re-reads %d bytes, %v", i, len(got), err)
				}
			}
		})
	}
}

// TestReaddirCache lists a directory on a mount with --readdir-cache and
// five-minute kernel caches. Listing it again while it is unchanged sends
// no READDIR to the mount; a change, made on another mount or on this
// one, shows in the very next listing (each opendir checks the directory
// against the engine), after which listings come from the kernel again.
// A change close behind the directory's last one may leave its
// modification time alone (meta.Config.DirMtimeSkip): it shows too.
func TestReaddirCache(t *testing.T) {
	v := newVolume(t)
	a, b := v.mnt, filepath.Join(v.dir, "mnt2")
	v.mountAt(t, a, "--readdir-cache", "--attr-cache", "300", "--entry-cache", "300", "--dir-entry-cache", "300")
	v.mountAt(t, b)
	d := filepath.Join(a, "d")
	if err := os.Mkdir(d, 0o755); err != nil {
		t.Fatal(err)
	}
	var want []string
	for i := range 10 {
		name := fmt.Sprintf("f%d", i)
		write(t, filepath.Join(d, name), nil)
		want = append(want, name)
	}
	list := func(what string) {
		t.Helper()
		names, err := readDirNames(d)
		sort.Strings(want)
		if err != nil || !slices.Equal(names, want) {
			t.Fatalf("%s: a lists %v, %v; want %v", what, names, err, want)
		}
	}
	// cached lists d, and lists it twice more once a listing begun a
	// moment after the last change (more than the mount's settle time
	// for directory times, 110 ms) may be kept: those two do not reach
	// the mount.
	cached := func(what string) {
		t.Helper()
		list(what)
		time.Sleep(300 * time.Millisecond)
		list(what)
		before := readdirRequests(t, a)
		list(what)
		list(what)
		if n := readdirRequests(t, a) - before; n != 0 {
			t.Errorf("%s: listing an unchanged directory twice sent %d READDIR requests, want none", what, n)
		}
	}
	cached("first listings")

	write(t, filepath.Join(b, "d", "new"), nil)
	if err := os.Remove(filepath.Join(b, "d", "f3")); err != nil {
		t.Fatal(err)
	}
	want = append(slices.DeleteFunc(want, func(n string) bool { return n == "f3" }), "new")
	cached("after b changed the directory")

	write(t, filepath.Join(d, "mine"), nil)
	want = append(want, "mine")
	cached("after a changed the directory")

	// b creates two names in a row with a listing on a between: the
	// second create comes within DirMtimeSkip of the first often enough
	// to leave the directory's time as the listing saw it.
	for i := range 20 {
		for _, name := range []string{fmt.Sprintf("x%d", i), fmt.Sprintf("y%d", i)} {
			write(t, filepath.Join(b, "d", name), nil)
			want = append(want, name)
			list(fmt.Sprintf("right after b created %s", name))
		}
	}
}

// readdirRequests returns how many READDIR and READDIRPLUS requests the
// mount at mnt has served, from its .stats file.
func readdirRequests(t *testing.T, mnt string) int {
	t.Helper()
	n := 0
	for _, line := range strings.Split(readFile(t, filepath.Join(mnt, ".stats")), "\n") {
		for _, m := range []string{"readdir", "readdirplus"} {
			if v, ok := strings.CutPrefix(line, `sluice_fuse_ops_duration_seconds_count{method="`+m+`"} `); ok {
				c, err := strconv.Atoi(strings.TrimSpace(v))
				if err != nil {
					t.Fatalf("stats line %q: %v", line, err)
				}
				n += c
			}
		}
	}
	return n
}
