package sluice_test

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"io"
	"log/slog"
	"math/big"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluicefs/sluice/internal/meta/engine/sluice"
	"github.com/sluicefs/sluice/internal/meta/store/kvstore"
	"github.com/sluicefs/sluice/internal/metaserver"
	"github.com/sluicefs/sluice/internal/wire"
)

const testSecret = "pVq7tZ0sD/3+secret=="

// startSecure runs a metadata server on loopback with the options'
// Secret and TLS and returns it with its address.
func startSecure(t *testing.T, secret []byte, conf *tls.Config) (*metaserver.Server, string) {
	t.Helper()
	srv, err := metaserver.Open(metaserver.Options{Dir: t.TempDir(), Secret: secret, TLS: conf,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(l)
	t.Cleanup(func() {
		if err := srv.Close(); err != nil {
			t.Errorf("close server: %v", err)
		}
	})
	return srv, l.Addr().String()
}

// refused returns the server's count of refused connections.
func refused(t *testing.T, srv *metaserver.Server) float64 {
	t.Helper()
	fams, err := srv.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		if f.GetName() == "sluice_metaserver_refused_connections_total" {
			return f.GetMetric()[0].GetCounter().GetValue()
		}
	}
	t.Fatal("no sluice_metaserver_refused_connections_total")
	return 0
}

// waitRefused waits until the server has counted want refused
// connections, and fails if it counts more.
func waitRefused(t *testing.T, srv *metaserver.Server, want float64) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		got := refused(t, srv)
		if got == want {
			return
		}
		if got > want || time.Now().After(deadline) {
			t.Fatalf("refused connections = %v, want %v", got, want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// useDB checks that db serves a transaction and the server's figures.
func useDB(t *testing.T, db *sluice.DB) {
	t.Helper()
	ctx := context.Background()
	if err := db.Update(ctx, func(tx kvstore.Txn) error {
		tx.Set([]byte("k"), []byte("v"))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Report(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestSecret(t *testing.T) {
	srv, addr := startSecure(t, []byte(testSecret), nil)
	file := filepath.Join(t.TempDir(), "meta.secret")
	if err := os.WriteFile(file, []byte(testSecret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	wrongFile := filepath.Join(t.TempDir(), "wrong.secret")
	if err := os.WriteFile(wrongFile, []byte("not it\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	inURL := "sluice://:" + url.PathEscape(testSecret) + "@" + addr + "/test"
	tests := []struct {
		name string
		url  string
		want string // a substring of Open's error; empty: Open works
	}{
		{"secret in the URL", inURL, ""},
		{"secret file", "sluice://" + addr + "/test?secret-file=" + file, ""},
		{"wrong secret", "sluice://:wrong@" + addr + "/test?timeout=60s", "server refused this secret"},
		{"wrong secret file", "sluice://" + addr + "/test?secret-file=" + wrongFile, "server refused this secret"},
		{"no secret", "sluice://" + addr + "/test?timeout=60s", "server requires a secret, and none was given"},
		{"missing secret file", "sluice://" + addr + "/test?secret-file=" + file + ".gone", "secret file"},
		{"user name instead of secret", "sluice://" + testSecret[:5] + "@" + addr + "/test", "the secret goes after a colon"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			start := time.Now()
			db, err := sluice.Open(context.Background(), tt.url, true)
			if tt.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				defer db.Close()
				useDB(t, db)
				if strings.Contains(db.Name(), testSecret[:8]) || strings.Contains(db.Name(), url.PathEscape(testSecret)) {
					t.Errorf("Name() = %q shows the secret", db.Name())
				}
				return
			}
			if err == nil {
				db.Close()
				t.Fatalf("Open worked, want an error with %q", tt.want)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Open: %v, want an error with %q", err, tt.want)
			}
			if strings.Contains(err.Error(), testSecret[:5]) || strings.Contains(err.Error(), "wrong@") {
				t.Errorf("Open's error shows the secret: %v", err)
			}
			if d := time.Since(start); d > 3*time.Second {
				t.Errorf("Open failed after %v: a refused secret must not be retried", d)
			}
		})
	}
	// The server counts a refusal once its side of the handshake ends,
	// which may be after the client's.
	waitRefused(t, srv, 3)
}

// TestNoHandshake sends requests without the handshake, as a client of
// the previous protocol would: the server closes the connection without
// a byte of reply, not even to OpStats.
func TestNoHandshake(t *testing.T) {
	for _, secret := range [][]byte{nil, []byte(testSecret)} {
		srv, addr := startSecure(t, secret, nil)
		nc, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		hello := wire.NewFrame(1, wire.OpHello)
		hello.Uvarint(wire.Version)
		hello.Bytes([]byte("test"))
		stats := wire.NewFrame(2, wire.OpStats)
		nc.Write(append(hello.Finish(), stats.Finish()...))
		nc.SetReadDeadline(time.Now().Add(10 * time.Second))
		n, err := bufio.NewReader(nc).Read(make([]byte, 1))
		nc.Close()
		if n != 0 || err == nil {
			t.Fatalf("secret %q: the server answered a client that skipped the handshake (%d bytes, %v)", secret, n, err)
		}
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			t.Fatalf("secret %q: the server kept the connection open", secret)
		}
		if got := refused(t, srv); got != 1 {
			t.Errorf("secret %q: refused connections = %v, want 1", secret, got)
		}
	}
}

func TestTLS(t *testing.T) {
	dir := t.TempDir()
	serverCert, serverPEM := selfSigned(t, dir, "server")
	_, clientPEM := selfSigned(t, dir, "client")
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(mustRead(t, clientPEM))
	secret := "s3cret"
	_, addr := startSecure(t, []byte(secret), &tls.Config{Certificates: []tls.Certificate{serverCert}, MinVersion: tls.VersionTLS12})
	_, mutual := startSecure(t, []byte(secret), &tls.Config{Certificates: []tls.Certificate{serverCert}, MinVersion: tls.VersionTLS12,
		ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: pool})
	clientKey := filepath.Join(dir, "client.key")
	tests := []struct {
		name string
		url  string
		want string
	}{
		{"trusted", "sluice://:" + secret + "@" + addr + "/test?tls=true&ca=" + serverPEM, ""},
		{"server name", "sluice://:" + secret + "@" + addr + "/test?tls=true&ca=" + serverPEM + "&server-name=127.0.0.1", ""},
		{"no CA", "sluice://:" + secret + "@" + addr + "/test?tls=true&timeout=60s", "certificate"},
		{"wrong server name", "sluice://:" + secret + "@" + addr + "/test?tls=true&ca=" + serverPEM + "&server-name=elsewhere.example&timeout=60s", "certificate"},
		{"plain client", "sluice://:" + secret + "@" + addr + "/test?timeout=60s", "closed the connection in the handshake (does it want TLS?"},
		{"ca without tls", "sluice://:" + secret + "@" + addr + "/test?ca=" + serverPEM, "add tls=true"},
		{"mutual", "sluice://:" + secret + "@" + mutual + "/test?tls=true&ca=" + serverPEM + "&cert=" + clientPEM + "&key=" + clientKey, ""},
		{"mutual without a client certificate", "sluice://:" + secret + "@" + mutual + "/test?tls=true&ca=" + serverPEM + "&timeout=60s", "certificate"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			start := time.Now()
			db, err := sluice.Open(context.Background(), tt.url, true)
			if tt.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				defer db.Close()
				useDB(t, db)
				return
			}
			if err == nil {
				db.Close()
				t.Fatalf("Open worked, want an error with %q", tt.want)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Open: %v, want an error with %q", err, tt.want)
			}
			if d := time.Since(start); d > 8*time.Second {
				t.Errorf("Open failed after %v", d)
			}
		})
	}
}

// selfSigned writes a self-signed certificate for 127.0.0.1 to
// dir/NAME.pem and its key to dir/NAME.key.
func selfSigned(t *testing.T, dir, name string) (tls.Certificate, string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(time.Now().UnixNano()),
		Subject:               pkix.Name{CommonName: "sluice test " + name},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IPAddresses:           []net.IP{net.ParseIP("127.0.0.1")},
		DNSNames:              []string{"localhost"},
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder})
	certPath := filepath.Join(dir, name+".pem")
	if err := os.WriteFile(certPath, certPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name+".key"), keyPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	return pair, certPath
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
