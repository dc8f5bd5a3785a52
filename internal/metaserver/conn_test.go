package metaserver

import (
	"bufio"
	"bytes"
	"net"
	"testing"

	"github.com/sluicefs/sluice/internal/wire"
)

// Replies queued from other goroutines are written at once while the
// socket takes them and by the writer goroutine when it does not: with
// a client that reads nothing until all are queued (so that the socket
// fills, and writes are cut short), every reply arrives whole, in the
// order queued, a reply larger than the socket takes included.
func TestQueuedRepliesWholeWhenTheSocketFills(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	client, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	nc, err := l.Accept()
	if err != nil {
		t.Fatal(err)
	}
	tc := nc.(*net.TCPConn)
	c := &conn{nc: nc, wake: make(chan struct{}, 1), done: make(chan struct{})}
	c.raw, _ = tc.SyscallConn()
	go c.writeLoop()
	defer c.close()
	const n = 3000
	body := func(i int) []byte {
		if i == 0 {
			return bytes.Repeat([]byte{byte(i)}, 32<<20) // more than the socket takes at once
		}
		return bytes.Repeat([]byte{byte(i)}, 500+i%1000)
	}
	for i := range n {
		b := wire.NewFrame(uint64(i), wire.StatusOK)
		b.Bytes(body(i))
		c.queue(b.Finish(), true)
	}
	r := bufio.NewReader(client)
	for i := range n {
		f, err := wire.ReadFrame(r)
		if err != nil {
			t.Fatalf("reply %d: %v", i, err)
		}
		got := wire.NewReader(f.Body).Bytes()
		if f.ID != uint64(i) || !bytes.Equal(got, body(i)) {
			t.Fatalf("reply %d: id %d, %d bytes of body", i, f.ID, len(got))
		}
	}
}
