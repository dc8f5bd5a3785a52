package e2e

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sluicefs/sluice/internal/testserver"
)

// These tests share one volume between several mounts with the default
// kernel caches (no --attr-cache or --entry-cache), the way a user runs
// programs that coordinate through the file system on several hosts.
// docs/consistency.md names them as the proof of what it promises.

// mounts mounts v n times, each in its own process, with default options.
func (v *volume) mounts(t *testing.T, n int) []string {
	t.Helper()
	var mnts []string
	for i := 0; i < n; i++ {
		mnt := filepath.Join(v.dir, fmt.Sprintf("mnt%d", i))
		v.mountAt(t, mnt)
		mnts = append(mnts, mnt)
	}
	return mnts
}

func requireTools(t *testing.T, names ...string) {
	t.Helper()
	for _, n := range names {
		if _, err := exec.LookPath(n); err != nil {
			testserver.Missing(t, n+" is not installed", "apt-get install "+n)
		}
	}
}

// TestGitAcrossMounts makes commits in one repository alternately from two
// mounts, one after the other: git updates its branch and index by
// writing a lock file and renaming it over the old one, so each commit
// reads what the other mount just renamed into place. Every commit must
// be in the log and git fsck must find nothing dangling.
func TestGitAcrossMounts(t *testing.T) {
	requireTools(t, "git")
	v := newVolumeOn(t, "sqlite3", "--trash-days", "1")
	mnts := v.mounts(t, 2)
	env := append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com",
		"GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com", "GIT_CONFIG_NOSYSTEM=1", "HOME="+v.dir)
	git := func(dir string, args ...string) string {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-C", dir}, args...)...)
		cmd.Env = env
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %s in %s: %v\n%s", strings.Join(args, " "), dir, err, out)
		}
		return string(out)
	}
	repo := func(i int) string { return filepath.Join(mnts[i%2], "repo") }
	git(mnts[0], "init", "-q", "repo")
	const commits = 40
	for i := 0; i <= commits; i++ {
		f, err := os.OpenFile(filepath.Join(repo(i), "f"), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintln(f, i)
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
		git(repo(i), "add", "f")
		git(repo(i), "commit", "-qm", fmt.Sprintf("c%d", i))
	}
	for i := 0; i < 2; i++ {
		if n := strings.TrimSpace(git(repo(i), "rev-list", "--count", "HEAD")); n != strconv.Itoa(commits+1) {
			t.Errorf("mount %d: the log holds %s commits, want %d", i, n, commits+1)
		}
	}
	if out := git(repo(0), "fsck", "--full"); strings.Contains(out, "dangling") || strings.Contains(out, "missing") {
		t.Errorf("git fsck:\n%s", out)
	}
	if got := readFile(t, filepath.Join(repo(1), "f")); strings.Count(got, "\n") != commits+1 {
		t.Errorf("the file holds %d lines, want %d", strings.Count(got, "\n"), commits+1)
	}
}

// TestSQLiteAcrossMounts runs several processes on each of several mounts
// that insert rows into one SQLite database on the volume (rollback
// journal, one connection per insert; SQLite coordinates through fcntl
// locks and the journal's name). Every acknowledged commit must be in
// the table, the database must pass its integrity check, no attempt may
// fail but with SQLITE_BUSY, and nearly all must commit. It runs on every
// engine the e2e tests use.
func TestSQLiteAcrossMounts(t *testing.T) {
	requireTools(t, "python3")
	for _, engine := range metaEngines {
		t.Run(engine, func(t *testing.T) {
			v := newVolumeOn(t, engine, "--trash-days", "1")
			sqliteAcrossMounts(t, v, 3, 2, 60)
		})
	}
}

func sqliteAcrossMounts(t *testing.T, v *volume, nMounts, procs, rows int) {
	t.Helper()
	mnts := v.mounts(t, nMounts)
	db := func(m string) string { return filepath.Join(m, "shared.db") }
	py := func(args ...string) *exec.Cmd { return exec.Command("python3", args...) }
	if out, err := py("-c", "import sqlite3,sys; c=sqlite3.connect(sys.argv[1]); c.execute('CREATE TABLE t (worker INTEGER, seq INTEGER)'); c.commit()",
		db(mnts[0])).CombinedOutput(); err != nil {
		t.Fatalf("create the table: %v\n%s", err, out)
	}
	writer, err := filepath.Abs("testdata/sqlite_writer.py")
	if err != nil {
		t.Fatal(err)
	}
	type outcome struct {
		acked  map[[2]int]bool
		errors map[string]int
		lines  []string
	}
	var mu sync.Mutex
	all := outcome{acked: map[[2]int]bool{}, errors: map[string]int{}}
	var wg sync.WaitGroup
	start := time.Now()
	for m := range mnts {
		for p := 0; p < procs; p++ {
			w := m*procs + p
			wg.Add(1)
			go func() {
				defer wg.Done()
				out, err := py(writer, db(mnts[m]), strconv.Itoa(w), strconv.Itoa(rows), "20").CombinedOutput()
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					all.errors["exit: "+err.Error()]++
				}
				sc := bufio.NewScanner(bytes.NewReader(out))
				for sc.Scan() {
					f := strings.Fields(sc.Text())
					switch {
					case len(f) == 3 && f[0] == "ok":
						wk, _ := strconv.Atoi(f[1])
						seq, _ := strconv.Atoi(f[2])
						all.acked[[2]int{wk, seq}] = true
					case len(f) >= 4 && f[0] == "err":
						all.errors[f[3]]++
						all.lines = append(all.lines, sc.Text())
					default:
						all.lines = append(all.lines, sc.Text())
					}
				}
			}()
		}
	}
	wg.Wait()
	elapsed := time.Since(start)

	// Read the table back through another mount than the one that made it.
	out, err := py("-c", `import sqlite3,sys
c = sqlite3.connect(sys.argv[1], timeout=60)
print(c.execute("pragma integrity_check").fetchone()[0])
for w, s in c.execute("SELECT worker, seq FROM t"): print(w, s)`, db(mnts[len(mnts)-1])).CombinedOutput()
	if err != nil {
		t.Fatalf("read the table: %v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if lines[0] != "ok" {
		t.Errorf("integrity_check: %s", strings.Join(lines, "; "))
	}
	rowsIn := map[[2]int]int{}
	for _, l := range lines[1:] {
		var w, s int
		if _, err := fmt.Sscan(l, &w, &s); err != nil {
			t.Fatalf("row %q: %v", l, err)
		}
		rowsIn[[2]int{w, s}]++
	}
	lost := 0
	for k := range all.acked {
		if rowsIn[k] != 1 {
			lost++
		}
	}
	attempts := nMounts * procs * rows
	t.Logf("%d mounts x %d processes: %d of %d attempts acknowledged in %v (%.1f commits/s), %d rows, errors %v",
		nMounts, procs, len(all.acked), attempts, elapsed.Round(time.Millisecond),
		float64(len(all.acked))/elapsed.Seconds(), len(rowsIn), all.errors)
	if lost > 0 {
		t.Errorf("%d acknowledged commits are not in the table (exactly once)", lost)
	}
	for code, n := range all.errors {
		if code != "SQLITE_BUSY" {
			t.Errorf("%d attempts failed with %s; output: %s", n, code, strings.Join(all.lines, "\n"))
		}
	}
	if len(all.acked) < attempts*95/100 {
		t.Errorf("only %d of %d attempts committed", len(all.acked), attempts)
	}
}

// TestOpenFileOutlivesItsName checks that a file open in one mount stays
// usable through its descriptor after another mount removes its name and
// the kernel's attribute cache has expired: fstat, read and write work.
// With the trash (the default) the file moves there; without it, it lives
// until the mount holding it closes it, and then its inode and blocks go.
func TestOpenFileOutlivesItsName(t *testing.T) {
	for _, trash := range []string{"0", "1"} {
		t.Run("trash="+trash, func(t *testing.T) {
			v := newVolumeOn(t, "sqlite3", "--trash-days", trash)
			mnts := v.mounts(t, 2)
			usedInodes := func() uint64 {
				st := statfs(t, mnts[0])
				return st.Files - st.Ffree
			}
			inodesBefore := usedInodes()
			data := randomData(3<<20, 7)
			write(t, filepath.Join(mnts[0], "f"), data)
			f, err := os.OpenFile(filepath.Join(mnts[0], "f"), os.O_RDWR, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if err := os.Remove(filepath.Join(mnts[1], "f")); err != nil {
				t.Fatal(err)
			}
			time.Sleep(1200 * time.Millisecond) // past the attribute cache
			if _, err := f.Stat(); err != nil {
				t.Errorf("fstat of the open file after another mount removed it: %v", err)
			}
			if _, err := f.WriteAt([]byte("DA"), 0); err != nil {
				t.Errorf("write: %v", err)
			}
			if _, err := f.WriteAt([]byte("more"), int64(len(data))); err != nil {
				t.Errorf("write at the end: %v", err)
			}
			if err := f.Sync(); err != nil {
				t.Errorf("fsync: %v", err)
			}
			want := append(append([]byte("DA"), data[2:]...), "more"...)
			got := make([]byte, len(want)+10)
			if n, err := f.ReadAt(got, 0); n != len(want) || !bytes.Equal(got[:n], want) {
				t.Errorf("read back %d bytes (%v), want the %d bytes written", n, err, len(want))
			}
			if _, err := os.Stat(filepath.Join(mnts[0], "f")); !os.IsNotExist(err) {
				t.Errorf("stat of the removed name: %v, want it missing", err)
			}
			if n := usedInodes(); n != inodesBefore+1 {
				t.Errorf("%d inodes used while the file is open, want %d", n, inodesBefore+1)
			}
			if err := f.Close(); err != nil {
				t.Errorf("close: %v", err)
			}
			if trash != "0" {
				return
			}
			// Closed by its last holder, the file goes: its inode at
			// once, its blocks with the background deletion.
			deadline := time.Now().Add(30 * time.Second)
			for usedInodes() != inodesBefore || len(v.blockKeys(t)) != 0 {
				if time.Now().After(deadline) {
					t.Fatalf("after the last close: %d inodes used (%d before the file), blocks %v",
						usedInodes(), inodesBefore, v.blockKeys(t))
				}
				time.Sleep(100 * time.Millisecond)
			}
		})
	}
}

// TestPathThroughReplacedDirectory renames a directory over another, empty
// one on one mount while the other mount's kernel still caches the old
// directory under that name: a path through the name on the second mount
// reaches the new directory's files at once.
func TestPathThroughReplacedDirectory(t *testing.T) {
	v := newVolumeOn(t, "sqlite3")
	mnts := v.mounts(t, 2)
	if err := os.Mkdir(filepath.Join(mnts[0], "cur"), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(mnts[1], "cur", "f")); !os.IsNotExist(err) {
		t.Fatalf("stat of a missing file: %v", err)
	}
	if err := os.Mkdir(filepath.Join(mnts[0], "next"), 0o755); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(mnts[0], "next", "f"), []byte("new"))
	// os.Rename refuses to replace a directory; rename(2) does it.
	if err := syscall.Rename(filepath.Join(mnts[0], "next"), filepath.Join(mnts[0], "cur")); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(mnts[1], "cur", "f"))
	if err != nil || string(got) != "new" {
		t.Errorf("read through the replaced directory's name: %q, %v", got, err)
	}
}
