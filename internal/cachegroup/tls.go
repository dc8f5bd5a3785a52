package cachegroup

import (
	"crypto/ed25519"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"math/big"
	"time"
)

// tlsName is the name in the group's certificate, which clients check.
const tlsName = "sluice-cache-group"

// groupCert returns the TLS certificate of the group whose key is key:
// an Ed25519 key pair derived from it and a self-signed certificate,
// the same on every member (Ed25519 signs deterministically). A client
// that trusts only it talks to a holder of the group's key, with no
// certificate to hand out.
func groupCert(key []byte) (tls.Certificate, *x509.CertPool, error) {
	priv := ed25519.NewKeyFromSeed(subKey(key, "tls")[:ed25519.SeedSize])
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: tlsName},
		DNSNames:              []string{tlsName},
		NotBefore:             time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC),
		NotAfter:              time.Date(2120, 1, 1, 0, 0, 0, 0, time.UTC),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(nil, tmpl, tmpl, priv.Public(), priv)
	if err != nil {
		return tls.Certificate{}, nil, fmt.Errorf("cache group: certificate: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return tls.Certificate{}, nil, fmt.Errorf("cache group: certificate: %w", err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: priv, Leaf: cert}, pool, nil
}

// tlsConfigs returns the server and client TLS configurations of the
// group: each side presents the group's certificate and trusts only it.
func tlsConfigs(key []byte) (server, client *tls.Config, err error) {
	cert, pool, err := groupCert(key)
	if err != nil {
		return nil, nil, err
	}
	server = &tls.Config{Certificates: []tls.Certificate{cert}, ClientCAs: pool,
		ClientAuth: tls.RequireAndVerifyClientCert, MinVersion: tls.VersionTLS13}
	client = &tls.Config{Certificates: []tls.Certificate{cert}, RootCAs: pool, ServerName: tlsName,
		MinVersion: tls.VersionTLS13}
	return server, client, nil
}
