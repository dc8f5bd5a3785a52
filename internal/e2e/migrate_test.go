package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// TestMigrateEngines moves one volume through the metadata engines,
// SQLite → Redis → PostgreSQL → etcd, each step a `sluice dump` of the
// previous engine and a `sluice load` into the next (dump files plain,
// gzip and zstd in turn). After each step the loaded volume is mounted on
// the same bucket: every path must show the same bytes, modes, owners,
// times, link groups, symlink targets and xattrs as the original tree
// (which has a file of more than one 64 MiB chunk, hard links, symlinks,
// xattrs, special files, names that are not UTF-8 and a file in the
// trash), and fsck must find every block. Missing servers skip the test
// (fail it under CI=true) before anything is written.
func TestMigrateEngines(t *testing.T) {
	engines := []string{"sqlite3", "redis", "postgres", "etcd"}
	dumpNames := []string{"dump.json", "dump.json.gz", "dump.json.zst"}
	v := newVolumeOn(t, engines[0], "--trash-days", "1")
	// Every engine's URL first, so that a missing server skips at once.
	steps := []*volume{v}
	for _, engine := range engines[1:] {
		dir := filepath.Join(v.dir, engine)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		steps = append(steps, &volume{dir: dir, metaURL: metaURL(t, engine, dir), bucket: v.bucket,
			mnt: filepath.Join(dir, "mnt"), log: filepath.Join(dir, "mount.log")})
	}

	v.mount(t, "--backup-meta", "0")
	fillTree(t, v.mnt, treeOpts{big: true, trash: true})
	want := manifest(t, v.mnt)
	wantTrash := trashManifest(t, v.mnt)
	if len(wantTrash) < 3 {
		t.Fatal("nothing in the trash after a delete")
	}
	v.umount(t)

	for i := 1; i < len(steps); i++ {
		from, to := steps[i-1], steps[i]
		what := fmt.Sprintf("%s -> %s", engines[i-1], engines[i])
		dump := filepath.Join(v.dir, fmt.Sprintf("step%d-%s", i, dumpNames[(i-1)%len(dumpNames)]))
		mustSluice(t, "dump", from.metaURL, dump)
		mustSluice(t, "load", to.metaURL, dump)
		if r := tryMount(t, to); r.code != 0 {
			t.Fatalf("%s: mount of the loaded volume: exit %d\n%s", what, r.code, r.stderr)
		}
		compareManifests(t, what, want, manifest(t, to.mnt))
		compareManifests(t, what+", trash", wantTrash, trashManifest(t, to.mnt))
		to.umount(t)
		to.wantFsckClean(t)
		t.Logf("%s: %d entries, %d in the trash, via %s (%s)", what, len(want), len(wantTrash), filepath.Base(dump), to.metaURL)
		if t.Failed() {
			t.FailNow() // the next steps would repeat the same differences
		}
	}
}
