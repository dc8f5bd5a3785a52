package wire_test

import (
	"context"
	"testing"
	"time"

	"github.com/sluicefs/sluice/internal/meta"
	"github.com/sluicefs/sluice/internal/meta/engine/mem"
	"github.com/sluicefs/sluice/internal/meta/metatest"
	"github.com/sluicefs/sluice/internal/meta/store/kvstore"
	"github.com/sluicefs/sluice/internal/wire"
)

// FuzzDecode feeds the server's decoder of calls arbitrary bodies: it
// must return a call or an error wrapping wire.ErrFrame, never panic, and
// a call it returns must run on a volume (and end, a lock wait included)
// without panicking.
func FuzzDecode(f *testing.F) {
	seed := func(method uint64, args func(b *wire.Buf)) {
		b := wire.NewBuf(64)
		b.Uvarint(method)
		b.Uvarint(0) // uid
		b.Uvarint(0) // gid
		b.Uvarint(1) // pid
		b.Uvarint(1) // one supplementary group
		b.Uvarint(5)
		args(b)
		f.Add(b.Raw())
	}
	seed(1, func(b *wire.Buf) { b.Uvarint(1); b.Bytes([]byte("name")) }) // lookup
	seed(2, func(b *wire.Buf) { b.Uvarint(1) })                          // getattr
	seed(8, func(b *wire.Buf) {
		b.Uvarint(1)
		b.Bytes([]byte("f"))
		b.Byte(1)
		b.Uvarint(0o644)
		b.Uvarint(0)
		b.Uvarint(0)
		b.Bytes(nil)
	}) // mknod
	seed(17, func(b *wire.Buf) { b.Uvarint(1); b.Byte(0); b.Bytes(nil); b.Varint(100); b.Byte(1) }) // readdir
	seed(22, func(b *wire.Buf) { b.Uvarint(1); b.Uvarint(7); b.Uvarint(2); b.Byte(1) })             // flock, blocking
	f.Add([]byte{})
	f.Add([]byte{0xff, 0xff, 0xff})

	ctx := context.Background()
	st := kvstore.New(mem.New(f.Name()))
	if _, err := meta.FormatVolume(ctx, st, metatest.BenchFormat()); err != nil {
		f.Fatal(err)
	}
	m, err := meta.NewSession(ctx, st, meta.Config{})
	if err != nil {
		f.Fatal(err)
	}
	defer m.Close(ctx)
	f.Fuzz(func(t *testing.T, body []byte) {
		call, err := wire.Decode(wire.NewReader(body))
		if err != nil {
			return
		}
		cctx, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
		defer cancel()
		call.Run(cctx, m, wire.NewBuf(64))
		if call.Applied != nil {
			call.Applied(cctx, m, wire.NewBuf(64))
		}
	})
}
