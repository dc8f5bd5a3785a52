package metaserver

import (
	"context"
	"fmt"
	"net"
	"sync"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/sluicefs/sluice/internal/meta/engine/sluice"
	"github.com/sluicefs/sluice/internal/meta/store/kvstore"
	"github.com/sluicefs/sluice/internal/wire"
)

// The protocol benchmark: one read of one key, served by the same
// server code (conn.handle), over our frames and over gRPC (HTTP/2, a
// raw-bytes codec so that no protobuf cost is counted against it), with
// 1 and 16 callers at once. It is the baseline docs/metaserver.md
// compares the frames with.
//
//	go test -run XXX -bench Protocol ./internal/metaserver

// rawCodec passes *[]byte messages through as they are.
type rawCodec struct{}

func (rawCodec) Marshal(v any) ([]byte, error) { return *(v.(*[]byte)), nil }
func (rawCodec) Unmarshal(data []byte, v any) error {
	*(v.(*[]byte)) = append([]byte(nil), data...)
	return nil
}
func (rawCodec) Name() string { return "raw" }

// grpcServe serves OpGet bodies through conn.handle over gRPC.
func grpcServe(s *Server, l net.Listener) *grpc.Server {
	gs := grpc.NewServer(grpc.ForceServerCodec(rawCodec{}))
	desc := grpc.ServiceDesc{
		ServiceName: "sluice.Meta",
		HandlerType: (*any)(nil),
		Methods: []grpc.MethodDesc{{
			MethodName: "Get",
			Handler: func(_ any, ctx context.Context, dec func(any) error, _ grpc.UnaryServerInterceptor) (any, error) {
				var body []byte
				if err := dec(&body); err != nil {
					return nil, err
				}
				c := &conn{s: s}
				c.handle(wire.Frame{ID: 1, Kind: wire.OpGet, Body: body})
				reply := c.out[0][13:]
				return &reply, nil
			},
		}},
	}
	gs.RegisterService(&desc, struct{}{})
	go gs.Serve(l)
	return gs
}

func BenchmarkProtocol(b *testing.B) {
	s, err := Open(Options{Dir: b.TempDir(), Logger: quiet()})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	var ws []wire.Write
	for i := 0; i < 1000; i++ {
		ws = append(ws, wire.Write{Key: fmt.Appendf(nil, "key%04d", i), Value: make([]byte, 64)})
	}
	done := make(chan byte, 1)
	s.commits <- &commitReq{c: &wire.Commit{Writes: ws}, done: func(st byte, _ string) { done <- st }}
	<-done

	fl, _ := net.Listen("tcp", "127.0.0.1:0")
	go s.Serve(fl)
	gl, _ := net.Listen("tcp", "127.0.0.1:0")
	gs := grpcServe(s, gl)
	defer gs.Stop()

	ctx := context.Background()
	db, err := sluice.Open(ctx, "sluice://"+fl.Addr().String()+"/x?conns=1", false)
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	cc, err := grpc.NewClient(gl.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.ForceCodec(rawCodec{})))
	if err != nil {
		b.Fatal(err)
	}
	defer cc.Close()

	frames := func(i int) error {
		return db.View(ctx, func(t kvstore.Txn) error {
			v, err := t.Get(fmt.Appendf(nil, "key%04d", i%1000))
			if err == nil && len(v) != 64 {
				err = fmt.Errorf("value of %d bytes", len(v))
			}
			return err
		})
	}
	grpcGet := func(i int) error {
		body := wire.NewBuf(32)
		body.U64(0)
		body.Uvarint(1)
		body.Bytes(fmt.Appendf(nil, "key%04d", i%1000))
		req, reply := body.Raw(), []byte(nil)
		if err := cc.Invoke(ctx, "/sluice.Meta/Get", &req, &reply); err != nil {
			return err
		}
		r := wire.NewReader(reply)
		snap := r.U64()
		s.snaps.release(snap) // as the frames' client does with its next request
		if r.Uvarint() != 1 || r.Byte() != 1 || len(r.Bytes()) != 64 {
			return fmt.Errorf("bad reply %x", reply)
		}
		return r.Err()
	}
	for _, tc := range []struct {
		name string
		get  func(int) error
	}{{"frames", frames}, {"grpc", grpcGet}} {
		for _, callers := range []int{1, 16} {
			b.Run(fmt.Sprintf("%s/%d", tc.name, callers), func(b *testing.B) {
				var wg sync.WaitGroup
				var mu sync.Mutex
				var first error
				per := (b.N + callers - 1) / callers
				for c := 0; c < callers; c++ {
					wg.Add(1)
					go func(c int) {
						defer wg.Done()
						for i := 0; i < per; i++ {
							if err := tc.get(c*per + i); err != nil {
								mu.Lock()
								first = err
								mu.Unlock()
								return
							}
						}
					}(c)
				}
				wg.Wait()
				if first != nil {
					b.Fatal(first)
				}
			})
		}
	}
}
