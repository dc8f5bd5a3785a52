package testserver

import (
	"io"
	"net"
	"regexp"
	"sync"
	"testing"
)

// StallProxy forwards TCP connections to a server and can stall them:
// while stalled, it forwards no byte in either direction and closes
// nothing, which is what a stopped server or a partition without resets
// looks like to a client. The server itself, which other tests share, is
// never disturbed.
type StallProxy struct {
	addr    string // the proxy's HOST:PORT, kept while it is down
	target  string
	mu      sync.Mutex
	cond    *sync.Cond
	l       net.Listener // nil while down
	stalled bool
	conns   []net.Conn
}

// NewStallProxy starts a proxy to target (HOST:PORT) on a free loopback
// port; it is closed when t ends.
func NewStallProxy(t testing.TB, target string) *StallProxy {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &StallProxy{l: l, addr: l.Addr().String(), target: target}
	p.cond = sync.NewCond(&p.mu)
	go p.serve(l)
	t.Cleanup(func() {
		p.Stall(false)
		p.mu.Lock()
		if p.l != nil {
			p.l.Close()
			p.l = nil
		}
		for _, c := range p.conns {
			c.Close()
		}
		p.mu.Unlock()
	})
	return p
}

// serverAddr matches the HOST:PORT of a metadata URL: after the @ of the
// credentials (MySQL puts it in parentheses), or after the scheme.
var serverAddr = regexp.MustCompile(`(@\(?|://)(127\.0\.0\.1:\d+)`)

// Proxied starts a StallProxy to the loopback server of the metadata URL
// u and returns u with the proxy's address in place of the server's.
func Proxied(t testing.TB, u string) (string, *StallProxy) {
	t.Helper()
	m := serverAddr.FindStringSubmatchIndex(u)
	if m == nil {
		t.Fatalf("no loopback HOST:PORT in %s", u)
	}
	p := NewStallProxy(t, u[m[4]:m[5]])
	return u[:m[4]] + p.Addr() + u[m[5]:], p
}

// Addr is the proxy's HOST:PORT.
func (p *StallProxy) Addr() string { return p.addr }

// Stall stops (on) or resumes forwarding.
func (p *StallProxy) Stall(on bool) {
	p.mu.Lock()
	p.stalled = on
	p.mu.Unlock()
	p.cond.Broadcast()
}

// Cut closes every connection made so far, dropping what it holds, as a
// server restart does; new connections are forwarded as before.
func (p *StallProxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}

// Down closes the proxy's listener and every connection (on), so that
// the server looks stopped: connections are reset and new ones refused,
// or listens again on the same address (off).
func (p *StallProxy) Down(t testing.TB, on bool) {
	t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	if on {
		if p.l != nil {
			p.l.Close()
			p.l = nil
		}
		for _, c := range p.conns {
			c.Close()
		}
		p.conns = nil
		return
	}
	if p.l != nil {
		return
	}
	l, err := net.Listen("tcp", p.addr)
	if err != nil {
		t.Fatalf("listen again on %s: %v", p.addr, err)
	}
	p.l = l
	go p.serve(l)
}

func (p *StallProxy) serve(l net.Listener) {
	for {
		c, err := l.Accept()
		if err != nil {
			return
		}
		s, err := net.Dial("tcp", p.target)
		if err != nil {
			c.Close()
			continue
		}
		p.mu.Lock()
		if p.l != l { // went down meanwhile
			p.mu.Unlock()
			c.Close()
			s.Close()
			continue
		}
		p.conns = append(p.conns, c, s)
		p.mu.Unlock()
		go p.pipe(s, c)
		go p.pipe(c, s)
	}
}

// pipe copies from src to dst, holding each chunk while stalled.
func (p *StallProxy) pipe(dst, src net.Conn) {
	defer dst.Close()
	buf := make([]byte, 64<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			p.mu.Lock()
			for p.stalled {
				p.cond.Wait()
			}
			p.mu.Unlock()
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// Silent returns the address of a TCP server on loopback that accepts
// connections and never answers on them, as a stopped server (or one
// behind a partition) looks to a client: it reads and drops what it is
// sent, so that clients never block writing. It stops when t ends.
func Silent(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			go io.Copy(io.Discard, c)
		}
	}()
	t.Cleanup(func() {
		l.Close()
		<-done
		for _, c := range conns {
			c.Close()
		}
	})
	return l.Addr().String()
}
