package metaserver

import (
	"bytes"
	"net"
	"reflect"
	"testing"

	"github.com/sluicefs/sluice/internal/wire"
)

// FuzzDecodeRecord feeds the log-record decoder arbitrary bodies: it must
// return a record or an error, never panic, and a record it returns must
// survive encoding and decoding again unchanged (varints may have had
// several encodings of one value).
func FuzzDecodeRecord(f *testing.F) {
	good := appendRecord(nil, &record{Index: 3, Client: 9, Txn: 4, Writes: []wire.Write{set("a", "1"), del("b")}})
	f.Add(good[8:])
	call := appendRecord(nil, &record{Index: 4, Client: 9, Txn: 5, Writes: []wire.Write{set("c", "2")}, Session: 7, Call: 11})
	f.Add(call[8:])
	f.Add([]byte{})
	f.Add(bytes.Repeat([]byte{0xff}, 40))
	f.Fuzz(func(t *testing.T, body []byte) {
		r, err := decodeRecord(body)
		if err != nil {
			return
		}
		again, err := decodeRecord(appendRecord(nil, r)[8:])
		if err != nil || !reflect.DeepEqual(again, r) {
			t.Fatalf("record %+v decodes again as %+v, %v", r, again, err)
		}
	})
}

// FuzzHandle serves arbitrary requests: every one gets a reply or is
// dropped (releases), and none crashes the server.
func FuzzHandle(f *testing.F) {
	b := wire.NewFrame(1, wire.OpCommit)
	(&wire.Commit{Client: 1, Txn: 1, Writes: []wire.Write{set("k", "v")}}).Encode(b)
	f.Add(wire.OpCommit, b.Finish()[13:])
	b = wire.NewFrame(1, wire.OpCommit)
	(&wire.Commit{Client: 1, Txn: 2, Writes: []wire.Write{set("k", "w")}, Session: 3, Call: 4}).Encode(b)
	f.Add(wire.OpCommit, b.Finish()[13:])
	f.Add(wire.OpGet, []byte{0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 'k'})
	f.Add(wire.OpScan, []byte{0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0})
	f.Add(wire.OpHello, []byte{1, 0})
	f.Add(byte(99), []byte{})
	srv, err := Open(Options{Dir: f.TempDir(), Logger: quiet()})
	if err != nil {
		f.Fatal(err)
	}
	defer srv.Close()
	f.Fuzz(func(t *testing.T, op byte, body []byte) {
		a, z := net.Pipe()
		defer a.Close()
		defer z.Close()
		c := &conn{s: srv, nc: a, wake: make(chan struct{}, 1), done: make(chan struct{})}
		c.handle(wire.Frame{ID: 5, Kind: op, Body: body})
	})
}
