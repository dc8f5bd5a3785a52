package e2e

// Migration between JuiceFS 1.x and Sluice: a volume's metadata is dumped
// to JSON by one system and loaded by the other, which then mounts the
// SAME bucket, without copying any data. These tests drive the real
// JuiceFS 1.4.1 binary (a test peer only: scripts/build-juicefs.sh builds
// it from the Go module proxy; none of its code is in Sluice) both ways
// and compare everything an application can observe of the tree.

import (
	"bytes"
	"compress/gzip"
	"crypto/aes"
	"crypto/cipher"
	"crypto/md5"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sluicefs/sluice/internal/testserver"
)

// juicefsVersion is the JuiceFS release the migration tests run against.
const juicefsVersion = "v1.4.1"

// juicefsPeer returns the path of the JuiceFS binary: $SLUICE_JUICEFS, or
// the copy scripts/build-juicefs.sh caches in ~/.cache/sluice-peer. It
// skips the test when there is none (building takes minutes, too long for
// a test), and fails it under CI=true, where .ci/run builds it first.
func juicefsPeer(t *testing.T) string {
	t.Helper()
	requireFUSE(t)
	if p := os.Getenv("SLUICE_JUICEFS"); p != "" {
		if _, err := exec.LookPath(p); err != nil {
			testserver.Missing(t, fmt.Sprintf("SLUICE_JUICEFS=%s is not an executable: %v", p, err),
				"point SLUICE_JUICEFS at the output of scripts/build-juicefs.sh")
		}
		return p
	}
	home, _ := os.UserHomeDir()
	p := filepath.Join(home, ".cache", "sluice-peer", "juicefs-"+juicefsVersion)
	if _, err := os.Stat(p); err != nil {
		testserver.Missing(t, "the JuiceFS "+juicefsVersion+" peer binary is not built (not in $SLUICE_JUICEFS nor at "+p+
			"); building it takes about 8 minutes, too long to do inside a test",
			"run scripts/build-juicefs.sh once, which caches it there")
	}
	return p
}

// juicefs runs the JuiceFS binary with args.
func juicefs(t *testing.T, bin string, args ...string) result {
	t.Helper()
	return run(t, bin, args...)
}

func mustJuicefs(t *testing.T, bin string, args ...string) string {
	t.Helper()
	r := juicefs(t, bin, args...)
	if r.code != 0 {
		t.Fatalf("juicefs %s: exit %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), r.code, r.stdout, tail(r.stderr, 30))
	}
	return r.stdout
}

// jfsVolume is a JuiceFS volume: SQLite metadata and a local-directory
// bucket in the test's temporary directory.
type jfsVolume struct {
	bin, dir, metaURL, bucket, mnt, log string
}

// newJFSVolume formats a JuiceFS volume named "vol" with formatArgs.
func newJFSVolume(t *testing.T, bin, dir string, formatArgs ...string) *jfsVolume {
	t.Helper()
	v := &jfsVolume{bin: bin, dir: dir, metaURL: "sqlite3://" + filepath.Join(dir, "juicefs.db"),
		bucket: filepath.Join(dir, "bucket"), mnt: filepath.Join(dir, "jfs-mnt"), log: filepath.Join(dir, "juicefs.log")}
	mustJuicefs(t, bin, append([]string{"format", v.metaURL, "vol", "--storage", "file", "--bucket", v.bucket}, formatArgs...)...)
	return v
}

// mountJuicefs mounts the JuiceFS volume of metaURL at mnt in the
// background, with xattrs on (JuiceFS 1.4 refuses them unless asked), no
// usage report and no metadata backups into the bucket, and unmounts it
// when the test ends.
func mountJuicefs(t *testing.T, bin, metaURL, mnt, dir string, args ...string) {
	t.Helper()
	if err := os.MkdirAll(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	base := filepath.Base(mnt)
	mustJuicefs(t, bin, append([]string{"mount", "-d", "--no-usage-report", "--backup-meta", "0", "--enable-xattr",
		"--no-syslog", "--cache-dir", filepath.Join(dir, "jfs-cache-"+base), "--log", filepath.Join(dir, "juicefs-"+base+".log"),
		metaURL, mnt}, args...)...)
	t.Cleanup(func() {
		if mounted(mnt) {
			if r := juicefs(t, bin, "umount", mnt); r.code != 0 {
				juicefs(t, bin, "umount", "--force", mnt)
			}
		}
	})
}

// umountJuicefs unmounts and waits until the mount process has closed its
// session, so that its metadata is final.
func umountJuicefs(t *testing.T, bin, metaURL, mnt string) {
	t.Helper()
	mustJuicefs(t, bin, "umount", mnt)
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		if !strings.Contains(mustJuicefs(t, bin, "status", metaURL), `"Sid"`) {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("JuiceFS mount of %s did not end its session after umount", metaURL)
}

// ---------------------------------------------------------------- the tree

// treeOpts says what fillTree makes besides the common entries.
type treeOpts struct {
	big   bool // a dense file of more than one 64 MiB chunk
	trash bool // delete a file, which the volume keeps in its trash
}

// fillTree makes, through a mount at root, a tree with every kind of
// entry and data layout a migration has to carry: files of several sizes,
// files of many overlapping slices, holes made by truncation, punched
// holes, slices shared by copy_file_range, hard links within and across
// directories, symlinks of every sort, special files, xattrs, names that
// need escaping or are not UTF-8, odd modes and owners, and set times.
func fillTree(t *testing.T, root string, o treeOpts) {
	t.Helper()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	p := func(name string) string { return filepath.Join(root, name) }
	g := newRand(2024)
	writeAt := func(name string, off int64, data []byte) {
		t.Helper()
		f, err := os.OpenFile(p(name), os.O_WRONLY|os.O_CREATE, 0o644)
		must(err)
		_, err = f.WriteAt(data, off)
		must(err)
		must(f.Close())
	}

	for _, d := range []string{"files", "links", "links/other", "special", "names", "empty", "a/b/c/d", "modes", "times"} {
		must(os.MkdirAll(p(d), 0o755))
	}
	// Regular files of several sizes: 5 MiB spans two 4 MiB blocks.
	for name, size := range map[string]int{"empty": 0, "one": 1, "ten-kb": 10_000, "five-mb": 5<<20 + 3} {
		write(t, p("files/"+name), g.bytes(size))
	}
	if o.big {
		// More than one chunk: 64 MiB + 1 MiB + 7, written in 1 MiB steps.
		f, err := os.Create(p("files/big"))
		must(err)
		for n := 0; n < 65<<20+7; n += 1 << 20 {
			_, err := f.Write(g.bytes(min(1<<20, 65<<20+7-n)))
			must(err)
		}
		must(f.Close())
	}
	// A slice that crosses the chunk boundary in a sparse file: two slices
	// in two chunks, zeros before.
	writeAt("files/across-chunks", 64<<20-300_000, g.bytes(600_000))

	// Overlapping slices: written, then overwritten in part by separate
	// opens (so that they are separate slices): the head, and from before
	// a block boundary to past the end. No more: JuiceFS compacts a chunk
	// of five or more slices or pieces when it is read. Another file is
	// written in two pieces with a hole between them.
	write(t, p("files/overwritten"), g.bytes(6<<20))
	writeAt("files/overwritten", 0, []byte("new head"))
	writeAt("files/overwritten", 4<<20-50, g.bytes(3<<20))
	writeAt("files/two-pieces", 1<<20, g.bytes(1000))
	writeAt("files/two-pieces", 3<<20+17, g.bytes(2000))

	// Holes: extended by truncate, data in the middle; shrunk then extended
	// (the bytes cut off must read as zeros); a punched hole.
	f, err := os.Create(p("files/sparse"))
	must(err)
	must(f.Truncate(10 << 20))
	_, err = f.WriteAt([]byte("island"), 7<<20+3)
	must(err)
	must(f.Close())
	write(t, p("files/shrunk"), g.bytes(3<<20))
	must(os.Truncate(p("files/shrunk"), 1<<20+5))
	must(os.Truncate(p("files/shrunk"), 2<<20))
	write(t, p("files/punched"), g.bytes(2<<20))
	f, err = os.OpenFile(p("files/punched"), os.O_RDWR, 0)
	must(err)
	must(unix.Fallocate(int(f.Fd()), unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_KEEP_SIZE, 100_000, 1<<20))
	must(f.Close())
	// Slices shared by two files.
	src, err := os.Open(p("files/five-mb"))
	must(err)
	dst, err := os.Create(p("files/copied"))
	must(err)
	for off := int64(0); off < 5<<20+3; {
		n, err := unix.CopyFileRange(int(src.Fd()), nil, int(dst.Fd()), nil, 5<<20+3-int(off), 0)
		must(err)
		if n == 0 {
			t.Fatal("copy_file_range copied nothing")
		}
		off += int64(n)
	}
	must(src.Close())
	must(dst.Close())

	// Hard links in the same and in another directory; symlinks relative,
	// absolute, dangling, and with a target that needs escaping.
	write(t, p("links/target"), []byte("linked data\n"))
	must(os.Link(p("links/target"), p("links/same-dir")))
	must(os.Link(p("links/target"), p("links/other/other-dir")))
	must(os.Symlink("../files/one", p("links/relative")))
	must(os.Symlink("/etc/hostname", p("links/absolute")))
	must(os.Symlink("no/such/thing", p("links/dangling")))
	must(os.Symlink("odd %41 \"target\" \xff\xfe \\ end", p("links/odd-target")))

	// Special files.
	must(unix.Mkfifo(p("special/fifo"), 0o640))
	must(unix.Mknod(p("special/null"), unix.S_IFCHR|0o666, int(unix.Mkdev(1, 3))))
	must(unix.Mknod(p("special/loop"), unix.S_IFBLK|0o660, int(unix.Mkdev(7, 200))))
	must(unix.Mknod(p("special/socket"), unix.S_IFSOCK|0o755, 0))

	// Names: not UTF-8, with spaces, '%' (also one that looks escaped),
	// quotes, a backslash, control characters, multi-byte UTF-8.
	for _, name := range []string{"bad\xff\xfe", "with space", "trailing space ", "per%cent", "looks%41escaped", "%25",
		`dq"uote`, "sq'uote", `back\slash`, "tab\tname", "new\nline", "héllo-日本"} {
		write(t, p("names/"+name), []byte(name))
	}
	must(os.Mkdir(p("names/dir \xc3\x28 latin"), 0o755))

	// Xattrs: text, binary, empty, with bytes that need escaping, on a
	// file, a directory and a hard-linked file.
	for _, x := range []struct{ path, name, value string }{
		{"files/one", "user.text", "blue"},
		{"files/one", "user.binary", "\x00\xff\xfe %41 \"\n"},
		{"files/one", "user.empty", ""},
		{"a", "user.dir", "on a directory"},
		{"links/target", "user.linked", "seen through every name"},
	} {
		must(unix.Setxattr(p(x.path), x.name, []byte(x.value), 0))
	}

	// Modes and owners.
	for _, m := range []struct {
		name       string
		dir        bool
		mode       os.FileMode
		uid, gid   int
		perm, spec uint32
	}{
		{name: "modes/private", mode: 0o600, uid: 1000, gid: 1000},
		{name: "modes/none", mode: 0, uid: 12345, gid: 54321},
		{name: "modes/setuid", perm: 0o4755, uid: 0, gid: 0},
		{name: "modes/setgid-dir", dir: true, perm: 0o2775, uid: 1000, gid: 100},
		{name: "modes/sticky-dir", dir: true, perm: 0o1777, uid: 0, gid: 0},
		{name: "modes/nobody", mode: 0o444, uid: 65534, gid: 65534},
	} {
		if m.dir {
			must(os.Mkdir(p(m.name), 0o755))
		} else {
			write(t, p(m.name), []byte(m.name))
		}
		must(os.Lchown(p(m.name), m.uid, m.gid))
		// chmod after chown: chown clears setuid and setgid.
		if m.perm != 0 {
			must(unix.Chmod(p(m.name), m.perm))
		} else {
			must(os.Chmod(p(m.name), m.mode))
		}
	}
	must(os.Lchown(p("links/dangling"), 4242, 4343))

	if o.trash {
		write(t, p("files/deleted"), g.bytes(300_000))
		must(unix.Setxattr(p("files/deleted"), "user.gone", []byte("to the trash"), 0))
		must(os.Remove(p("files/deleted")))
	}

	// Times last, directories after their children, nanoseconds included.
	var paths []string
	must(filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if path == root {
			return nil
		}
		if d.IsDir() && d.Name() == ".trash" && filepath.Dir(path) == root {
			return filepath.SkipDir
		}
		if filepath.Dir(path) == root && strings.HasPrefix(d.Name(), ".") {
			return nil // JuiceFS's internal files
		}
		paths = append(paths, path)
		return nil
	}))
	paths = append(paths, root)
	for i := len(paths) - 1; i >= 0; i-- { // children before parents
		ts := []unix.Timespec{{Sec: 1_100_000_000 + int64(i)*1000, Nsec: int64(i) * 1_000_003 % 1e9},
			{Sec: 1_200_000_000 + int64(i)*1000, Nsec: int64(i) * 7_000_001 % 1e9}}
		must(unix.UtimesNanoAt(unix.AT_FDCWD, paths[i], ts, unix.AT_SYMLINK_NOFOLLOW))
	}
}

// ---------------------------------------------------------------- manifests

// mfEntry is what an application sees of one path of a mount.
type mfEntry struct {
	Mode            uint32 // type and permission bits
	Uid, Gid, Nlink uint32
	Size            int64 // regular files and symlinks only
	Rdev            uint64
	Atime, Mtime    unix.Timespec
	Ctime           unix.Timespec
	Target          string // symlink target, raw bytes
	Sum             string // SHA-256 of the content
	Xattrs          map[string]string
	Ino             uint64 // compared on its own, see compareManifests
	LinkGroup       string // every name of the inode, sorted, when it has several
}

// internalRootNames are files JuiceFS shows in the root of a mount; the
// manifest leaves them out, and .trash is compared on its own.
var internalRootNames = map[string]bool{".accesslog": true, ".config": true, ".stats": true, ".control": true, ".trash": true}

// manifest walks root (with lstat, never following symlinks) and records
// every entry by its path relative to root, as raw bytes. The root's
// .trash and the JuiceFS internal files are left out: see trashManifest.
func manifest(t *testing.T, root string) map[string]mfEntry {
	t.Helper()
	return walkManifest(t, root, true)
}

// trashManifest is the manifest of the trash of the volume mounted at mnt.
func trashManifest(t *testing.T, mnt string) map[string]mfEntry {
	t.Helper()
	if _, err := os.Lstat(filepath.Join(mnt, ".trash")); errors.Is(err, fs.ErrNotExist) {
		return nil // Sluice shows no .trash when the trash is off
	}
	m := walkManifest(t, filepath.Join(mnt, ".trash"), false)
	// Of the trash root, only its type and mode are compared: each system
	// makes it itself, with times of its own.
	m["."] = mfEntry{Mode: m["."].Mode}
	return m
}

func walkManifest(t *testing.T, root string, skipInternal bool) map[string]mfEntry {
	t.Helper()
	out := map[string]mfEntry{}
	byIno := map[uint64][]string{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		if skipInternal && filepath.Dir(p) == root && (internalRootNames[d.Name()] || strings.HasPrefix(d.Name(), ".jfs")) {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		var st unix.Stat_t
		if err := unix.Lstat(p, &st); err != nil {
			return err
		}
		e := mfEntry{Mode: st.Mode, Uid: st.Uid, Gid: st.Gid, Nlink: uint32(st.Nlink), Rdev: st.Rdev,
			Atime: st.Atim, Mtime: st.Mtim, Ctime: st.Ctim, Ino: st.Ino}
		switch st.Mode & unix.S_IFMT {
		case unix.S_IFLNK:
			e.Size = st.Size
			if e.Target, err = os.Readlink(p); err != nil {
				return err
			}
		case unix.S_IFREG:
			e.Size = st.Size
			e.Sum = fileSum(t, p)
		}
		if e.Xattrs, err = allXattrs(p); err != nil {
			return err
		}
		out[rel] = e
		byIno[st.Ino] = append(byIno[st.Ino], rel)
		return nil
	})
	if err != nil {
		t.Fatalf("walk %s: %v", root, err)
	}
	for _, names := range byIno {
		if len(names) < 2 {
			continue
		}
		sort.Strings(names)
		for _, n := range names {
			e := out[n]
			e.LinkGroup = fmt.Sprintf("%q", names)
			out[n] = e
		}
	}
	return out
}

// allXattrs returns the extended attributes of p (not following symlinks).
func allXattrs(p string) (map[string]string, error) {
	buf := make([]byte, 64<<10)
	n, err := unix.Llistxattr(p, buf)
	if errors.Is(err, unix.ENOTSUP) || errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.ENODATA) {
		// JuiceFS answers ENODATA for its trash directories.
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("listxattr %q: %w", p, err)
	}
	var out map[string]string
	for _, name := range splitNames(buf[:n]) {
		v := make([]byte, 64<<10)
		m, err := unix.Lgetxattr(p, name, v)
		if err != nil {
			return nil, fmt.Errorf("getxattr %q %s: %w", p, name, err)
		}
		if out == nil {
			out = map[string]string{}
		}
		out[name] = string(v[:m])
	}
	return out, nil
}

// trashIno is the inode of the trash root in both systems. The hour
// directories under it have inodes above it that each system numbers its
// own way (JuiceFS counts them, Sluice derives them from the hour); no
// name holds them, so a load may renumber them.
const trashIno = 0x7FFFFFFF10000000

// compareManifests reports every path whose observable state differs
// between want (the source volume) and got (the volume it was migrated
// to), field by field, and whether inode numbers were kept.
func compareManifests(t *testing.T, what string, want, got map[string]mfEntry) {
	t.Helper()
	var names []string
	for n := range want {
		names = append(names, n)
	}
	sort.Strings(names)
	var inoChanged []string
	inoCount := 0
	for _, n := range names {
		w := want[n]
		g, ok := got[n]
		if !ok {
			t.Errorf("%s: %q is missing", what, n)
			continue
		}
		if w.Ino != g.Ino && !(w.Ino >= trashIno && g.Ino >= trashIno) {
			if len(inoChanged) < 5 {
				inoChanged = append(inoChanged, fmt.Sprintf("%q: %d became %d", n, w.Ino, g.Ino))
			}
			inoCount++
		}
		if n == "." {
			// Atime of the root is touched by the walk itself on some mounts.
			w.Atime, g.Atime = unix.Timespec{}, unix.Timespec{}
			if d := int(w.Nlink) - int(g.Nlink); d == 1 || d == -1 {
				// Known and kept: Sluice counts /.trash, which both list
				// in the root, among the root's subdirectories; JuiceFS
				// does not.
				t.Logf("%s: the root has %d links, %d on the source (Sluice counts .trash, JuiceFS does not)", what, g.Nlink, w.Nlink)
				w.Nlink = g.Nlink
			}
		}
		if w.Mode&unix.S_IFMT == unix.S_IFDIR {
			// The length of a directory is not carried by a dump.
			w.Size, g.Size = 0, 0
		}
		if !reflect.DeepEqual(w, g) {
			wv, gv := reflect.ValueOf(w), reflect.ValueOf(g)
			var diffs []string
			for i := 0; i < wv.NumField(); i++ {
				f := wv.Type().Field(i)
				if !f.IsExported() || f.Name == "Ino" {
					continue
				}
				if !reflect.DeepEqual(wv.Field(i).Interface(), gv.Field(i).Interface()) {
					diffs = append(diffs, fmt.Sprintf("%s: want %v, got %v", f.Name, fmtField(wv.Field(i)), fmtField(gv.Field(i))))
				}
			}
			if len(diffs) > 0 {
				t.Errorf("%s: %q differs:\n\t%s", what, n, strings.Join(diffs, "\n\t"))
			}
		}
	}
	for n := range got {
		if _, ok := want[n]; !ok {
			t.Errorf("%s: %q appeared", what, n)
		}
	}
	if inoCount > 0 {
		t.Errorf("%s: %d of %d entries have another inode number (a load must keep them: trash names hold them): %s",
			what, inoCount, len(want), strings.Join(inoChanged, "; "))
	}
}

func fmtField(v reflect.Value) string {
	switch x := v.Interface().(type) {
	case uint32:
		return fmt.Sprintf("%d (%#o)", x, x)
	case unix.Timespec:
		return fmt.Sprintf("%d.%09d", x.Sec, x.Nsec)
	case string:
		return fmt.Sprintf("%q", x)
	case map[string]string:
		return fmt.Sprintf("%q", x)
	}
	return fmt.Sprint(v.Interface())
}

// ---------------------------------------------------------------- dumps

// dumpSetting reads the Setting of a dump file (plain or .gz).
func dumpSetting(t *testing.T, path string) map[string]any {
	t.Helper()
	var r io.Reader
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r = f
	if strings.HasSuffix(path, ".gz") {
		if r, err = gzip.NewReader(f); err != nil {
			t.Fatal(err)
		}
	}
	var d struct{ Setting map[string]any }
	if err := json.NewDecoder(r).Decode(&d); err != nil {
		t.Fatalf("decode dump %s: %v", path, err)
	}
	return d.Setting
}

// statusSetting is the Setting of `status`'s JSON output (sluice or
// juicefs).
func statusSetting(t *testing.T, out string) map[string]any {
	t.Helper()
	i := strings.Index(out, "{")
	var s struct{ Setting map[string]any }
	if i < 0 || json.Unmarshal([]byte(out[i:]), &s) != nil {
		t.Fatalf("status printed no JSON:\n%s", out)
	}
	return s.Setting
}

// loadIntoSluice loads dump into a fresh metadata namespace on engine
// (for SQLite, in dir/sub) and returns the volume on bucket.
func loadIntoSluice(t *testing.T, engine, dir, sub, bucket, dump string) *volume {
	t.Helper()
	if err := os.MkdirAll(filepath.Join(dir, sub), 0o755); err != nil {
		t.Fatal(err)
	}
	v := &volume{dir: filepath.Join(dir, sub), metaURL: metaURL(t, engine, filepath.Join(dir, sub)), bucket: bucket,
		mnt: filepath.Join(dir, sub, "mnt"), log: filepath.Join(dir, sub, "mount.log")}
	mustSluice(t, "load", v.metaURL, dump)
	return v
}

// tryMount mounts v as v.mount does, returning the result instead of
// failing the test.
func tryMount(t *testing.T, v *volume) result {
	t.Helper()
	if err := os.MkdirAll(v.mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	r := sluice(t, "mount", "-d", v.metaURL, v.mnt, "--log", v.log, "--cache-dir", filepath.Join(v.dir, "cache-mnt"))
	if r.code == 0 {
		t.Cleanup(func() {
			if mounted(v.mnt) {
				if r := sluice(t, "umount", v.mnt); r.code != 0 {
					sluice(t, "umount", "--force", v.mnt)
				}
			}
		})
	}
	return r
}

// tryJuicefsMount mounts as mountJuicefs does, returning the result
// instead of failing the test.
func tryJuicefsMount(t *testing.T, bin, metaURL, mnt, dir string) result {
	t.Helper()
	if err := os.MkdirAll(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	base := filepath.Base(mnt)
	r := juicefs(t, bin, "mount", "-d", "--no-usage-report", "--backup-meta", "0", "--enable-xattr", "--no-syslog",
		"--cache-dir", filepath.Join(dir, "jfs-cache-"+base), "--log", filepath.Join(dir, "juicefs-"+base+".log"), metaURL, mnt)
	if r.code == 0 {
		t.Cleanup(func() {
			if mounted(mnt) {
				if r := juicefs(t, bin, "umount", mnt); r.code != 0 {
					juicefs(t, bin, "umount", "--force", mnt)
				}
			}
		})
	}
	return r
}

// unsealJuiceFSSecret opens a setting JuiceFS sealed with its volume's
// UUID (pkg/meta/config.go, Format.Encrypt, for the default algorithms):
// base64 of a 12-byte nonce and AES-GCM ciphertext under MD5(UUID).
func unsealJuiceFSSecret(t *testing.T, uuid, sealed string) string {
	t.Helper()
	buf, err := base64.StdEncoding.DecodeString(sealed)
	if err != nil {
		t.Fatalf("sealed secret: %v", err)
	}
	key := md5.Sum([]byte(uuid))
	block, err := aes.NewCipher(key[:])
	if err != nil {
		t.Fatal(err)
	}
	gcm, err := cipher.NewGCM(block)
	if err != nil {
		t.Fatal(err)
	}
	plain, err := gcm.Open(nil, buf[:gcm.NonceSize()], buf[gcm.NonceSize():], nil)
	if err != nil {
		t.Fatalf("unseal the secret with the volume UUID: %v", err)
	}
	return string(plain)
}

// sameSetting compares a setting as the two systems write it: an absent
// field, false, 0, "" and "none" are the same.
func sameSetting(a, b any) bool {
	norm := func(v any) string {
		switch s := fmt.Sprint(v); s {
		case "<nil>", "false", "0", "", "none":
			return ""
		default:
			return s
		}
	}
	return norm(a) == norm(b)
}

// readBack is what a migrated volume must still do: take new writes
// without disturbing the migrated files (a slice id or an inode number
// handed out again would), and delete a file whose slices another file
// shares without losing the other's data.
func readBack(t *testing.T, mnt string) {
	t.Helper()
	data := newRand(99).bytes(5<<20 + 77)
	write(t, filepath.Join(mnt, "written-after-migration"), data)
	if err := os.Mkdir(filepath.Join(mnt, "dir-after-migration"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(mnt, "files/five-mb")); err != nil {
		t.Fatal(err)
	}
	if got, err := os.ReadFile(filepath.Join(mnt, "written-after-migration")); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("a file written after the migration reads back wrong (%d bytes, %v)", len(got), err)
	}
}

// afterReadBack is want as readBack leaves it.
func afterReadBack(t *testing.T, want map[string]mfEntry, got map[string]mfEntry) map[string]mfEntry {
	t.Helper()
	out := map[string]mfEntry{}
	for k, v := range want {
		out[k] = v
	}
	delete(out, "files/five-mb")
	for _, k := range []string{".", "files", "written-after-migration", "dir-after-migration"} {
		if g, ok := got[k]; ok {
			out[k] = g // changed by readBack itself
		}
	}
	if g, ok := got["written-after-migration"]; ok && g.Sum != fmt.Sprintf("%x", sha256.Sum256(newRand(99).bytes(5<<20+77))) {
		t.Errorf("written-after-migration reads back wrong after a remount")
	}
	return out
}

// ---------------------------------------------------------------- tests

// migration is one volume setting both directions are tried with.
type migration struct {
	name       string
	format     []string // format flags, the same for both systems
	passphrase string   // of the RSA key, when the volume is encrypted
	rsa        bool     // encrypt with a fresh RSA key (--encrypt-rsa-key)
	opts       treeOpts
	dumpName   string // dump file name: .json, .json.gz
}

var migrations = []migration{
	{name: "plain", opts: treeOpts{big: true, trash: true}, dumpName: "dump.json"},
	{name: "hash-prefix", format: []string{"--hash-prefix"}, dumpName: "dump.json.gz"},
	{name: "lz4", format: []string{"--compress", "lz4"}, dumpName: "dump.json"},
	{name: "zstd", format: []string{"--compress", "zstd", "--hash-prefix"}, dumpName: "dump.json"},
	{name: "rsa-aes256gcm", rsa: true, dumpName: "dump.json"},
	{name: "rsa-passphrase-chacha20-lz4", rsa: true, passphrase: "s3cret words",
		format: []string{"--encrypt-algo", "chacha20-rsa", "--compress", "lz4"}, dumpName: "dump.json"},
}

// formatArgs returns m's format flags for a volume in dir, writing its RSA
// key there and setting the passphrase variables both systems read.
func (m migration) formatArgs(t *testing.T, dir string) []string {
	t.Helper()
	args := append([]string(nil), m.format...)
	if m.rsa {
		args = append(args, "--encrypt-rsa-key", writeRSAKey(t, dir, "key.pem", m.passphrase))
	}
	// JuiceFS reads JFS_RSA_PASSPHRASE, Sluice SLUICE_RSA_PASSPHRASE.
	t.Setenv("JFS_RSA_PASSPHRASE", m.passphrase)
	t.Setenv("SLUICE_RSA_PASSPHRASE", m.passphrase)
	if m.opts.trash {
		return append(args, "--trash-days", "1")
	}
	return append(args, "--trash-days", "0")
}

// TestJuiceFSToSluice formats and fills a JuiceFS volume, dumps its
// metadata with `juicefs dump`, loads the dump with `sluice load` and
// mounts the same bucket with Sluice: every path, byte and attribute must
// be the same, fsck must find every block, and the volume must take new
// writes.
func TestJuiceFSToSluice(t *testing.T) {
	for _, m := range migrations {
		t.Run(m.name, func(t *testing.T) { juicefsToSluice(t, m, "sqlite3") })
	}
}

// TestJuiceFSToSluiceRedis loads a JuiceFS dump into Redis.
func TestJuiceFSToSluiceRedis(t *testing.T) {
	juicefsToSluice(t, migration{name: "redis", format: []string{"--compress", "lz4"}, dumpName: "dump.json"}, "redis")
}

func juicefsToSluice(t *testing.T, m migration, engine string) {
	bin := juicefsPeer(t)
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	jv := newJFSVolume(t, bin, dir, m.formatArgs(t, dir)...)
	mountJuicefs(t, bin, jv.metaURL, jv.mnt, dir)
	fillTree(t, jv.mnt, m.opts)
	want := manifest(t, jv.mnt)
	wantTrash := trashManifest(t, jv.mnt)
	if m.opts.trash && len(wantTrash) < 3 {
		t.Fatal("JuiceFS shows nothing in its trash after a delete")
	}
	umountJuicefs(t, bin, jv.metaURL, jv.mnt)

	dump := filepath.Join(dir, m.dumpName)
	mustJuicefs(t, bin, "dump", jv.metaURL, dump)
	setting := dumpSetting(t, dump)

	sv := loadIntoSluice(t, engine, dir, "sluice", jv.bucket, dump)
	got := statusSetting(t, mustSluice(t, "status", sv.metaURL))
	for _, k := range []string{"Name", "UUID", "Storage", "Bucket", "BlockSize", "Compression", "HashPrefix", "EncryptAlgo", "TrashDays"} {
		if k == "EncryptAlgo" && !m.rsa {
			continue // JuiceFS writes its default algorithm on every volume
		}
		if !sameSetting(got[k], setting[k]) {
			t.Errorf("setting %s: JuiceFS dumped %v, Sluice loaded %v", k, setting[k], got[k])
		}
	}
	if sealed, _ := setting["KeyEncrypted"].(bool); m.rsa && !sealed {
		t.Errorf("JuiceFS dumped an unsealed EncryptKey: the load's unsealing went untested")
	}
	if r := tryMount(t, sv); r.code != 0 {
		t.Fatalf("sluice mount of the loaded volume: exit %d\n%s", r.code, r.stderr)
	}
	compareManifests(t, "JuiceFS -> Sluice", want, manifest(t, sv.mnt))
	gotTrash := trashManifest(t, sv.mnt)
	if gotTrash == nil && len(wantTrash) == 1 {
		// JuiceFS shows an empty .trash even when the trash is off;
		// Sluice makes it on first use.
		delete(wantTrash, ".")
	}
	compareManifests(t, "JuiceFS -> Sluice, trash", wantTrash, gotTrash)
	sv.umount(t)
	sv.wantFsckClean(t)

	// New writes on the migrated volume, then a mount with a fresh cache:
	// everything must come from the bucket.
	sv.mount(t)
	readBack(t, sv.mnt)
	sv.umount(t)
	// An in-memory cache: fresh, and nothing left writing into the test's
	// directory while it is removed (seen once with a second cache dir).
	sv.mount(t, "--cache-dir", "memory")
	after := manifest(t, sv.mnt)
	compareManifests(t, "JuiceFS -> Sluice, after new writes", afterReadBack(t, want, after), after)
	sv.umount(t)
	sv.wantFsckClean(t)
}

// TestSluiceToJuiceFS formats and fills a Sluice volume, dumps it with
// `sluice dump`, loads the dump with `juicefs load` and mounts the same
// bucket with JuiceFS: every path, byte and attribute must be the same,
// `juicefs fsck` must find every block, and the volume must take new
// writes.
func TestSluiceToJuiceFS(t *testing.T) {
	for _, m := range migrations {
		t.Run(m.name, func(t *testing.T) { sluiceToJuiceFS(t, m, "sqlite3") })
	}
}

func sluiceToJuiceFS(t *testing.T, m migration, engine string) {
	bin := juicefsPeer(t)
	keyDir := t.TempDir()
	sv := newVolumeOn(t, engine, m.formatArgs(t, keyDir)...)
	dir := sv.dir
	sv.mount(t)
	fillTree(t, sv.mnt, m.opts)
	want := manifest(t, sv.mnt)
	wantTrash := trashManifest(t, sv.mnt)
	if m.opts.trash && len(wantTrash) < 3 {
		t.Fatal("Sluice shows nothing in its trash after a delete")
	}
	sv.umount(t)

	dump := filepath.Join(dir, m.dumpName)
	mustSluice(t, "dump", sv.metaURL, dump)
	setting := dumpSetting(t, dump)
	if b, _ := setting["Bucket"].(string); setting["Storage"] == "file" && !strings.HasSuffix(b, "/") {
		// JuiceFS's file storage takes a bucket without a trailing slash
		// as DIR plus a key prefix and would fail every read.
		t.Errorf("sluice dump wrote Bucket %q: JuiceFS needs the trailing '/' of a directory", b)
	}
	if m.rsa {
		// The dump seals EncryptKey with the volume's UUID, as JuiceFS
		// reads it; unsealed, it is the PEM the volume was formatted with.
		if setting["KeyEncrypted"] != true {
			t.Errorf("sluice dump left EncryptKey unsealed: KeyEncrypted %v", setting["KeyEncrypted"])
		} else if pem := unsealJuiceFSSecret(t, setting["UUID"].(string), setting["EncryptKey"].(string)); !strings.HasPrefix(pem, "-----BEGIN") {
			t.Errorf("sluice dump's sealed EncryptKey unseals to %.40q, not a PEM key", pem)
		}
	}

	jmeta := "sqlite3://" + filepath.Join(dir, "juicefs.db")
	mustJuicefs(t, bin, "load", jmeta, dump)
	got := statusSetting(t, mustJuicefs(t, bin, "status", jmeta))
	for _, k := range []string{"Name", "UUID", "Storage", "Bucket", "BlockSize", "Compression", "HashPrefix", "EncryptAlgo", "TrashDays"} {
		if k == "EncryptAlgo" && !m.rsa {
			continue
		}
		if !sameSetting(got[k], setting[k]) {
			t.Errorf("setting %s: Sluice dumped %v, JuiceFS loaded %v", k, setting[k], got[k])
		}
	}
	jmnt := filepath.Join(dir, "jfs-mnt")
	if r := tryJuicefsMount(t, bin, jmeta, jmnt, dir); r.code != 0 {
		t.Fatalf("juicefs mount of the loaded volume: exit %d\n%s", r.code, tail(r.stderr, 20))
	}
	compareManifests(t, "Sluice -> JuiceFS", want, manifest(t, jmnt))
	gotTrash := trashManifest(t, jmnt)
	if wantTrash == nil && len(gotTrash) == 1 {
		delete(gotTrash, ".") // JuiceFS shows an empty .trash even when the trash is off
	}
	compareManifests(t, "Sluice -> JuiceFS, trash", wantTrash, gotTrash)
	umountJuicefs(t, bin, jmeta, jmnt)
	if r := juicefs(t, bin, "fsck", jmeta); r.code != 0 {
		t.Errorf("juicefs fsck of the migrated volume: exit %d\n%s", r.code, tail(r.stderr, 30))
	}

	mountJuicefs(t, bin, jmeta, jmnt, dir)
	readBack(t, jmnt)
	umountJuicefs(t, bin, jmeta, jmnt)
	jmnt2 := filepath.Join(dir, "jfs-mnt-2") // and so a fresh cache
	mountJuicefs(t, bin, jmeta, jmnt2, dir)
	after := manifest(t, jmnt2)
	compareManifests(t, "Sluice -> JuiceFS, after new writes", afterReadBack(t, want, after), after)
	umountJuicefs(t, bin, jmeta, jmnt2)
}
