package metaserver

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/sluicefs/sluice/internal/wire"
)

// tlsTimeout bounds a client's TLS handshake, as wire bounds the secret's.
const tlsTimeout = 5 * time.Second

// admit runs TLS (when configured) and the secret's handshake on a new
// connection, then serves it; a connection that fails either is logged,
// counted and closed before any request of it is read. A server closed
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
		nc.Close()
		if s.closed.Load() {
			return
		}
		s.m.refused.Inc()
		remote := nc.RemoteAddr().String()
		var certErr *tls.CertificateVerificationError
		if errors.Is(err, wire.ErrAuth) || errors.As(err, &certErr) {
			s.log.Warn("refused a connection", "remote", remote, "err", err)
		} else {
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
