// Package dumptest is the dump and load suite every metadata engine runs:
// a volume with every kind of entry survives dump, load into a fresh store
// and dump again byte for byte, the loaded volume works and checks clean,
// and malformed dumps are refused with their position and leave the
// target empty.
package dumptest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluicefs/sluice/internal/dump"
	"github.com/sluicefs/sluice/internal/meta"
	"github.com/sluicefs/sluice/internal/meta/metatest"
	"github.com/sluicefs/sluice/internal/meta/store"
)

// NewStore opens a fresh, empty store, closed at the end of t.
type NewStore func(t *testing.T) store.Store

// Options tune Run.
type Options struct {
	// BigDir is the number of entries of the large directory of the
	// round trip. Default 100,000 (2,000 with -short).
	BigDir int
}

// Run runs the suite on the engine newStore opens.
func Run(t *testing.T, newStore NewStore) { RunOptions(t, newStore, Options{}) }

// RunOptions runs the suite with opts.
func RunOptions(t *testing.T, newStore NewStore, opts Options) {
	if opts.BigDir == 0 {
		opts.BigDir = 100_000
		if testing.Short() {
			opts.BigDir = 2_000
		}
	}
	t.Run("RoundTrip", func(t *testing.T) { testRoundTrip(t, newStore) })
	t.Run("BigDirectory", func(t *testing.T) { testBigDirectory(t, newStore, opts.BigDir) })
	t.Run("Malformed", func(t *testing.T) { testMalformed(t, newStore) })
	t.Run("RefusesVolume", func(t *testing.T) { testRefusesVolume(t, newStore) })
	t.Run("InterruptedLoad", func(t *testing.T) { testInterruptedLoad(t, newStore) })
}

var ctx = context.Background()

// Fill builds a volume with every kind of entry in st through a client:
// nested and empty directories, files with several chunks and
// overlapping slices, a sparse file and one of the largest size, hard links in one and in two
// directories, symlinks (one with a target that is not UTF-8), a fifo, a
// socket and devices, extended attributes with binary values, ACLs, names
// that are not UTF-8 or need escaping, set times and owners, and a file
// in the trash.
func Fill(t *testing.T, st store.Store) {
	t.Helper()
	f := &meta.Format{Name: "dumpvol", UUID: "0c131b7f-c11e-4a06-a988-1a74a3d74e89", Storage: "file", Bucket: "/tmp/dumpvol/",
		BlockSize: 4096, Compression: "lz4", TrashDays: 1, EnableACL: true, SecretKey: "s3cret"}
	if _, err := meta.FormatVolume(ctx, st, f); err != nil {
		t.Fatalf("format: %v", err)
	}
	clock := time.Date(2026, 5, 1, 12, 0, 0, 123, time.UTC)
	c, err := meta.NewSession(ctx, st, meta.Config{Now: func() time.Time { return clock }})
	if err != nil {
		t.Fatalf("client: %v", err)
	}
	defer func() {
		if err := c.Close(ctx); err != nil {
			t.Errorf("close client: %v", err)
		}
	}()
	must := func(what string, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	mk := func(parent meta.Ino, name string, nn meta.NewNode) *meta.Attr {
		t.Helper()
		a, err := c.Mknod(ctx, parent, []byte(name), nn)
		must("mknod "+name, err)
		return a
	}
	slice := func(pos, n uint32) meta.Slice {
		t.Helper()
		id, err := c.NewSliceID(ctx)
		must("slice id", err)
		return meta.Slice{Pos: pos, Id: id, Size: n, Len: n}
	}
	write := func(ino meta.Ino, idx uint32, s meta.Slice) {
		t.Helper()
		_, err := metatest.Write(ctx, c, ino, idx, s)
		must("write", err)
	}
	dir := func(parent meta.Ino, name string) meta.Ino {
		return mk(parent, name, meta.NewNode{Type: store.TypeDir, Mode: 0o755}).Ino
	}
	file := func(parent meta.Ino, name string) meta.Ino {
		return mk(parent, name, meta.NewNode{Type: store.TypeFile, Mode: 0o644}).Ino
	}

	a := dir(meta.RootIno, "a")
	b := dir(a, "b")
	dir(meta.RootIno, "empty")
	odd := dir(meta.RootIno, "odd \xff\xfe%41\"q\"\\ name")

	big := file(b, "multichunk")
	write(big, 0, slice(0, 4<<20))
	write(big, 0, slice(1<<20, 100)) // overlaps the first
	s := slice(0, 8192)
	s.Off, s.Len = 100, 4000 // a slice read from inside
	write(big, 0, s)
	write(big, 1, slice(5<<20, 1<<20)) // a second chunk with a hole before it

	sparse := file(a, "sparse")
	write(sparse, 0, slice(0, 10))
	_, err = c.SetAttr(ctx, sparse, meta.SetSize, &meta.Attr{Length: 200 << 20})
	must("truncate up", err)

	// A file as long as a file may be, with data at both ends: its 2^31
	// chunk indexes are not all asked for.
	huge := file(a, "huge")
	write(huge, 0, slice(0, 10))
	write(huge, uint32(meta.MaxFileSize/meta.ChunkSize-1), slice(meta.ChunkSize-10, 10))

	small := file(odd, "\x80bad utf8")
	write(small, 0, slice(0, 10000))
	_, err = c.Link(ctx, small, odd, []byte("same dir link"))
	must("link", err)
	_, err = c.Link(ctx, small, a, []byte("other dir link"))
	must("link", err)

	mk(a, "rel", meta.NewNode{Type: store.TypeSymlink, Target: []byte("b/multichunk")})
	mk(a, "abs", meta.NewNode{Type: store.TypeSymlink, Target: []byte("/abs/\xff target with space")})
	mk(a, "fifo", meta.NewNode{Type: store.TypeFIFO, Mode: 0o600})
	mk(a, "sock", meta.NewNode{Type: store.TypeSocket, Mode: 0o600})
	mk(a, "chr", meta.NewNode{Type: store.TypeCharDev, Mode: 0o600, Rdev: 1<<8 | 3})
	mk(a, "blk", meta.NewNode{Type: store.TypeBlockDev, Mode: 0o600, Rdev: 8<<8 | 1})
	suid := mk(a, "suid", meta.NewNode{Type: store.TypeFile, Mode: 0o4755}).Ino

	must("xattr", c.SetXattr(ctx, small, "user.tag", []byte("x y"), 0))
	must("xattr", c.SetXattr(ctx, small, "user.bin", []byte{0, 1, 0xff, '%', '"'}, 0))
	must("xattr", c.SetXattr(ctx, a, "user.dir", []byte("on a dir"), 0))
	acl := func(r meta.ACLRule) []byte {
		t.Helper()
		x, err := r.Encode()
		must("encode ACL", err)
		return x
	}
	must("acl", c.SetXattr(ctx, b, meta.XattrACLAccess, acl(meta.ACLRule{Owner: 7, Group: 5, Other: 1, Mask: 5, Users: []meta.ACLEntry{{ID: 1234, Perm: 5}}}), 0))
	must("acl", c.SetXattr(ctx, b, meta.XattrACLDefault, acl(meta.ACLRule{Owner: 7, Group: 5, Other: 0, Mask: 7, Groups: []meta.ACLEntry{{ID: 99, Perm: 6}}}), 0))

	_, err = c.SetAttr(ctx, suid, meta.SetUid|meta.SetGid|meta.SetAtime|meta.SetMtime,
		&meta.Attr{Uid: 1000, Gid: 2000, Atime: 1700000000, Atimensec: 5, Mtime: 1600000000, Mtimensec: 999999999})
	must("setattr", err)
	_, err = c.SetAttr(ctx, suid, meta.SetMode, &meta.Attr{Mode: 0o4755}) // after chown, which clears setuid
	must("chmod", err)

	gone := file(a, "to trash")
	write(gone, 0, slice(0, 5000))
	must("unlink", c.Unlink(ctx, a, []byte("to trash")))

	// Deleted for good from the trash: its data waits in the queue.
	doomed := file(a, "doomed")
	write(doomed, 0, slice(0, 3000))
	must("unlink", c.Unlink(ctx, a, []byte("doomed")))
	hour := meta.TrashHourIno(clock)
	must("unlink from the trash", c.Unlink(ctx, hour, []byte(fmt.Sprintf("%d-%d-doomed", a, doomed))))
}

// Dump dumps st and fails t on error.
func Dump(t *testing.T, st store.Store, opts dump.Options) []byte {
	t.Helper()
	var buf bytes.Buffer
	if _, err := dump.Dump(ctx, st, &buf, opts); err != nil {
		t.Fatalf("dump: %v", err)
	}
	return buf.Bytes()
}

// Load loads b into st and fails t on error.
func Load(t *testing.T, st store.Store, b []byte) *dump.Report {
	t.Helper()
	rep, err := dump.Load(ctx, st, bytes.NewReader(b), dump.LoadOptions{})
	if err != nil {
		t.Fatalf("load: %v", err)
	}
	return rep
}

// noDelFiles returns a dump with an empty DelFiles list.
func noDelFiles(b []byte) []byte {
	start := bytes.Index(b, []byte(`"DelFiles": [`))
	if start < 0 {
		return b
	}
	start += len(`"DelFiles": [`)
	end := start + bytes.IndexByte(b[start:], ']')
	return slices.Concat(b[:start], b[end:])
}

// diff describes the first difference of two dumps.
func diff(a, b []byte) string {
	al, bl := strings.Split(string(a), "\n"), strings.Split(string(b), "\n")
	for i := range min(len(al), len(bl)) {
		if al[i] != bl[i] {
			return fmt.Sprintf("line %d:\n first: %s\nsecond: %s", i+1, al[i], bl[i])
		}
	}
	return fmt.Sprintf("lengths differ: %d and %d lines", len(al), len(bl))
}

func testRoundTrip(t *testing.T, newStore NewStore) {
	src := newStore(t)
	Fill(t, src)
	first := Dump(t, src, dump.Options{KeepSecretKey: true})
	if fast := Dump(t, src, dump.Options{KeepSecretKey: true, Fast: true}); !bytes.Equal(first, fast) {
		t.Fatalf("a fast dump of an idle volume differs from a consistent one: %s", diff(first, fast))
	}
	if bytes.Contains(first, []byte(`"SecretKey": "removed"`)) || !bytes.Contains(first, []byte(`"KeyEncrypted": true`)) {
		t.Errorf("--keep-secret-key dump lost the secret")
	}
	if !bytes.Contains(first, []byte(`"DelFiles": [`+"\n"+`    {"inode":`)) {
		t.Errorf("the dump lists no file waiting for deletion:\n%s", first)
	}
	if !bytes.Contains(first, []byte(`{"index":2147483647,`)) {
		t.Errorf("the dump lacks the last chunk of the largest file")
	}
	// The settings carry the metadata version of the format's layout,
	// which JuiceFS loads, whatever version the volume itself has.
	if !bytes.Contains(first, []byte(`"MetaVersion": 1,`)) {
		t.Errorf("the dump's settings do not say metadata version 1:\n%.600s", first)
	}
	if red := Dump(t, src, dump.Options{}); !bytes.Contains(red, []byte(`"SecretKey": "removed"`)) {
		t.Errorf("a default dump does not hide the secret")
	}

	dst := newStore(t)
	rep := Load(t, dst, first)
	second := Dump(t, dst, dump.Options{KeepSecretKey: true})
	// Load does not carry the deletion queue over (it names data of
	// inodes no longer in the tree; gc reclaims it): the rest is equal.
	if want := noDelFiles(first); !bytes.Equal(want, second) {
		t.Fatalf("dump, load, dump changed the dump: %s", diff(want, second))
	}
	if !slices.ContainsFunc(rep.Dropped, func(d string) bool { return strings.Contains(d, "DelFiles") }) {
		t.Errorf("the load report does not say the deletion queue was dropped: %q", rep.Dropped)
	}
	if rep.HardLinks != 2 || rep.Loaded.UsedInodes != rep.Dumped.UsedInodes || rep.Loaded.UsedSpace != rep.Dumped.UsedSpace {
		t.Errorf("load report: %+v", rep)
	}
	var damages []string
	res, err := meta.Check(ctx, dst, meta.CheckOptions{OnDamage: func(d meta.Damage) { damages = append(damages, fmt.Sprint(d)) }})
	if err != nil {
		t.Fatalf("check the loaded volume: %v", err)
	}
	if res.Damages != 0 {
		t.Fatalf("the loaded volume has damage: %v", damages)
	}
	checkLoaded(t, dst)

	sub := Dump(t, src, dump.Options{Subdir: "a/b"})
	if !bytes.Contains(sub, []byte(`"multichunk"`)) || bytes.Contains(sub, []byte(`"sparse"`)) {
		t.Errorf("a dump of a/b holds the wrong tree:\n%s", sub)
	}
	sst := newStore(t)
	Load(t, sst, sub)
	if _, err := meta.Check(ctx, sst, meta.CheckOptions{OnDamage: func(d meta.Damage) { t.Errorf("subdir load: %v", d) }}); err != nil {
		t.Fatal(err)
	}
}

// checkLoaded reads the loaded volume through a client.
func checkLoaded(t *testing.T, st store.Store) {
	t.Helper()
	c, err := meta.NewSession(ctx, st, meta.Config{})
	if err != nil {
		t.Fatalf("client on the loaded volume: %v", err)
	}
	defer c.Close(ctx)
	look := func(parent meta.Ino, name string) *meta.Attr {
		t.Helper()
		a, err := c.Lookup(ctx, parent, []byte(name))
		if err != nil {
			t.Fatalf("lookup %q: %v", name, err)
		}
		return a
	}
	if f := c.Format(); f.SecretKey != "s3cret" || f.KeyEncrypted {
		t.Errorf("loaded settings: secret %q, key encrypted %v", f.SecretKey, f.KeyEncrypted)
	}
	odd := look(meta.RootIno, "odd \xff\xfe%41\"q\"\\ name").Ino
	small := look(odd, "\x80bad utf8")
	if small.Nlink != 3 || small.Length != 10000 {
		t.Errorf("hard-linked file: %+v", small)
	}
	v, err := c.GetXattr(ctx, small.Ino, "user.bin")
	if err != nil || !bytes.Equal(v, []byte{0, 1, 0xff, '%', '"'}) {
		t.Errorf("binary xattr: %q, %v", v, err)
	}
	// A loaded node flags its attributes (meta.FlagXattrs): listing
	// them must not take the flag's word for "none".
	if names, err := c.ListXattr(ctx, small.Ino); err != nil || !slices.Equal(names, []string{"user.bin", "user.tag"}) {
		t.Errorf("file's xattrs listed after load: %q, %v", names, err)
	}
	a := look(meta.RootIno, "a").Ino
	if names, err := c.ListXattr(ctx, a); err != nil || !slices.Equal(names, []string{"user.dir"}) {
		t.Errorf("directory's xattrs listed after load: %q, %v", names, err)
	}
	abs := look(a, "abs")
	target, err := c.ReadLink(ctx, abs.Ino)
	if err != nil || string(target) != "/abs/\xff target with space" {
		t.Errorf("symlink target %q, %v", target, err)
	}
	if chr := look(a, "chr"); chr.Rdev != 1<<8|3 || chr.Type != store.TypeCharDev {
		t.Errorf("char device: %+v", chr)
	}
	if s := look(a, "suid"); s.Mode != 0o4755 || s.Uid != 1000 || s.Mtimensec != 999999999 {
		t.Errorf("suid file: %+v", s)
	}
	// The loaded volume takes new files with fresh inodes and slices.
	n, err := c.Mknod(ctx, a, []byte("new"), meta.NewNode{Type: store.TypeFile, Mode: 0o644})
	if err != nil {
		t.Fatalf("create in the loaded volume: %v", err)
	}
	var maxIno meta.Ino
	for _, name := range []string{"sparse", "rel", "abs", "fifo", "suid"} {
		maxIno = max(maxIno, look(a, name).Ino)
	}
	if n.Ino <= maxIno {
		t.Errorf("new inode %d reuses a loaded one (up to %d)", n.Ino, maxIno)
	}
}

func testBigDirectory(t *testing.T, newStore NewStore, n int) {
	var buf bytes.Buffer
	if err := Generate(&buf, GenOptions{Files: n, PerDir: n, Links: 10}); err != nil {
		t.Fatal(err)
	}
	src := newStore(t)
	rep := Load(t, src, buf.Bytes())
	if rep.Files-rep.HardLinks != int64(n) {
		t.Fatalf("loaded %d files with %d extra names, want %d files", rep.Files, rep.HardLinks, n)
	}
	first := Dump(t, src, dump.Options{})
	dst := newStore(t)
	Load(t, dst, first)
	if second := Dump(t, dst, dump.Options{Fast: true}); !bytes.Equal(first, second) {
		t.Fatalf("a %d-entry directory changed in a round trip: %s", n, diff(first, second))
	}
}

// isEmpty fails t unless st holds no volume and no record.
func isEmpty(t *testing.T, st store.Store) {
	t.Helper()
	err := st.View(ctx, func(tx store.Tx) error {
		if _, err := tx.Setting(); !errors.Is(err, store.ErrNotFound) {
			return fmt.Errorf("settings: %v", err)
		}
		var cursor []byte
		for {
			recs, next, err := tx.ScanInodes(cursor, 10)
			if err != nil {
				return err
			}
			if len(recs) > 0 {
				return fmt.Errorf("inode %d has records left", recs[0].Ino)
			}
			if cursor = next; cursor == nil {
				break
			}
		}
		for {
			refs, next, err := tx.ScanSliceRefs(cursor, 10)
			if err != nil {
				return err
			}
			if len(refs) > 0 {
				return fmt.Errorf("slice %d has a reference count left", refs[0].Id)
			}
			if cursor = next; cursor == nil {
				return nil
			}
		}
	})
	if err != nil {
		t.Fatalf("the target is not empty after a failed load: %v", err)
	}
}

func testRefusesVolume(t *testing.T, newStore NewStore) {
	src := newStore(t)
	Fill(t, src)
	b := Dump(t, src, dump.Options{})
	_, err := dump.Load(ctx, src, bytes.NewReader(b), dump.LoadOptions{})
	if err == nil || !strings.Contains(err.Error(), "already holds a volume") {
		t.Fatalf("load into a formatted volume: %v", err)
	}
}

func testInterruptedLoad(t *testing.T, newStore NewStore) {
	src := newStore(t)
	Fill(t, src)
	good := Dump(t, src, dump.Options{})
	dst := newStore(t)
	// A load stopped half way by a reader that fails.
	half := &failingReader{b: good, n: len(good) * 2 / 3}
	if _, err := dump.Load(ctx, dst, half, dump.LoadOptions{}); err == nil {
		t.Fatal("a load whose input failed succeeded")
	}
	isEmpty(t, dst)
	rep := Load(t, dst, good)
	if rep.Files == 0 {
		t.Fatalf("reload after a failure: %+v", rep)
	}
}

type failingReader struct {
	b []byte
	n int
}

func (r *failingReader) Read(p []byte) (int, error) {
	if r.n == 0 {
		return 0, errors.New("disk on fire")
	}
	k := copy(p, r.b[:min(r.n, len(p))])
	r.b, r.n = r.b[k:], r.n-k
	return k, nil
}
