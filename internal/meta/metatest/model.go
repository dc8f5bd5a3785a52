package metatest

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sluicefs/sluice/internal/meta"
	"github.com/sluicefs/sluice/internal/meta/store"
)

// The model test runs random operations on a small name space and checks
// each against a reference tree kept in memory (open files included: an
// unlinked open file lives on with no names until its last release): the errno must be one the
// reference allows, and every few operations the whole volume (names,
// types, inode identity of hard links, link counts, modes, lengths, slice
// lists, xattrs, usage counters) must match the reference. At the end the
// deletion queue must have deleted exactly the slices no file uses any more.
const (
	modelOps        = 2000 // default; Options.ModelOps changes it
	modelCheckEvery = 1
	modelSeedEnv    = "SLUICE_MODEL_SEED"
	modelMaxDirs    = 8 // mkdir turns into a file create beyond this
)

var (
	modelNames = []string{"a", "b", "c", "d"}
	modelModes = []uint16{0o755, 0o644, 0o600, 0o000, 0o1777, 0o2755, 0o4755}
	modelSizes = []uint64{0, 1, 4095, 4096, 10000, 70000, meta.ChunkSize - 1, meta.ChunkSize + 5, 2*meta.ChunkSize + 100}
)

// mnode is one inode of the reference tree.
type mnode struct {
	ino      meta.Ino
	typ      uint8
	mode     uint16
	nlink    uint32 // names of a non-directory
	open     int    // handles held
	length   uint64
	xattrs   map[string]string
	chunks   map[uint32][]meta.Slice
	children map[string]*mnode // directories only
	parent   *mnode            // directories only; nil for the root
}

func (n *mnode) isDir() bool { return n.typ == store.TypeDir }

type modelRun struct {
	t     *testing.T
	c     *meta.Session
	rng   *rand.Rand
	seed  uint64
	root  *mnode
	dead  []meta.Ino
	held  []*mnode        // nodes with open handles, in opening order
	freed map[uint64]bool // slices no file references any more
	rec   *deleteRecorder
	log   []string
	stats map[string]*[2]int // per operation: successes, failures
}

func modelSeed(t *testing.T) uint64 {
	t.Helper()
	if s := os.Getenv(modelSeedEnv); s != "" {
		seed, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("%s=%q: %v", modelSeedEnv, s, err)
		}
		return seed
	}
	return uint64(time.Now().UnixNano())
}

func testModelOps(t *testing.T, ns newStoreFunc, ops int) {
	seed := modelSeed(t)
	t.Logf("model seed %d (rerun with %s=%d)", seed, modelSeedEnv, seed)
	rec := &deleteRecorder{ids: map[uint64]uint32{}}
	r := &modelRun{
		t:     t,
		c:     setup(t, ns, meta.Config{DeleteSlice: rec.delete}),
		rng:   rand.New(rand.NewPCG(seed, seed^0x5eed)),
		seed:  seed,
		root:  &mnode{ino: meta.RootIno, typ: store.TypeDir, mode: 0o777, length: 4096, xattrs: map[string]string{}, children: map[string]*mnode{}},
		freed: map[uint64]bool{},
		rec:   rec,
		stats: map[string]*[2]int{},
	}
	for i := range ops {
		r.step()
		if (i+1)%modelCheckEvery == 0 {
			r.check(false)
		}
	}
	r.check(true)
	r.checkDeletions()
}

// fail reports a mismatch with the seed and the recent operations.
func (r *modelRun) fail(format string, args ...any) {
	r.t.Helper()
	recent := r.log[max(0, len(r.log)-25):]
	r.t.Fatalf("model (seed %d, op %d): %s\nrecent operations:\n  %s", r.seed, len(r.log),
		fmt.Sprintf(format, args...), strings.Join(recent, "\n  "))
}

// do runs call and checks its error against want: nil for success, else
// the errnos the reference allows. It reports whether call succeeded.
func (r *modelRun) do(desc string, want []syscall.Errno, call func() error) bool {
	r.t.Helper()
	r.log = append(r.log, desc)
	op, _, _ := strings.Cut(desc, " ")
	if r.stats[op] == nil {
		r.stats[op] = new([2]int)
	}
	r.stats[op][min(len(want), 1)]++
	err := call()
	if len(want) == 0 {
		if err != nil {
			r.fail("%s: unexpected error %v", desc, err)
		}
		return true
	}
	for _, e := range want {
		if errors.Is(err, e) {
			return false
		}
	}
	r.fail("%s: got %v, want one of %v", desc, err, want)
	return false
}

// nodes lists the live inodes reachable from the root, each once, in walk
// order (so a seeded run is reproducible).
func (r *modelRun) nodes() []*mnode {
	seen := map[*mnode]bool{r.root: true}
	out := []*mnode{r.root}
	for i := 0; i < len(out); i++ {
		n := out[i]
		if !n.isDir() {
			continue
		}
		for _, name := range sortedNames(n) {
			if ch := n.children[name]; !seen[ch] {
				seen[ch] = true
				out = append(out, ch)
			}
		}
	}
	return out
}

func sortedNames(d *mnode) []string {
	names := make([]string, 0, len(d.children))
	for name := range d.children {
		names = append(names, name)
	}
	sort.Strings(names)
	return names
}

func (r *modelRun) dirs() []*mnode {
	var out []*mnode
	for _, n := range r.nodes() {
		if n.isDir() {
			out = append(out, n)
		}
	}
	return out
}

func (r *modelRun) pickDir() *mnode {
	ds := r.dirs()
	return ds[r.rng.IntN(len(ds))]
}

func (r *modelRun) pickName() string { return modelNames[r.rng.IntN(len(modelNames))] }

// pickEntry returns a directory and a name in it: half the time an
// existing entry (one whose node passes ok, if any does), else any name.
func (r *modelRun) pickEntry(ok func(*mnode) bool) (*mnode, string) {
	if r.rng.IntN(2) == 0 {
		type entry struct {
			dir  *mnode
			name string
		}
		var es []entry
		for _, d := range r.dirs() {
			for _, name := range sortedNames(d) {
				if ok == nil || ok(d.children[name]) {
					es = append(es, entry{d, name})
				}
			}
		}
		if len(es) > 0 {
			e := es[r.rng.IntN(len(es))]
			return e.dir, e.name
		}
	}
	return r.pickDir(), r.pickName()
}

// orphans lists the open files that have no name left.
func (r *modelRun) orphans() []*mnode {
	var out []*mnode
	for _, n := range r.held {
		if n.nlink == 0 {
			out = append(out, n)
		}
	}
	return out
}

// pickTarget returns a live inode (named, or open without a name), or now
// and then the number of a dead one (with a nil node).
func (r *modelRun) pickTarget() (meta.Ino, *mnode) {
	if len(r.dead) > 0 && r.rng.IntN(20) == 0 {
		return r.dead[r.rng.IntN(len(r.dead))], nil
	}
	ns := append(r.nodes(), r.orphans()...)
	n := ns[r.rng.IntN(len(ns))]
	return n.ino, n
}

// path names d/name for the log.
func (r *modelRun) path(d *mnode, name string) string {
	var parts []string
	for x := d; x.parent != nil; x = x.parent {
		for n, ch := range x.parent.children {
			if ch == x {
				parts = append(parts, n)
				break
			}
		}
	}
	slices.Reverse(parts)
	return "/" + strings.Join(append(parts, name), "/")
}

func (r *modelRun) step() {
	switch x := r.rng.IntN(100); {
	case x < 12:
		r.mknod(store.TypeFile)
	case x < 19:
		r.mknod(store.TypeDir)
	case x < 22:
		r.mknod(store.TypeSymlink)
	case x < 29:
		r.link()
	case x < 41:
		r.unlink()
	case x < 48:
		r.rmdir()
	case x < 66:
		r.rename()
	case x < 73:
		r.truncate()
	case x < 80:
		r.write()
	case x < 84:
		r.chmod()
	case x < 90:
		r.setxattr()
	case x < 93:
		r.removexattr()
	case x < 97:
		r.open()
	default:
		r.release()
	}
}

func (r *modelRun) mknod(typ uint8) {
	if typ == store.TypeDir && len(r.dirs()) >= modelMaxDirs {
		typ = store.TypeFile
	}
	dir, name := r.pickDir(), r.pickName()
	mode := modelModes[r.rng.IntN(len(modelModes))]
	var want []syscall.Errno
	if dir.children[name] != nil {
		want = []syscall.Errno{syscall.EEXIST}
	}
	nn := meta.NewNode{Type: typ, Mode: mode}
	if typ == store.TypeSymlink {
		nn.Target = []byte("some/target")
	}
	var a *meta.Attr
	if !r.do(fmt.Sprintf("mknod %s type %d mode %o", r.path(dir, name), typ, mode), want, func() error {
		var err error
		a, err = r.c.Mknod(root, dir.ino, []byte(name), nn)
		return err
	}) {
		return
	}
	n := &mnode{ino: a.Ino, typ: typ, mode: mode, nlink: 1, xattrs: map[string]string{}, chunks: map[uint32][]meta.Slice{}}
	switch typ {
	case store.TypeDir:
		n.length, n.children, n.parent = 4096, map[string]*mnode{}, dir
		if dir.mode&0o2000 != 0 {
			n.mode |= 0o2000
		}
	case store.TypeSymlink:
		n.mode, n.length = 0o777, uint64(len(nn.Target))
	}
	dir.children[name] = n
}

func (r *modelRun) link() {
	ns := append(r.nodes()[1:], r.orphans()...)
	if len(ns) == 0 {
		return
	}
	src := ns[r.rng.IntN(len(ns))]
	dir, name := r.pickDir(), r.pickName()
	var want []syscall.Errno
	if src.isDir() {
		want = append(want, syscall.EPERM)
	}
	if src.nlink == 0 {
		want = append(want, syscall.ENOENT) // open but unlinked
	}
	if dir.children[name] != nil {
		want = append(want, syscall.EEXIST)
	}
	if r.do(fmt.Sprintf("link %d %s", src.ino, r.path(dir, name)), want, func() error {
		_, err := r.c.Link(root, src.ino, dir.ino, []byte(name))
		return err
	}) {
		dir.children[name] = src
		src.nlink++
	}
}

// drop removes one name of n and kills n at its last one, unless it is
// open.
func (r *modelRun) drop(n *mnode) {
	if !n.isDir() {
		n.nlink--
		if n.nlink > 0 || n.open > 0 {
			return
		}
	}
	r.kill(n)
}

func (r *modelRun) kill(n *mnode) {
	r.dead = append(r.dead, n.ino)
	for _, ss := range n.chunks {
		r.free(ss)
	}
}

func (r *modelRun) free(ss []meta.Slice) {
	for _, s := range ss {
		if s.Id != 0 {
			r.freed[s.Id] = true
		}
	}
}

func (r *modelRun) unlink() {
	dir, name := r.pickEntry(nil)
	n := dir.children[name]
	var want []syscall.Errno
	switch {
	case n == nil:
		want = []syscall.Errno{syscall.ENOENT}
	case n.isDir():
		want = []syscall.Errno{syscall.EISDIR}
	}
	if r.do("unlink "+r.path(dir, name), want, func() error { return r.c.Unlink(root, dir.ino, []byte(name)) }) {
		delete(dir.children, name)
		r.drop(n)
	}
}

func (r *modelRun) rmdir() {
	dir, name := r.pickEntry(func(n *mnode) bool { return n.isDir() && len(n.children) == 0 })
	n := dir.children[name]
	var want []syscall.Errno
	switch {
	case n == nil:
		want = []syscall.Errno{syscall.ENOENT}
	case !n.isDir():
		want = []syscall.Errno{syscall.ENOTDIR}
	case len(n.children) > 0:
		want = []syscall.Errno{syscall.ENOTEMPTY}
	}
	if r.do("rmdir "+r.path(dir, name), want, func() error { return r.c.Rmdir(root, dir.ino, []byte(name)) }) {
		delete(dir.children, name)
		r.drop(n)
	}
}

// within reports whether d is a or lies below it.
func within(d, a *mnode) bool {
	for x := d; x != nil; x = x.parent {
		if x == a {
			return true
		}
	}
	return false
}

// renameErrs returns the errnos rename may fail with (nil for success) and
// whether it is a no-op. Where several conditions hold, Linux and the core
// may pick different ones; any of them is accepted.
func renameErrs(sdir *mnode, s *mnode, ddir *mnode, d *mnode, flags uint32) (want []syscall.Errno, noop bool) {
	exchange := flags&meta.RenameExchange != 0
	switch {
	case s == nil:
		return []syscall.Errno{syscall.ENOENT}, false
	case exchange && d == nil:
		return []syscall.Errno{syscall.ENOENT}, false
	case s == d:
		if flags&meta.RenameNoReplace != 0 {
			return []syscall.Errno{syscall.EEXIST}, false
		}
		return nil, true
	}
	if flags&meta.RenameNoReplace != 0 && d != nil {
		want = append(want, syscall.EEXIST)
	}
	if s.isDir() && within(ddir, s) {
		want = append(want, syscall.EINVAL)
	}
	if exchange && d.isDir() && within(sdir, d) {
		want = append(want, syscall.EINVAL)
	}
	if !exchange && d != nil {
		switch {
		case s.isDir() && !d.isDir():
			want = append(want, syscall.ENOTDIR)
		case !s.isDir() && d.isDir():
			want = append(want, syscall.EISDIR)
		}
		if d.isDir() && len(d.children) > 0 {
			want = append(want, syscall.ENOTEMPTY)
		}
	}
	return want, false
}

func (r *modelRun) rename() {
	sdir, sn := r.pickEntry(nil)
	ddir, dn := sdir, r.pickName()
	if r.rng.IntN(3) > 0 {
		ddir = r.pickDir()
	}
	flags := []uint32{0, 0, 0, meta.RenameNoReplace, meta.RenameExchange}[r.rng.IntN(5)]
	s, d := sdir.children[sn], ddir.children[dn]
	want, noop := renameErrs(sdir, s, ddir, d, flags)
	desc := fmt.Sprintf("rename %s %s flags %d", r.path(sdir, sn), r.path(ddir, dn), flags)
	if !r.do(desc, want, func() error { return r.c.Rename(root, sdir.ino, []byte(sn), ddir.ino, []byte(dn), flags) }) || noop {
		return
	}
	if flags&meta.RenameExchange != 0 {
		sdir.children[sn], ddir.children[dn] = d, s
		if s.isDir() {
			s.parent = ddir
		}
		if d.isDir() {
			d.parent = sdir
		}
		return
	}
	if d != nil {
		r.drop(d)
	}
	delete(sdir.children, sn)
	ddir.children[dn] = s
	if s.isDir() {
		s.parent = ddir
	}
}

func (r *modelRun) truncate() {
	ino, n := r.pickTarget()
	size := modelSizes[r.rng.IntN(len(modelSizes))]
	var want []syscall.Errno
	switch {
	case n == nil:
		want = []syscall.Errno{syscall.ENOENT}
	case n.isDir():
		want = []syscall.Errno{syscall.EISDIR}
	case n.typ != store.TypeFile:
		want = []syscall.Errno{syscall.EINVAL}
	}
	if !r.do(fmt.Sprintf("truncate %d to %d", ino, size), want, func() error {
		_, err := r.c.SetAttr(root, ino, meta.SetSize, &meta.Attr{Length: size})
		return err
	}) {
		return
	}
	old := n.length
	n.length = size
	if size >= old {
		return
	}
	// The core's contract: a hole covers the cut part of the last chunk up
	// to the old end, and later chunks are dropped.
	first := uint32(size / meta.ChunkSize)
	if off := uint32(size % meta.ChunkSize); off != 0 {
		end := min(uint64(meta.ChunkSize), old-uint64(first)*meta.ChunkSize)
		n.chunks[first] = append(n.chunks[first], meta.Slice{Pos: off, Len: uint32(end) - off})
		first++
	}
	for idx, ss := range n.chunks {
		if idx >= first {
			r.free(ss)
			delete(n.chunks, idx)
		}
	}
}

func (r *modelRun) write() {
	ino, n := r.pickTarget()
	idx := uint32(r.rng.IntN(3))
	length := uint32(1 + r.rng.IntN(8192))
	pos := uint32(r.rng.IntN(meta.ChunkSize - int(length)))
	id, err := r.c.NewSliceID(root)
	if err != nil {
		r.fail("new slice id: %v", err)
	}
	s := meta.Slice{Pos: pos, Id: id, Size: length, Len: length}
	var want []syscall.Errno
	switch {
	case n == nil:
		want = []syscall.Errno{syscall.ENOENT}
	case n.typ != store.TypeFile:
		want = []syscall.Errno{syscall.EBADF}
	}
	if r.do(fmt.Sprintf("write %d chunk %d %+v", ino, idx, s), want, func() error {
		_, err := Write(root, r.c, ino, idx, s)
		return err
	}) {
		n.chunks[idx] = append(n.chunks[idx], s)
		n.length = max(n.length, uint64(idx)*meta.ChunkSize+uint64(pos+length))
	}
}

func (r *modelRun) open() {
	ino, n := r.pickTarget()
	if n != nil && n.typ != store.TypeFile && !n.isDir() {
		return // the kernel opens no symlinks
	}
	var want []syscall.Errno
	switch {
	case n == nil:
		want = []syscall.Errno{syscall.ENOENT}
	case n.isDir():
		want = []syscall.Errno{syscall.EISDIR}
	}
	if r.do(fmt.Sprintf("open %d", ino), want, func() error {
		_, err := r.c.Open(root, ino, syscall.O_RDWR)
		return err
	}) {
		if n.open == 0 {
			r.held = append(r.held, n)
		}
		n.open++
	}
}

func (r *modelRun) release() {
	if len(r.held) == 0 {
		return
	}
	i := r.rng.IntN(len(r.held))
	n := r.held[i]
	r.do(fmt.Sprintf("release %d", n.ino), nil, func() error { return r.c.Release(root, n.ino) })
	if n.open--; n.open > 0 {
		return
	}
	r.held = slices.Delete(r.held, i, i+1)
	if n.nlink == 0 {
		r.kill(n)
	}
}

func (r *modelRun) chmod() {
	ino, n := r.pickTarget()
	if n != nil && n.typ == store.TypeSymlink {
		return // the kernel never changes a symlink's mode
	}
	mode := modelModes[r.rng.IntN(len(modelModes))]
	var want []syscall.Errno
	if n == nil {
		want = []syscall.Errno{syscall.ENOENT}
	}
	if r.do(fmt.Sprintf("chmod %d %o", ino, mode), want, func() error {
		_, err := r.c.SetAttr(root, ino, meta.SetMode, &meta.Attr{Mode: mode})
		return err
	}) {
		n.mode = mode
	}
}

func (r *modelRun) setxattr() {
	ino, n := r.pickTarget()
	name := []string{"user.a", "user.b"}[r.rng.IntN(2)]
	flags := []uint32{0, 0, meta.XattrCreate, meta.XattrReplace}[r.rng.IntN(4)]
	value := strconv.Itoa(r.rng.IntN(1000))
	var want []syscall.Errno
	switch {
	case n == nil:
		want = []syscall.Errno{syscall.ENOENT}
	case n.typ == store.TypeSymlink:
		want = []syscall.Errno{syscall.EPERM}
	default:
		_, exists := n.xattrs[name]
		if flags == meta.XattrCreate && exists {
			want = []syscall.Errno{syscall.EEXIST}
		}
		if flags == meta.XattrReplace && !exists {
			want = []syscall.Errno{syscall.ENODATA}
		}
	}
	if r.do(fmt.Sprintf("setxattr %d %s=%s flags %d", ino, name, value, flags), want, func() error {
		return r.c.SetXattr(root, ino, name, []byte(value), flags)
	}) {
		n.xattrs[name] = value
	}
}

func (r *modelRun) removexattr() {
	ino, n := r.pickTarget()
	name := []string{"user.a", "user.b"}[r.rng.IntN(2)]
	var want []syscall.Errno
	switch {
	case n == nil:
		want = []syscall.Errno{syscall.ENOENT}
	case n.typ == store.TypeSymlink:
		want = []syscall.Errno{syscall.EPERM}
	default:
		if _, ok := n.xattrs[name]; !ok {
			want = []syscall.Errno{syscall.ENODATA}
		}
	}
	if r.do(fmt.Sprintf("removexattr %d %s", ino, name), want, func() error {
		return r.c.RemoveXattr(root, ino, name)
	}) {
		delete(n.xattrs, name)
	}
}

// check compares the whole volume with the reference. With all it also
// checks that every dead inode is gone; otherwise only the latest few.
func (r *modelRun) check(all bool) {
	r.t.Helper()
	names := map[*mnode]uint32{}
	var count func(d *mnode)
	count = func(d *mnode) {
		for _, ch := range d.children {
			names[ch]++
			if ch.isDir() {
				count(ch)
			}
		}
	}
	count(r.root)
	var space int64
	nodes := append(r.nodes(), r.orphans()...)
	for _, n := range nodes {
		r.checkNode(n, names[n])
		if n.typ == store.TypeFile {
			space += int64((max(n.length, 1) + 4095) &^ 4095)
		} else if n != r.root {
			space += 4096
		}
	}
	st, err := r.c.StatFS(root)
	if err != nil {
		r.fail("statfs: %v", err)
	}
	if st.UsedInodes != uint64(len(nodes)-1) || int64(st.TotalSpace-st.AvailSpace) != space {
		r.fail("statfs: %d inodes, %d bytes used; want %d inodes, %d bytes",
			st.UsedInodes, st.TotalSpace-st.AvailSpace, len(nodes)-1, space)
	}
	dead := r.dead
	if !all {
		dead = dead[max(0, len(dead)-5):]
	}
	for _, ino := range dead {
		if a, err := r.c.GetAttr(root, ino); !errors.Is(err, syscall.ENOENT) {
			r.fail("dead inode %d: %+v, %v; want ENOENT", ino, a, err)
		}
	}
}

// checkNode compares one live inode, reached through names names, and for
// a directory its entries.
func (r *modelRun) checkNode(n *mnode, names uint32) {
	r.t.Helper()
	a, err := r.c.GetAttr(root, n.ino)
	if err != nil {
		r.fail("getattr %d: %v", n.ino, err)
	}
	nlink := names
	if n.isDir() {
		nlink = 2
		for _, ch := range n.children {
			if ch.isDir() {
				nlink++
			}
		}
	} else if names != n.nlink {
		r.fail("reference is inconsistent: inode %d has %d names, nlink %d", n.ino, names, n.nlink)
	}
	if a.Type != n.typ || a.Mode != n.mode || a.Nlink != nlink || a.Length != n.length {
		r.fail("inode %d: type %d mode %o nlink %d length %d; want type %d mode %o nlink %d length %d",
			n.ino, a.Type, a.Mode, a.Nlink, a.Length, n.typ, n.mode, nlink, n.length)
	}
	if n.isDir() {
		parent := meta.RootIno
		if n.parent != nil {
			parent = n.parent.ino
		}
		if a.Parent != parent {
			r.fail("dir %d: parent %d, want %d", n.ino, a.Parent, parent)
		}
		r.checkEntries(n)
	}
	r.checkXattrs(n)
	if n.typ == store.TypeFile {
		for idx := range uint32(3) {
			got, err := r.c.ReadChunk(root, n.ino, idx)
			if err != nil {
				r.fail("read chunk %d of %d: %v", idx, n.ino, err)
			}
			if want := n.chunks[idx]; (len(got) > 0 || len(want) > 0) && !reflect.DeepEqual(got, want) {
				r.fail("chunk %d of %d:\n got %+v\nwant %+v", idx, n.ino, got, want)
			}
		}
	}
}

func (r *modelRun) checkEntries(d *mnode) {
	r.t.Helper()
	var es []meta.Entry
	var after []byte
	for { // small pages, so paging is exercised too
		page, err := r.c.ReadDir(root, d.ino, after, 3, r.rng.IntN(2) == 0)
		if err != nil {
			r.fail("readdir %d: %v", d.ino, err)
		}
		es = append(es, page...)
		if len(page) < 3 {
			break
		}
		after = page[len(page)-1].Name
	}
	want := sortedNames(d)
	got := make([]string, len(es))
	for i, e := range es {
		got[i] = string(e.Name)
	}
	if !slices.Equal(got, want) {
		r.fail("dir %d lists %q, want %q", d.ino, got, want)
	}
	for _, e := range es {
		ch := d.children[string(e.Name)]
		if e.Ino != ch.ino || e.Type != ch.typ || (e.Attr != nil && (e.Attr.Ino != ch.ino || e.Attr.Type != ch.typ)) {
			r.fail("entry %q of %d: ino %d type %d attr %+v; want ino %d type %d", e.Name, d.ino, e.Ino, e.Type, e.Attr, ch.ino, ch.typ)
		}
	}
}

func (r *modelRun) checkXattrs(n *mnode) {
	r.t.Helper()
	names, err := r.c.ListXattr(root, n.ino)
	if err != nil {
		r.fail("listxattr %d: %v", n.ino, err)
	}
	want := make([]string, 0, len(n.xattrs))
	for name := range n.xattrs {
		want = append(want, name)
	}
	sort.Strings(want)
	if !slices.Equal(names, want) {
		r.fail("xattrs of %d: %q, want %q", n.ino, names, want)
	}
	for _, name := range want {
		v, err := r.c.GetXattr(root, n.ino, name)
		if err != nil || string(v) != n.xattrs[name] {
			r.fail("xattr %s of %d: %q, %v; want %q", name, n.ino, v, err, n.xattrs[name])
		}
	}
}

// checkDeletions runs the deletion queue and checks that exactly the
// slices no file references any more were deleted.
func (r *modelRun) checkDeletions() {
	r.t.Helper()
	if err := r.c.FlushDeletions(root); err != nil {
		r.fail("flush deletions: %v", err)
	}
	for id := range r.freed {
		if !r.rec.has(id) {
			r.fail("slice %d is referenced by no file but was not deleted", id)
		}
	}
	for _, id := range r.rec.deleted() {
		if !r.freed[id] {
			r.fail("slice %d was deleted but is still referenced", id)
		}
	}
	ops := make([]string, 0, len(r.stats))
	for op, n := range r.stats {
		ops = append(ops, fmt.Sprintf("%s %d/%d", op, n[0], n[1]))
	}
	sort.Strings(ops)
	r.t.Logf("model: %d live inodes, %d open without a name, %d dead, %d slices deleted; ok/failed: %s",
		len(r.nodes()), len(r.orphans()), len(r.dead), len(r.freed), strings.Join(ops, ", "))
}
