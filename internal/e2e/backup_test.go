package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"
)

// backupTimes returns the names of the metadata backups in the bucket of
// volume vol, oldest first, and their times.
func backupTimes(t *testing.T, bucket, vol string) ([]string, []time.Time) {
	t.Helper()
	entries, err := os.ReadDir(filepath.Join(bucket, vol, "meta"))
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), "dump-") && strings.HasSuffix(e.Name(), ".json.gz") {
			names = append(names, e.Name())
		}
	}
	sort.Strings(names)
	times := make([]time.Time, len(names))
	for i, n := range names {
		if times[i], err = time.Parse("2006-01-02-150405", strings.TrimSuffix(strings.TrimPrefix(n, "dump-"), ".json.gz")); err != nil {
			t.Fatalf("backup %s: %v", n, err)
		}
	}
	return names, times
}

// TestBackupMeta fills an encrypted, lz4-compressed volume, mounts it
// twice with a short --backup-meta, and checks that backups appear in the
// bucket's meta/ directory no closer together than the interval although
// two mounts ask, that they are encrypted, and that the newest, copied out
// of the bucket, loads with `sluice load --encrypt-rsa-key` into a new
// engine whose volume mounts on the same bucket with every file intact.
func TestBackupMeta(t *testing.T) {
	keyDir := t.TempDir()
	key := writeRSAKey(t, keyDir, "key.pem", "")
	t.Setenv("SLUICE_RSA_PASSPHRASE", "")
	t.Setenv("JFS_RSA_PASSPHRASE", "")
	v := newVolume(t, "--encrypt-rsa-key", key, "--compress", "lz4")
	v.mount(t, "--backup-meta", "0")
	fillTree(t, v.mnt, treeOpts{})
	want := manifest(t, v.mnt)
	v.umount(t)
	if names, _ := backupTimes(t, v.bucket, "vol"); len(names) != 0 {
		t.Fatalf("--backup-meta 0 backed up: %v", names)
	}

	// Intervals under the minimum are refused.
	if r := sluice(t, "mount", "-d", v.metaURL, v.mnt, "--log", v.log, "--backup-meta", "30s"); r.code == 0 || !strings.Contains(r.stderr, "--backup-meta") {
		t.Fatalf("mount --backup-meta 30s: exit %d, %s; want it refused", r.code, r.stderr)
	}

	const interval = 2 * time.Second
	short := []string{"--backup-meta", interval.String(), "--backup-meta-min", "0"}
	v.mount(t, short...)
	second := filepath.Join(v.dir, "mnt2")
	v.mountAt(t, second, short...)
	eventuallyWithin(t, 30*time.Second, "three backups", func() error {
		if names, _ := backupTimes(t, v.bucket, "vol"); len(names) < 3 {
			return fmt.Errorf("%d backups so far: %v", len(names), names)
		}
		return nil
	})
	mustSluice(t, "umount", second)
	v.umount(t)

	names, times := backupTimes(t, v.bucket, "vol")
	for i := 1; i < len(times); i++ {
		if d := times[i].Sub(times[i-1]); d < interval {
			t.Errorf("backups %s and %s are %v apart, under the interval %v: two mounts backed up at once", names[i-1], names[i], d, interval)
		}
	}
	if log := readFile(t, v.log); !strings.Contains(log, "metadata backup written") {
		t.Errorf("the mount log tells nothing of the backups:\n%s", tail(log, 20))
	}
	newest := filepath.Join(v.bucket, "vol", "meta", names[len(names)-1])
	raw, err := os.ReadFile(newest)
	if err != nil {
		t.Fatal(err)
	}
	if len(raw) > 1 && raw[0] == 0x1f && raw[1] == 0x8b {
		t.Errorf("the backup of an encrypted volume is stored as plain gzip")
	}

	// Restore: copy the object out, load it into a new engine.
	copied := filepath.Join(v.dir, names[len(names)-1])
	if err := os.WriteFile(copied, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	rdir := filepath.Join(v.dir, "restored")
	if err := os.MkdirAll(rdir, 0o755); err != nil {
		t.Fatal(err)
	}
	rv := &volume{dir: rdir, metaURL: "sqlite3://" + filepath.Join(rdir, "meta.db"), bucket: v.bucket,
		mnt: filepath.Join(rdir, "mnt"), log: filepath.Join(rdir, "mount.log")}
	if r := sluice(t, "load", rv.metaURL, copied); r.code == 0 {
		t.Fatalf("load of an encrypted backup without --encrypt-rsa-key succeeded")
	}
	mustSluice(t, "load", "--encrypt-rsa-key", key, rv.metaURL, copied)
	if r := tryMount(t, rv); r.code != 0 {
		t.Fatalf("mount of the restored volume: exit %d\n%s", r.code, r.stderr)
	}
	compareManifests(t, "restored from a backup", want, manifest(t, rv.mnt))
	rv.umount(t)
	rv.wantFsckClean(t)
}
