package dump_test

import (
	"bytes"
	"context"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluicefs/sluice/internal/dump"
	"github.com/sluicefs/sluice/internal/meta"
	"github.com/sluicefs/sluice/internal/meta/engine/mem"
	"github.com/sluicefs/sluice/internal/meta/store"
	"github.com/sluicefs/sluice/internal/meta/store/kvstore"
)

// loadGolden loads testdata/name into a fresh store and opens a client on
// it.
func loadGolden(t *testing.T, name string) (store.Store, *meta.Session, *dump.Report) {
	t.Helper()
	b, err := os.ReadFile("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	st := kvstore.New(mem.New(t.Name()))
	rep, err := dump.Load(context.Background(), st, bytes.NewReader(b), dump.LoadOptions{})
	if err != nil {
		t.Fatalf("load %s: %v", name, err)
	}
	c, err := meta.NewSession(context.Background(), st, meta.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(context.Background()) })
	return st, c, rep
}

func lookup(t *testing.T, c *meta.Session, parent meta.Ino, name string) *meta.Attr {
	t.Helper()
	a, err := c.Lookup(context.Background(), parent, []byte(name))
	if err != nil {
		t.Fatalf("lookup %q: %v", name, err)
	}
	return a
}

func wantCounters(t *testing.T, got, want dump.Counters) {
	t.Helper()
	if got != want {
		t.Errorf("loaded counters %+v, want %+v", got, want)
	}
}

// The example of the spec loads as the spec describes it.
func TestGoldenSpecExample(t *testing.T) {
	_, c, rep := loadGolden(t, "spec-example.json")
	wantCounters(t, rep.Loaded, dump.Counters{UsedSpace: 20480, UsedInodes: 3, NextInode: 5, NextChunk: 3, NextSession: 1})
	if rep.Files != 2 || rep.HardLinks != 1 || rep.Dirs != 2 || rep.Symlinks != 1 {
		t.Errorf("report %+v", rep)
	}
	docs := lookup(t, c, meta.RootIno, "docs")
	a := lookup(t, c, docs.Ino, "a.txt")
	if a.Nlink != 2 || a.Length != 10000 || a.Ino != 3 {
		t.Errorf("a.txt: %+v", a)
	}
	if v, err := c.GetXattr(context.Background(), a.Ino, "user.tag"); err != nil || string(v) != "x y" {
		t.Errorf("xattr %q, %v", v, err)
	}
	s, err := c.ReadChunk(context.Background(), a.Ino, 0)
	if err != nil || len(s) != 2 || s[1].Pos != 4096 || s[1].Id != 2 {
		t.Errorf("chunk %+v, %v", s, err)
	}
	if _, err := c.Lookup(context.Background(), meta.RootIno, []byte(meta.TrashName)); err == nil {
		t.Errorf("an empty trash in the dump made a .trash")
	}
	if root := lookup(t, c, meta.RootIno, "."); root.Nlink != 3 {
		t.Errorf("root has %d links, want 3", root.Nlink)
	}
}

// A dump in the manner of JuiceFS 1.0-1.4: the legacy chunkid key, the
// old nextInode name, holes (id 0), escaped names and targets, a hard
// link under each name, a default ACL, quotas, open and deleted files,
// settings and keys Sluice does not know, and a trash whose hour
// directory has the number JuiceFS gave it.
func TestGoldenJuiceFSQuirks(t *testing.T) {
	st, c, rep := loadGolden(t, "juicefs-quirks.json")
	ctx := context.Background()
	wantCounters(t, rep.Loaded, dump.Counters{UsedSpace: 70029312, UsedInodes: 7, NextInode: 20, NextChunk: 30, NextSession: 7})
	wantDropped := []string{
		"DelFiles", "Quotas", "Sustained", "setting DirStats=true", `setting FutureOption="x"`, "setting Tiers=",
	}
	for _, w := range wantDropped {
		if !slices.ContainsFunc(rep.Dropped, func(d string) bool { return strings.Contains(d, w) }) {
			t.Errorf("report does not say it dropped %q: %q", w, rep.Dropped)
		}
	}
	if len(rep.Notes) == 0 || !strings.Contains(rep.Notes[0], "secret") {
		t.Errorf("report does not note the removed secret: %q", rep.Notes)
	}
	if f := c.Format(); f.SecretKey != "" || f.Name != "legacy" || f.MinClientVersion != "1.1.0-A" || f.Compression != "lz4" {
		t.Errorf("settings %+v", f)
	}

	dir := lookup(t, c, meta.RootIno, "dir")
	if dir.Mode != 0o1777 || dir.Flags&meta.FlagDefaultACL == 0 {
		t.Errorf("dir: %+v", dir)
	}
	f := lookup(t, c, dir.Ino, "a b%\"q\"\xff")
	if f.Nlink != 2 || f.Parent != 0 || f.Length != 70000000 {
		t.Errorf("hard-linked file: %+v", f)
	}
	if l := lookup(t, c, meta.RootIno, "link"); l.Ino != f.Ino {
		t.Errorf("link has inode %d, want %d", l.Ino, f.Ino)
	}
	if v, err := c.GetXattr(ctx, f.Ino, "user.bin"); err != nil || !bytes.Equal(v, []byte{0, 1, 0xff}) {
		t.Errorf("xattr %q, %v", v, err)
	}
	s, err := c.ReadChunk(ctx, f.Ino, 0)
	if err != nil || len(s) != 2 || s[0].Id != 5 || s[1].Id != 0 || s[1].Pos != 100 {
		t.Errorf("chunk 0 (legacy chunkid keys, a hole): %+v, %v", s, err)
	}
	sym := lookup(t, c, dir.Ino, "pct%zz")
	if target, err := c.ReadLink(ctx, sym.Ino); err != nil || string(target) != "../up%XX" {
		t.Errorf("symlink target %q, %v", target, err)
	}
	if dev := lookup(t, c, meta.RootIno, "dev"); dev.Type != store.TypeBlockDev || dev.Rdev != 2049 {
		t.Errorf("device: %+v", dev)
	}
	// JuiceFS's skip-trash bit (32) is kept as Sluice's own flag: 32
	// inside Sluice marks an unfinished truncation.
	if sh := lookup(t, c, meta.RootIno, "shared"); sh.Flags != meta.FlagAppend|meta.FlagSkipTrash {
		t.Errorf("append-only file that skips the trash has flags %#x, want %#x", sh.Flags, meta.FlagAppend|meta.FlagSkipTrash)
	}
	var again bytes.Buffer
	if _, err := dump.Dump(ctx, st, &again, dump.Options{}); err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(again.Bytes(), []byte(`{"inode":9,"flags":34,"type":"regular"`)) {
		t.Errorf("dumped again, the file does not have JuiceFS's flags 34:\n%s", again.Bytes())
	}
	err = st.View(ctx, func(tx store.Tx) error {
		extra, err := tx.SliceRef(7, 8192)
		if err != nil || extra != 1 {
			t.Errorf("slice 7, named by two files, has %d extra references (%v), want 1", extra, err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}

	trash := lookup(t, c, meta.RootIno, meta.TrashName)
	if trash.Mode != 0o555 || trash.Ino != meta.TrashIno {
		t.Errorf("trash: %+v", trash)
	}
	hour := lookup(t, c, trash.Ino, "2024-05-23-05")
	wantHour := meta.TrashIno + 1 + meta.Ino(time.Date(2024, 5, 23, 5, 0, 0, 0, time.UTC).Unix()/3600)
	if hour.Ino != wantHour {
		t.Errorf("trash hour directory has inode %d, want %d (Sluice's number for the hour)", hour.Ino, wantHour)
	}
	lookup(t, c, hour.Ino, "2-10-old.txt")
	if root := lookup(t, c, meta.RootIno, "."); root.Nlink != 4 {
		t.Errorf("root has %d links, want 4 (., .., dir, .trash)", root.Nlink)
	}

	var damages []string
	if _, err := meta.Check(ctx, st, meta.CheckOptions{OnDamage: func(d meta.Damage) { damages = append(damages, d.Msg) }}); err != nil || len(damages) > 0 {
		t.Errorf("check: %v %q", err, damages)
	}
}
