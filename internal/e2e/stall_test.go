package e2e

import (
	"errors"
	"net"
	"os"
	"regexp"
	"sync"
	"syscall"
	"testing"
	"time"
)

// stallProxy forwards TCP connections to a server and can stall them:
// while stalled, it forwards no byte in either direction and closes
// nothing, which is what a stopped server or a partition without resets
// looks like to a client. The server itself is shared with other tests
// and is never disturbed.
type stallProxy struct {
	l       net.Listener
	target  string
	mu      sync.Mutex
	cond    *sync.Cond
	stalled bool
	conns   []net.Conn
}

func newStallProxy(t *testing.T, target string) *stallProxy {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &stallProxy{l: l, target: target}
	p.cond = sync.NewCond(&p.mu)
	go p.serve()
	t.Cleanup(func() {
		p.stall(false)
		l.Close()
		p.mu.Lock()
		for _, c := range p.conns {
			c.Close()
		}
		p.mu.Unlock()
	})
	return p
}

func (p *stallProxy) addr() string { return p.l.Addr().String() }

// stall stops (on) or resumes forwarding.
func (p *stallProxy) stall(on bool) {
	p.mu.Lock()
	p.stalled = on
	p.mu.Unlock()
	p.cond.Broadcast()
}

func (p *stallProxy) serve() {
	for {
		c, err := p.l.Accept()
		if err != nil {
			return
		}
		s, err := net.Dial("tcp", p.target)
		if err != nil {
			c.Close()
			continue
		}
		p.mu.Lock()
		p.conns = append(p.conns, c, s)
		p.mu.Unlock()
		go p.pipe(s, c)
		go p.pipe(c, s)
	}
}

// pipe copies from src to dst, holding each chunk while stalled.
func (p *stallProxy) pipe(dst, src net.Conn) {
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

// serverAddr matches the HOST:PORT of a metadata URL: after the @ of the
// credentials (MySQL puts it in parentheses), or after the scheme.
var serverAddr = regexp.MustCompile(`(@\(?|://)(127\.0\.0\.1:\d+)`)

// TestEngineOutageEveryServer: on every engine with a server, a metadata
// operation made while the engine does not answer fails with EIO within
// the mount's --meta-timeout, applies nothing, and the mount works again
// once the engine answers. (TestEngineOutage stops a Redis server of its
// own; here the engine's traffic is held by a proxy.)
func TestEngineOutageEveryServer(t *testing.T) {
	for _, engine := range []string{"postgres", "mysql", "etcd", "redis"} {
		t.Run(engine, func(t *testing.T) {
			requireFUSE(t)
			dir := t.TempDir()
			for _, d := range []string{dir, dir + "/.."} {
				os.Chmod(d, 0o755)
			}
			url := metaURL(t, engine, dir)
			m := serverAddr.FindStringSubmatchIndex(url)
			if m == nil {
				t.Fatalf("no loopback HOST:PORT in %s", url)
			}
			proxy := newStallProxy(t, url[m[4]:m[5]])
			url = url[:m[4]] + proxy.addr() + url[m[5]:]
			v := &volume{dir: dir, metaURL: url, bucket: dir + "/bucket", mnt: dir + "/mnt", log: dir + "/mount.log"}
			os.Mkdir(v.mnt, 0o755)
			mustSluice(t, "format", v.metaURL, "vol", "--bucket", v.bucket)
			const bound = 3 * time.Second
			v.mount(t, "--attr-cache", "0", "--entry-cache", "0", "--dir-entry-cache", "0", "--meta-timeout", "3")
			write(t, v.path("before"), []byte("kept"))

			proxy.stall(true)
			start := time.Now()
			err := os.WriteFile(v.path("during"), []byte("x"), 0o644)
			took := time.Since(start)
			proxy.stall(false)
			if !errors.Is(err, syscall.EIO) {
				t.Errorf("create while the engine does not answer: %v, want EIO", err)
			}
			if took > bound+30*time.Second {
				t.Errorf("create while the engine does not answer failed after %v, want about %v", took, bound)
			}
			checkAfterOutage(t, v)
			t.Logf("create during the outage failed after %v", took.Round(time.Millisecond))
		})
	}
}
