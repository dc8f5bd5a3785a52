package fuse

import (
	"bytes"
	"context"
	"os"
	"sync"
	"testing"

	gofuse "github.com/hanwen/go-fuse/v2/fuse"

	"github.com/sluicefs/sluice/internal/telemetry"
	"github.com/sluicefs/sluice/internal/vfs"
	"github.com/sluicefs/sluice/internal/volume"
	"github.com/sluicefs/sluice/internal/volume/volumetest"
)

// okFS answers GETATTR and LOOKUP at once, so that what a benchmark of
// a wrapper around it measures is the wrapper.
type okFS struct{ gofuse.RawFileSystem }

func (okFS) GetAttr(_ <-chan struct{}, in *gofuse.GetAttrIn, out *gofuse.AttrOut) gofuse.Status {
	out.Ino, out.Size = in.NodeId, 4096
	return gofuse.OK
}

func (okFS) Lookup(_ <-chan struct{}, _ *gofuse.InHeader, _ string, out *gofuse.EntryOut) gofuse.Status {
	out.NodeId = 2
	return gofuse.OK
}

// readAccessLog opens .accesslog of a fresh volume's VFS and drains it
// in the background, as `cat .accesslog` does, until the benchmark ends.
// Before it starts draining, it checks that a request through
// observe(inner, ..., log) reaches the reader.
func readAccessLog(b *testing.B, inner gofuse.RawFileSystem) *vfs.AccessLog {
	b.Helper()
	ctx := context.Background() // root: may open .accesslog
	tv := volumetest.New(b, nil)
	v, err := volume.Open(ctx, tv.MetaURL, volume.Options{Level: volume.FileSystem})
	if err != nil {
		b.Fatal(err)
	}
	fs := v.VFS()
	_, fh, err := fs.Open(ctx, vfs.AccessLogIno, uint32(os.O_RDONLY))
	if err != nil {
		b.Fatal(err)
	}
	// The wrapper queues the line before it returns, so the read finds
	// it at once.
	observe(inner, nil, fs.AccessLog()).GetAttr(nil, &gofuse.GetAttrIn{InHeader: gofuse.InHeader{NodeId: 7}}, &gofuse.AttrOut{})
	p := make([]byte, 1<<20)
	if n, err := fs.Read(ctx, fh, 0, p); err != nil || !bytes.Contains(p[:n], []byte("getattr (7): OK")) {
		b.Fatalf("the access log reader got %q, %v; want the getattr line", p[:n], err)
	}
	rctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() {
		for rctx.Err() == nil {
			fs.Read(rctx, fh, 0, p)
		}
	})
	b.Cleanup(func() {
		stop()
		wg.Wait()
		if err := fs.Release(ctx, fh, 0); err != nil {
			b.Error(err)
		}
		if err := v.Close(ctx); err != nil {
			b.Error(err)
		}
	})
	return fs.AccessLog()
}

// BenchmarkObserve measures what observing a request costs: the FUSE
// binding's wrapper (observe) around a file system that answers at once,
// against no wrapper at all. "metrics" is the wrapper with the metrics
// only; "idle-log" adds an access log nobody reads, which a mount has
// whenever .accesslog is not open, and must cost nothing measurable
// beyond "metrics"; "read-log" has a reader draining the log, so each
// request formats a line and queues it (lines the reader is too slow for
// are dropped and counted, as on a mount).
func BenchmarkObserve(b *testing.B) {
	inner := okFS{gofuse.NewDefaultRawFileSystem()}
	read := readAccessLog(b, inner)
	for _, c := range []struct {
		name string
		fs   gofuse.RawFileSystem
	}{
		{"bare", inner},
		{"metrics", observe(inner, telemetry.New(), nil)},
		{"idle-log", observe(inner, telemetry.New(), new(vfs.AccessLog))},
		{"read-log", observe(inner, telemetry.New(), read)},
	} {
		fs := c.fs
		b.Run("getattr/"+c.name, func(b *testing.B) {
			in := &gofuse.GetAttrIn{InHeader: gofuse.InHeader{NodeId: 7, Caller: gofuse.Caller{Owner: gofuse.Owner{Uid: 1000, Gid: 1000}, Pid: 4242}}}
			var out gofuse.AttrOut
			b.ReportAllocs()
			for b.Loop() {
				if fs.GetAttr(nil, in, &out) != gofuse.OK {
					b.Fatal("getattr failed")
				}
			}
		})
		b.Run("lookup/"+c.name, func(b *testing.B) {
			h := &gofuse.InHeader{NodeId: 1, Caller: gofuse.Caller{Owner: gofuse.Owner{Uid: 1000, Gid: 1000}, Pid: 4242}}
			var out gofuse.EntryOut
			b.ReportAllocs()
			for b.Loop() {
				if fs.Lookup(nil, h, "some-file.txt", &out) != gofuse.OK {
					b.Fatal("lookup failed")
				}
			}
		})
		b.Run("getattr-parallel/"+c.name, func(b *testing.B) {
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				in := &gofuse.GetAttrIn{InHeader: gofuse.InHeader{NodeId: 7}}
				var out gofuse.AttrOut
				for pb.Next() {
					fs.GetAttr(nil, in, &out)
				}
			})
		})
	}
}
