package wire

import (
	"bytes"
	"errors"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"
)

// handshake runs both sides over a pipe and returns their errors. Each
// side closes its end when it returns, as the real callers do on failure,
// so that the other side never waits for the deadline.
func handshake(t *testing.T, clientSecret, serverSecret []byte, clientPurpose, serverPurpose string) (clientErr, serverErr error) {
	t.Helper()
	c, s := net.Pipe()
	var wg sync.WaitGroup
	wg.Go(func() {
		serverErr = AuthServer(s, serverSecret, serverPurpose)
		s.Close()
	})
	clientErr = AuthClient(c, clientSecret, clientPurpose)
	c.Close()
	wg.Wait()
	return clientErr, serverErr
}

func TestAuth(t *testing.T) {
	secret, other := []byte("s3cret-s3cret"), []byte("another one")
	tests := []struct {
		name                         string
		client, server               []byte
		clientPurpose, serverPurpose string
		// wantClient and wantServer are substrings of the errors; empty:
		// no error.
		wantClient, wantServer string
	}{
		{name: "right secret", client: secret, server: secret},
		{name: "no secrets", client: nil, server: nil},
		{name: "client secret wrong", client: other, server: secret,
			wantClient: "server refused this secret", wantServer: "client's secret is not this server's"},
		{name: "server secret wrong", client: secret, server: other,
			wantClient: "server refused this secret", wantServer: "client's secret is not this server's"},
		{name: "client secret missing", client: nil, server: secret,
			wantClient: "server requires a secret, and none was given", wantServer: "client gave no secret"},
		{name: "server secret missing", client: secret, server: nil,
			wantClient: "server has no secret", wantServer: "this server has none"},
		{name: "purpose mismatch", client: secret, server: secret, clientPurpose: "client", serverPurpose: "raft",
			wantClient: `server serves "raft" connections on this port, not "client"`, wantServer: `client asks for a "client" connection, this port serves "raft"`},
		{name: "purpose mismatch without secrets", clientPurpose: "raft", serverPurpose: "client",
			wantClient: "not \"raft\"", wantServer: "this port serves \"client\""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cp, sp := tt.clientPurpose, tt.serverPurpose
			if cp == "" {
				cp, sp = "client", "client"
			}
			cerr, serr := handshake(t, tt.client, tt.server, cp, sp)
			checkAuthErr(t, "client", cerr, tt.wantClient)
			checkAuthErr(t, "server", serr, tt.wantServer)
			for _, err := range []error{cerr, serr} {
				if err != nil && (strings.Contains(err.Error(), string(secret)) || strings.Contains(err.Error(), string(other))) {
					t.Errorf("error shows the secret: %v", err)
				}
			}
		})
	}
}

func checkAuthErr(t *testing.T, side string, err error, want string) {
	t.Helper()
	switch {
	case want == "" && err != nil:
		t.Errorf("%s: %v, want success", side, err)
	case want != "" && err == nil:
		t.Errorf("%s succeeded, want an error with %q", side, want)
	case want != "" && !strings.Contains(err.Error(), want):
		t.Errorf("%s: %v, want an error with %q", side, err, want)
	case want != "" && !errors.Is(err, ErrAuth):
		t.Errorf("%s: %v does not wrap ErrAuth", side, err)
	}
}

// recorder keeps what is written through it.
type recorder struct {
	net.Conn
	mu  sync.Mutex
	out bytes.Buffer
}

func (r *recorder) Write(p []byte) (int, error) {
	r.mu.Lock()
	r.out.Write(p)
	r.mu.Unlock()
	return r.Conn.Write(p)
}

// TestAuthReplay sends what a client wrote in a good handshake, byte for
// byte, on a new connection: the server's nonce is new, so the recorded
// proof proves nothing.
func TestAuthReplay(t *testing.T) {
	secret := []byte("s3cret")
	c, s := net.Pipe()
	rec := &recorder{Conn: c}
	done := make(chan error, 1)
	go func() { done <- AuthServer(s, secret, "client") }()
	if err := AuthClient(rec, secret, "client"); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	c.Close()
	s.Close()
	recorded := rec.out.Bytes()

	c, s = net.Pipe()
	defer c.Close()
	go func() {
		done <- AuthServer(s, secret, "client")
		s.Close()
	}()
	go io.Copy(io.Discard, c) // the server's messages, unread by a replaying peer
	c.Write(recorded)
	err := <-done
	if err == nil || !errors.Is(err, ErrAuth) {
		t.Fatalf("server accepted a replayed handshake: %v", err)
	}
}

// TestAuthSilentPeer checks that each side gives up on a peer that
// sends nothing within the deadline.
func TestAuthSilentPeer(t *testing.T) {
	old := authTimeout
	authTimeout = 200 * time.Millisecond
	t.Cleanup(func() { authTimeout = old })
	tests := []struct {
		name string
		run  func(net.Conn) error
	}{
		{"server", func(nc net.Conn) error { return AuthServer(nc, []byte("x"), "client") }},
		{"client", func(nc net.Conn) error { return AuthClient(nc, []byte("x"), "client") }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, s := net.Pipe()
			defer c.Close()
			defer s.Close()
			go io.Copy(io.Discard, s) // the silent peer reads, never writes
			start := time.Now()
			err := tt.run(c)
			if err == nil || !strings.Contains(err.Error(), "did not complete the handshake") {
				t.Fatalf("%s: %v, want a deadline error", tt.name, err)
			}
			if d := time.Since(start); d > 2*time.Second {
				t.Fatalf("%s gave up after %v", tt.name, d)
			}
		})
	}
}

// TestAuthNotSluice checks that a peer sending frames at once (an older
// client) is refused by the server without a reply.
func TestAuthNotSluice(t *testing.T) {
	c, s := net.Pipe()
	defer c.Close()
	done := make(chan error, 1)
	go func() {
		done <- AuthServer(s, nil, "client")
		s.Close()
	}()
	b := NewFrame(1, OpHello)
	b.Uvarint(2)
	b.Bytes([]byte("vol"))
	go c.Write(b.Finish())
	if err := <-done; err == nil || !errors.Is(err, ErrAuth) {
		t.Fatalf("server: %v, want a refusal", err)
	}
	if n, err := c.Read(make([]byte, 1)); n != 0 || err == nil {
		t.Fatalf("server replied %d bytes, %v", n, err)
	}
}
