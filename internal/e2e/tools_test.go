package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/sluicefs/sluice/internal/control"
)

// The tools that work through a mount's control channel: info, summary,
// warmup and rmr, run as commands against real mounts.

// infoJSON runs `sluice info --json ARGS...` and decodes its output.
func infoJSON(t *testing.T, args ...string) []control.InfoResult {
	t.Helper()
	out := mustSluice(t, append([]string{"info", "--json"}, args...)...)
	var res []control.InfoResult
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("info --json output: %v\n%s", err, out)
	}
	return res
}

// sizedTree makes, under dir, the files of sizes (relative path to
// length), creating their directories, and returns the total length.
func sizedTree(t *testing.T, dir string, sizes map[string]int) int64 {
	t.Helper()
	var total int64
	for name, n := range sizes {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		write(t, p, newRand(uint64(n)).bytes(n))
		total += int64(n)
	}
	return total
}

// TestInfoFileRaw: info of a file of three blocks shows one chunk of one
// slice whose blocks are in the bucket under the keys it names.
func TestInfoFileRaw(t *testing.T) {
	v := newVolume(t, "--block-size", "1M")
	v.mount(t)
	const size = 3<<20 - 100 // three blocks, the last short
	write(t, v.path("f"), newRand(1).bytes(size))
	res := infoJSON(t, "--raw", v.path("f"))
	if len(res) != 1 {
		t.Fatalf("info of one path returned %d results", len(res))
	}
	r := res[0]
	if r.Type != "file" || r.Length != size || uint64(r.Ino) != inode(t, v.path("f")) || r.Nlink != 1 || r.Mode != 0o644 {
		t.Errorf("info = %+v, want a 0644 file of %d bytes", r, size)
	}
	if len(r.Chunks) != 1 || r.Chunks[0].Index != 0 || len(r.Chunks[0].Slices) != 1 {
		t.Fatalf("chunks = %+v, want one chunk of one slice", r.Chunks)
	}
	s := r.Chunks[0].Slices[0]
	if s.Len != size || s.Size != size || s.Pos != 0 || s.Off != 0 || len(s.Blocks) != 3 {
		t.Fatalf("slice = %+v, want all %d bytes in 3 blocks", s, size)
	}
	var keys []string
	for i, b := range s.Blocks {
		if want := min(1<<20, size-i<<20); b.Len != want {
			t.Errorf("block %d is %d bytes, want %d", i, b.Len, want)
		}
		if _, err := os.Stat(filepath.Join(v.bucket, filepath.FromSlash(b.Key))); err != nil {
			t.Errorf("block %s is not in the bucket: %v", b.Key, err)
		}
		keys = append(keys, strings.TrimPrefix(b.Key, "vol/"))
	}
	if got := v.blockKeys(t); !slices.Equal(got, keys) {
		t.Errorf("bucket holds %q, info names %q", got, keys)
	}
	// The text form says the same.
	out := mustSluice(t, "info", "--raw", v.path("f"))
	for _, want := range []string{v.path("f") + ":\n", "type:    file", "mode:    -rw-r--r-- (0644)",
		fmt.Sprintf("length:  3.0 MiB (%d bytes)", size), "chunks:  1", "chunk 0 (bytes 0 to 67108864): 1 slice",
		fmt.Sprintf("off 0, len %d", size), s.Blocks[2].Key + " (" + fmt.Sprint(s.Blocks[2].Len) + " bytes)"} {
		if !strings.Contains(out, want) {
			t.Errorf("info --raw output lacks %q:\n%s", want, out)
		}
	}
	// A symbolic link is described itself.
	if err := os.Symlink("f", v.path("l")); err != nil {
		t.Fatal(err)
	}
	if l := infoJSON(t, v.path("l"))[0]; l.Type != "symlink" || l.Target != "f" || len(l.Chunks) != 0 {
		t.Errorf("info of a symlink = %+v, want the link to f", l)
	}
}

// TestInfoRecursive: info -r of a directory counts its files, directories,
// bytes and entries.
func TestInfoRecursive(t *testing.T) {
	v := newVolume(t)
	v.mount(t)
	sizes := map[string]int{"a": 1000, "b": 0, "s/c": 5000, "s/t/d": 123456, "s/t/e": 1, "u/f": 77}
	total := sizedTree(t, v.path("d"), sizes)
	if err := os.Mkdir(v.path("d/empty"), 0o755); err != nil {
		t.Fatal(err)
	}
	r := infoJSON(t, "-r", v.path("d"))[0]
	want := control.Totals{Files: 6, Dirs: 5, Length: total} // d, s, s/t, u, empty
	if r.Type != "directory" || r.Tree == nil || *r.Tree != want || r.Entries == nil || *r.Entries != 5 {
		t.Fatalf("info -r = %+v (tree %+v), want %+v and 5 entries", r, r.Tree, want)
	}
	out := mustSluice(t, "info", "-r", v.path("d"))
	for _, w := range []string{"entries: 5\n", "files:   6\n", "dirs:    5\n", fmt.Sprintf("(%d bytes)", total)} {
		if !strings.Contains(out, w) {
			t.Errorf("info -r output lacks %q:\n%s", w, out)
		}
	}
	if r := sluice(t, "info", v.path("missing")); r.code == 0 || !strings.Contains(r.stderr, "missing") {
		t.Errorf("info of a missing path: exit %d, %s", r.code, r.stderr)
	}
}

// TestSummaryTree builds a tree of known sizes and checks the summary's
// figures per directory, its depth and its entries per directory.
func TestSummaryTree(t *testing.T) {
	v := newVolume(t)
	v.mount(t)
	sizedTree(t, v.path("top"), map[string]int{
		"big": 300000, "small": 10,
		"a/x": 100000, "a/y": 50000, "a/aa/z": 20000,
		"b/p": 1000, "b/q": 2000,
		"c/r": 5,
	})
	var res control.SummaryResult
	out := mustSluice(t, "summary", "--json", "--depth", "1", "--entries", "3", v.path("top"))
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("summary --json: %v\n%s", err, out)
	}
	var got []string
	for _, n := range append([]*control.SummaryNode{res.Tree}, res.Tree.Children...) {
		got = append(got, fmt.Sprintf("%s:%d:%d:%d:%d", n.Path, n.Length, n.Files, n.Dirs, len(n.Children)))
	}
	want := []string{":473015:8:5:4", "big:300000:1:0:0", "a:170000:3:2:0", "b:3000:2:1:0", "...:15:2:1:0"}
	if !slices.Equal(got, want) {
		t.Errorf("summary --depth 1 --entries 3:\n got %q\nwant %q", got, want)
	}

	out = mustSluice(t, "summary", "--depth", "2", "--entries", "2", v.path("top"))
	rows := regexp.MustCompile(`(?m)^(\S+(?: \(\d+ more\))?) +([0-9.]+ (?:[KMG]i)?B) +(\d+) +(\d+)$`).FindAllStringSubmatch(out, -1)
	var table []string
	for _, r := range rows {
		table = append(table, strings.TrimPrefix(r[1], v.path("top"))+" "+r[2]+" "+r[3]+" "+r[4])
	}
	wantTable := []string{
		"/ 461.9 KiB 8 5",
		"/big 293.0 KiB 1 0",
		"/a/ 166.0 KiB 3 2",
		"/a/x 97.7 KiB 1 0",
		"/a/y 48.8 KiB 1 0",
		"/a/... (1 more) 19.5 KiB 1 1",
		"/... (3 more) 2.9 KiB 4 2",
	}
	if !strings.HasPrefix(out, "PATH ") || !slices.Equal(table, wantTable) {
		t.Errorf("summary table:\n%s\nparsed %q\nwant %q", out, table, wantTable)
	}

	out = mustSluice(t, "summary", "--csv", "--depth", "0", v.path("top/a"))
	if want := "path,size,files,dirs\n" + v.path("top/a") + "/,170000,3,2\n"; out != want {
		t.Errorf("summary --csv --depth 0:\n%s\nwant:\n%s", out, want)
	}
}

// warmupCheck runs `sluice warmup --check --json` on paths and returns
// the total.
func warmupCheck(t *testing.T, paths ...string) control.WarmupTotals {
	t.Helper()
	out := mustSluice(t, append([]string{"warmup", "--check", "--json"}, paths...)...)
	var res control.WarmupResult
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("warmup --check --json: %v\n%s", err, out)
	}
	return res.Total
}

// TestWarmupCheckEvict warms a tree into a mount's disk cache and checks
// the cache with --check after each of warmup and --evict.
func TestWarmupCheckEvict(t *testing.T) {
	v := newVolume(t, "--block-size", "1M")
	v.mount(t, "--cache-partial-only=false")
	total := sizedTree(t, v.path("data"), map[string]int{"a": 2<<20 + 5, "b": 100, "sub/c": 1 << 20})
	write(t, v.path("lone"), newRand(9).bytes(3000))
	list := filepath.Join(t.TempDir(), "list")
	if err := os.WriteFile(list, []byte(v.path("data")+"\n\n"+v.path("lone")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	all := total + 3000
	// File storage is local: a mount never caches what it writes there.
	if got := warmupCheck(t, v.path("data"), v.path("lone")); got.Files != 4 || got.Blocks != 6 || got.Bytes != all || got.Cached != 0 {
		t.Errorf("check of fresh data: %+v, want 4 files, 6 blocks, %d bytes, none cached", got, all)
	}
	out := mustSluice(t, "warmup", "--check", v.path("data"))
	if want := fmt.Sprintf("%s: 0 B of 3.0 MiB cached (0.0%%), 3 files, 5 blocks\n", v.path("data")); out != want {
		t.Errorf("warmup --check:\n%s\nwant:\n%s", out, want)
	}

	if r := sluice(t, "warmup", "--cache-group", v.path("data")); r.code == 0 || !strings.Contains(r.stderr, "no cache group") {
		t.Errorf("warmup --cache-group on a mount in no group: exit %d, %s", r.code, r.stderr)
	}

	out = mustSluice(t, "warmup", "-p", "8", "-f", list)
	if !strings.Contains(out, "warmed up 4 files") || !strings.Contains(out, "in the disk cache") {
		t.Errorf("warmup output: %s", out)
	}
	if got := warmupCheck(t, v.path("data"), v.path("lone")); got.Cached != all || got.Bytes != all {
		t.Errorf("check after warmup: %+v, want all %d bytes cached", got, all)
	}
	out = mustSluice(t, "warmup", "--check", v.path("data"), v.path("lone"))
	if !strings.Contains(out, "(100.0%)") || !strings.Contains(out, "total: ") {
		t.Errorf("warmup --check after warmup:\n%s", out)
	}
	// The blocks are files of the disk cache.
	keys := v.blockKeys(t)
	for _, k := range keys {
		if m, _ := filepath.Glob(filepath.Join(v.dir, "cache-mnt", "*", "raw", filepath.FromSlash(k))); len(m) != 1 {
			t.Errorf("block %s is not in the disk cache", k)
		}
	}

	out = mustSluice(t, "warmup", "--evict", v.path("data"))
	if !strings.Contains(out, "evicted 3.0 MiB of 3 files") {
		t.Errorf("warmup --evict output: %s", out)
	}
	if got := warmupCheck(t, v.path("data")); got.Cached != 0 {
		t.Errorf("check after --evict: %+v, want nothing cached", got)
	}
	if got := warmupCheck(t, v.path("lone")); got.Cached != 3000 {
		t.Errorf("check of a file not evicted: %+v, want its 3000 bytes cached", got)
	}
	if r := sluice(t, "warmup", v.path("data"), v.path("missing")); r.code == 0 || !strings.Contains(r.stderr, "missing") {
		t.Errorf("warmup with a missing path: exit %d, stderr %s", r.code, r.stderr)
	}
}

// rmrTree makes dirs directories under dir holding files files in all,
// some of them nested, and returns the number of entries made (dir
// included).
func rmrTree(t *testing.T, dir string, dirs, files int) int {
	t.Helper()
	n := 1
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	var paths []string
	for i := range dirs {
		d := filepath.Join(dir, fmt.Sprintf("d%02d", i))
		if i%4 == 3 {
			d = filepath.Join(dir, fmt.Sprintf("d%02d", i-1), fmt.Sprintf("n%02d", i))
		}
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, d)
		n++
	}
	for i := range files {
		write(t, filepath.Join(paths[i%len(paths)], fmt.Sprintf("f%04d", i)), []byte(fmt.Sprint(i)))
		n++
	}
	return n
}

// TestRmrTree removes a tree of 2,000 files through the mount, which also
// drops the kernel's cached entries of it, and refuses the mount's root.
func TestRmrTree(t *testing.T) {
	v := newVolume(t)
	// Long kernel caches: the removed tree must vanish from them too.
	v.mount(t, "--entry-cache", "60", "--dir-entry-cache", "60", "--attr-cache", "60")
	n := rmrTree(t, v.path("tree"), 20, 2000)
	write(t, v.path("keep"), []byte("x"))
	deep := filepath.Join(v.path("tree"), "d02", "n03", "f0003")
	if _, err := os.Stat(deep); err != nil {
		t.Fatal(err)
	}
	out := mustSluice(t, "rmr", "-v", v.path("tree"))
	if want := fmt.Sprintf("%s: removed %d entries\n", v.path("tree"), n); out != want {
		t.Errorf("rmr -v output %q, want %q", out, want)
	}
	for _, p := range []string{deep, filepath.Dir(deep), v.path("tree")} {
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Errorf("stat %s after rmr: %v, want it gone (from the kernel's caches too)", p, err)
		}
	}
	if got := dirNames(t, v.mnt); slices.Contains(got, "tree") || !slices.Contains(got, "keep") {
		t.Errorf("root lists %q after rmr", got)
	}

	r := sluice(t, "rmr", v.mnt)
	if r.code == 0 || !strings.Contains(r.stderr, "refusing to remove the root of a mount") {
		t.Errorf("rmr of the mount's root: exit %d, stderr %q", r.code, r.stderr)
	}
	if r := sluice(t, "rmr", v.mnt+"/."); r.code == 0 {
		t.Errorf("rmr of the mount's root as %s/.: exit 0", v.mnt)
	}
	if got := dirNames(t, v.mnt); !slices.Contains(got, "keep") {
		t.Errorf("root lists %q after a refused rmr", got)
	}
	v.umount(t)
	v.wantFsckClean(t)
}

// TestRmrTrash: on a volume with a trash, rmr moves the files of the tree
// to the trash, as rm -rf does, and removes its directories.
func TestRmrTrash(t *testing.T) {
	v := newVolume(t, "--trash-days", "1")
	v.mount(t)
	const files = 2000
	rmrTree(t, v.path("tree"), 10, files)
	mustSluice(t, "rmr", v.path("tree"))
	if _, err := os.Stat(v.path("tree")); !os.IsNotExist(err) {
		t.Fatalf("stat of the tree after rmr: %v", err)
	}
	trashed := 0
	for _, h := range dirNames(t, v.path(".trash")) {
		for _, name := range dirNames(t, v.path(".trash/"+h)) {
			if !regexp.MustCompile(`^\d+-\d+-f\d{4}$`).MatchString(name) {
				t.Errorf("unexpected entry %s in the trash", name)
			}
			trashed++
		}
	}
	if trashed != files {
		t.Errorf("the trash holds %d files, want the %d of the tree", trashed, files)
	}
}

// TestRmrPermission: rmr by a user who may not remove part of the tree
// removes the rest and fails naming what stayed.
func TestRmrPermission(t *testing.T) {
	requireTool(t, "runuser")
	v := newVolume(t)
	v.mount(t)
	if err := os.Chmod(filepath.Dir(sluiceBin), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(v.path("pub"), 0o777); err != nil {
		t.Fatal(err)
	}
	mine := v.path("pub/mine")
	for _, d := range []string{"locked", "free/sub"} {
		if err := os.MkdirAll(filepath.Join(mine, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write(t, filepath.Join(mine, "locked/f"), []byte("root's"))
	write(t, filepath.Join(mine, "free/sub/g"), []byte("nobody's"))
	for _, p := range []string{mine, filepath.Join(mine, "free"), filepath.Join(mine, "free/sub"), filepath.Join(mine, "free/sub/g")} {
		if err := os.Chown(p, 65534, 65534); err != nil {
			t.Fatal(err)
		}
	}
	out, err := asUser(t, "nobody", sluiceBin+" rmr "+mine)
	if err == nil {
		t.Fatalf("rmr as nobody of a tree holding a directory of root's succeeded:\n%s", out)
	}
	if want := "rmr: " + filepath.Join(mine, "locked/f") + ": permission denied"; !strings.Contains(out, want) {
		t.Errorf("rmr as nobody: output lacks %q:\n%s", want, out)
	}
	if _, err := os.Stat(filepath.Join(mine, "free")); !os.IsNotExist(err) {
		t.Errorf("nobody's own directory after rmr: %v, want it removed", err)
	}
	if _, err := os.Stat(filepath.Join(mine, "locked/f")); err != nil {
		t.Errorf("root's file after nobody's rmr: %v", err)
	}
	// Nor may nobody remove what a directory it cannot write holds.
	if err := os.Mkdir(v.path("closed"), 0o755); err != nil {
		t.Fatal(err)
	}
	write(t, v.path("closed/x"), nil)
	out, err = asUser(t, "nobody", sluiceBin+" rmr "+v.path("closed"))
	if err == nil || !strings.Contains(out, v.path("closed/x")+": permission denied") {
		t.Errorf("rmr as nobody of a directory of root's: %v\n%s", err, out)
	}
	if _, err := os.Stat(v.path("closed/x")); err != nil {
		t.Errorf("root's file after nobody's rmr: %v", err)
	}
}
