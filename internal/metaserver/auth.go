package metaserver

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/sluicefs/sluice/internal/wire"
)

// tlsTimeout bounds a client's TLS handshake, as wire bounds the secret's.
const tlsTimeout = 5 * time.Second

// admit runs TLS (when configured) and the secret's handshake on a new
// connection, then serves it; a connection that fails either is closed
// before any request of it is read, and logged with its address (a
// refusal at warning level, and counted; a peer that just left, at debug
// level). A server closed
// meanwhile closes the connection at once instead of waiting for the
// handshake's deadline.
func (s *Server) admit(nc net.Conn) {
	done := make(chan struct{})
	go func() {
		select {
		case <-s.stop:
			nc.Close()
		case <-done:
		}
	}()
	nc, err := s.handshake(nc)
	close(done)
	if err != nil {
		// Counted and logged before the close, so that a client that sees
		// the close sees the count.
		defer nc.Close()
		if s.closed.Load() {
			return
		}
		remote := nc.RemoteAddr().String()
		var certErr *tls.CertificateVerificationError
		switch {
		case errors.Is(err, wire.ErrAuth) || errors.As(err, &certErr):
			s.m.refused.Inc()
			s.log.Warn("refused a connection", "remote", remote, "err", err)
		case errors.Is(err, io.EOF):
			// The peer left: a probe of the port (a health check, a
			// script waiting for the server), not a refusal.
			s.log.Debug("connection closed by its peer in the handshake", "remote", remote, "err", err)
		default:
			s.m.refused.Inc()
			s.log.Info("closed a connection in its handshake", "remote", remote, "err", err)
		}
		return
	}
	s.serve(nc)
}

// handshake returns the connection to serve: nc, or TLS over it.
func (s *Server) handshake(nc net.Conn) (net.Conn, error) {
	if s.opts.TLS != nil {
		tc := tls.Server(nc, s.opts.TLS)
		ctx, cancel := context.WithTimeout(context.Background(), tlsTimeout)
		err := tc.HandshakeContext(ctx)
		cancel()
		if err != nil {
			return nc, fmt.Errorf("TLS: %w", err)
		}
		nc = tc
	}
	if err := wire.AuthServer(nc, s.opts.Secret, "client"); err != nil {
		return nc, err
	}
	return nc, nil
}
