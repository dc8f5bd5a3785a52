package wire

import (
	"bytes"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"time"
)

// The handshake runs on a new connection before any frame (after TLS,
// when the connection has it). It proves that both ends hold the same
// secret without sending it, and that both mean the same use of it
// (purpose: "client" for the clients' port, "raft" for the servers'):
//
//	client → server  magic, purpose, has-secret flag, client nonce
//	server → client  magic, purpose, has-secret flag, server nonce
//	client → server  client proof                       (both have secrets)
//	server → client  verdict, server proof               (both have secrets)
//
// A proof is HMAC-SHA256 over the purpose, both nonces and the prover's
// role, keyed by HMAC-SHA256(secret, "sluice auth v1 "+purpose). Fresh
// nonces on both sides make a proof recorded on one connection useless
// on another, and the role makes the server's proof useless as the
// client's. The client proves itself first, so that a peer without the
// secret learns nothing from the server that would let it guess the
// secret offline; the server's verdict then tells the client plainly
// whether its secret was refused. The flags let each end say which side
// lacks a secret instead of a bare failure.
//
// The handshake authenticates; it does not encrypt or protect the bytes
// that follow from a peer in the middle: that is what TLS is for.

// ErrAuth marks a handshake refused: a secret missing or wrong on one
// side, or a peer that means another purpose. It is permanent: dialling
// again with the same secret gets the same answer. Errors of the network
// (a peer that closed or went silent) are not marked.
var ErrAuth = errors.New("authentication failed")

// authTimeout bounds the whole handshake; tests shorten it.
var authTimeout = 5 * time.Second

const (
	authMagic    = "SLUICEA1"
	authNonceLen = 32
	authProofLen = sha256.Size

	authHasSecret byte = 1

	verdictOK      byte = 0
	verdictRefused byte = 1
)

// authHello is the first message of each side.
type authHello struct {
	purpose   string
	hasSecret bool
	nonce     [authNonceLen]byte
}

// AuthServer runs the server's side of the handshake on a new connection
// nc, before any frame: it checks that the client proves knowledge of
// secret for purpose, and proves its own. An empty secret accepts only
// clients without one. On failure the caller closes nc; the error wraps
// ErrAuth when the client was refused, and says which side lacks the
// secret or has a different one. The handshake is bounded by a deadline
// set on nc and cleared on return.
func AuthServer(nc net.Conn, secret []byte, purpose string) error {
	if err := nc.SetDeadline(time.Now().Add(authTimeout)); err != nil {
		return fmt.Errorf("handshake: %w", err)
	}
	// Clearing fails only on a connection already closed, which its next
	// read reports.
	defer nc.SetDeadline(time.Time{})
	peer, err := readHello(nc)
	if err != nil {
		return fmt.Errorf("handshake with client: %w", err)
	}
	mine, err := newHello(secret, purpose)
	if err != nil {
		return err
	}
	if err := writeAll(nc, mine.encode()); err != nil {
		return fmt.Errorf("handshake with client: %w", err)
	}
	switch {
	case peer.purpose != purpose:
		return fmt.Errorf("client asks for a %q connection, this port serves %q: %w", peer.purpose, purpose, ErrAuth)
	case len(secret) > 0 && !peer.hasSecret:
		return fmt.Errorf("client gave no secret, and this server requires one: %w", ErrAuth)
	case len(secret) == 0 && peer.hasSecret:
		return fmt.Errorf("client gave a secret, and this server has none to check it against (give the server the secret too): %w", ErrAuth)
	case len(secret) == 0:
		return nil
	}
	key := authKey(secret, purpose)
	var got [authProofLen]byte
	if _, err := io.ReadFull(nc, got[:]); err != nil {
		return fmt.Errorf("handshake with client: %w", readErr(err))
	}
	want := authProof(key, purpose, peer.nonce[:], mine.nonce[:], "client")
	if !hmac.Equal(got[:], want) {
		// Tell the client its secret was refused; the server's proof is
		// not sent to a peer that could not prove its own.
		writeAll(nc, append([]byte{verdictRefused}, make([]byte, authProofLen)...))
		return fmt.Errorf("client's secret is not this server's: %w", ErrAuth)
	}
	reply := append([]byte{verdictOK}, authProof(key, purpose, peer.nonce[:], mine.nonce[:], "server")...)
	if err := writeAll(nc, reply); err != nil {
		return fmt.Errorf("handshake with client: %w", err)
	}
	return nil
}

// AuthClient runs the client's side of the handshake on a new connection
// nc, before any frame: it proves knowledge of secret for purpose and
// checks that the server proves it too, so that a client with a secret
// refuses a server that does not know it. An empty secret connects only
// to servers without one. The error wraps ErrAuth when either side
// refused the other, and says which side lacks the secret or has a
// different one. The handshake is bounded by a deadline set on nc and
// cleared on return.
func AuthClient(nc net.Conn, secret []byte, purpose string) error {
	if err := nc.SetDeadline(time.Now().Add(authTimeout)); err != nil {
		return fmt.Errorf("handshake: %w", err)
	}
	// Clearing fails only on a connection already closed, which its next
	// read reports.
	defer nc.SetDeadline(time.Time{})
	mine, err := newHello(secret, purpose)
	if err != nil {
		return err
	}
	if err := writeAll(nc, mine.encode()); err != nil {
		return fmt.Errorf("handshake with server: %w", err)
	}
	peer, err := readHello(nc)
	if err != nil {
		return fmt.Errorf("handshake with server: %w", err)
	}
	switch {
	case peer.purpose != purpose:
		return fmt.Errorf("server serves %q connections on this port, not %q: %w", peer.purpose, purpose, ErrAuth)
	case len(secret) == 0 && peer.hasSecret:
		return fmt.Errorf("server requires a secret, and none was given: %w", ErrAuth)
	case len(secret) > 0 && !peer.hasSecret:
		return fmt.Errorf("server has no secret, so it cannot prove it holds this one; refusing it (give the server the secret, or drop it here): %w", ErrAuth)
	case len(secret) == 0:
		return nil
	}
	key := authKey(secret, purpose)
	if err := writeAll(nc, authProof(key, purpose, mine.nonce[:], peer.nonce[:], "client")); err != nil {
		return fmt.Errorf("handshake with server: %w", err)
	}
	var reply [1 + authProofLen]byte
	if _, err := io.ReadFull(nc, reply[:]); err != nil {
		return fmt.Errorf("handshake with server: %w", readErr(err))
	}
	if reply[0] != verdictOK {
		return fmt.Errorf("server refused this secret: it is not the server's: %w", ErrAuth)
	}
	want := authProof(key, purpose, mine.nonce[:], peer.nonce[:], "server")
	if !hmac.Equal(reply[1:], want) {
		return fmt.Errorf("server's proof does not match this secret: it does not hold it: %w", ErrAuth)
	}
	return nil
}

func newHello(secret []byte, purpose string) (authHello, error) {
	if len(purpose) == 0 || len(purpose) > 255 {
		return authHello{}, fmt.Errorf("handshake purpose %q: want 1 to 255 bytes", purpose)
	}
	h := authHello{purpose: purpose, hasSecret: len(secret) > 0}
	if _, err := rand.Read(h.nonce[:]); err != nil {
		return authHello{}, fmt.Errorf("handshake nonce: %w", err)
	}
	return h, nil
}

func (h authHello) encode() []byte {
	b := make([]byte, 0, len(authMagic)+2+len(h.purpose)+authNonceLen)
	b = append(b, authMagic...)
	b = append(b, byte(len(h.purpose)))
	b = append(b, h.purpose...)
	var flags byte
	if h.hasSecret {
		flags |= authHasSecret
	}
	b = append(b, flags)
	return append(b, h.nonce[:]...)
}

// readHello reads the peer's first message. A peer that does not start
// with the magic (one that sends frames at once: an older version, or
// not sluice at all) is refused.
func readHello(r io.Reader) (authHello, error) {
	var head [len(authMagic) + 1]byte
	if _, err := io.ReadFull(r, head[:]); err != nil {
		return authHello{}, readErr(err)
	}
	if !bytes.Equal(head[:len(authMagic)], []byte(authMagic)) {
		return authHello{}, fmt.Errorf("peer did not start the authentication handshake (an older version of sluice, or not sluice): %w", ErrAuth)
	}
	rest := make([]byte, int(head[len(authMagic)])+1+authNonceLen)
	if _, err := io.ReadFull(r, rest); err != nil {
		return authHello{}, readErr(err)
	}
	n := len(rest) - 1 - authNonceLen
	h := authHello{purpose: string(rest[:n]), hasSecret: rest[n]&authHasSecret != 0}
	copy(h.nonce[:], rest[n+1:])
	return h, nil
}

// readErr explains a read that failed in the handshake.
func readErr(err error) error {
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return fmt.Errorf("peer did not complete the handshake within %v: %w", authTimeout, err)
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return fmt.Errorf("peer closed the connection in the handshake (does it want TLS? is it an older version?): %w", err)
	}
	return err
}

func writeAll(w io.Writer, p []byte) error {
	_, err := w.Write(p)
	return err
}

// authKey derives the key of one purpose from the secret, so that the
// secret itself never keys a proof and a proof of one purpose is no
// proof of another.
func authKey(secret []byte, purpose string) []byte {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte("sluice auth v1 " + purpose))
	return m.Sum(nil)
}

// authProof is a role's proof over both nonces (client's first).
func authProof(key []byte, purpose string, clientNonce, serverNonce []byte, role string) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte{byte(len(purpose))})
	m.Write([]byte(purpose))
	m.Write(clientNonce)
	m.Write(serverNonce)
	m.Write([]byte(role))
	return m.Sum(nil)
}
