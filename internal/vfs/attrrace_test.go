package vfs

import (
	"context"
	"syscall"
	"testing"
	"time"

	"github.com/sluicefs/sluice/internal/chunk"
	"github.com/sluicefs/sluice/internal/meta"
)

// commitAfterRead is a metadata client whose first GetAttr of a file,
// once armed, lets the file's held-back slice commit land between its
// read and its answer: the commit waits for the read, and the answer for
// the commit to be recorded by the open file.
type commitAfterRead struct {
	Meta
	v        *VFS
	armed    chan struct{} // closed to arm
	read     chan struct{} // closed once the armed GetAttr has read
	released bool
}

func (m *commitAfterRead) WriteSliceAttr(ctx context.Context, ino meta.Ino, idx uint32, s meta.Slice, cs []meta.AttrChange, unsynced bool) (meta.Version, *meta.Attr, error) {
	select {
	case <-m.armed:
		<-m.read
	default:
	}
	return m.Meta.WriteSliceAttr(ctx, ino, idx, s, cs, unsynced)
}

func (m *commitAfterRead) GetAttr(ctx context.Context, ino meta.Ino) (*meta.Attr, error) {
	a, err := m.Meta.GetAttr(ctx, ino)
	select {
	case <-m.armed:
	default:
		return a, err
	}
	if m.released {
		return a, err
	}
	m.released = true
	f := m.v.fileOf(ino)
	before := f.learnt()
	close(m.read)
	for deadline := time.Now().Add(10 * time.Second); f.learnt() == before; {
		if time.Now().After(deadline) {
			panic("the commit was never recorded")
		}
		time.Sleep(time.Millisecond)
	}
	return a, err
}

// TestGetAttrDuringCommit: a GetAttr whose read of the engine ran before
// a background commit of this mount's write (a write that fills a chunk
// commits at once) must not answer, nor record, the length before the
// write: the kernel would then end the file there and a read of the bytes
// just written would find nothing (seen on Redis, whose reads are fast
// enough to lose the race).
func TestGetAttrDuringCommit(t *testing.T) {
	vol := newVolume(t, 0)
	bg := context.Background()
	c, err := meta.NewSession(bg, vol.st, meta.Config{})
	if err != nil {
		t.Fatal(err)
	}
	s := chunk.New(vol.obj, chunk.Config{BlockSize: 64 << 10})
	m := &commitAfterRead{Meta: c, armed: make(chan struct{}), read: make(chan struct{})}
	v := New(m, s, Config{})
	m.v = v
	v.SetKernel(&fakeKernel{})
	t.Cleanup(func() {
		v.Close(bg)
		s.Close(bg)
		c.Close(bg)
	})
	a, fh, err := v.Create(as(1), meta.RootIno, []byte("f"), 0o644, 0, syscall.O_RDWR)
	if err != nil {
		t.Fatal(err)
	}
	close(m.armed)
	// The chunk's last bytes: the slice fills the chunk and commits in
	// the background, held until the GetAttr below has read.
	if err := v.Write(as(1), fh, meta.ChunkSize-10, []byte("0123456789")); err != nil {
		t.Fatal(err)
	}
	got, err := v.GetAttr(as(1), a.Ino)
	if err != nil {
		t.Fatal(err)
	}
	if got.Length != meta.ChunkSize {
		t.Errorf("getattr during the commit of a write to %d: length %d", uint64(meta.ChunkSize), got.Length)
	}
	p := make([]byte, 20)
	if n, err := v.Read(as(1), fh, meta.ChunkSize-10, p); err != nil || string(p[:n]) != "0123456789" {
		t.Errorf("read of the bytes just written: %q, %v", p[:n], err)
	}
}
