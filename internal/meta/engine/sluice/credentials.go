package sluice

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strconv"
	"strings"
)

// credentials sets the endpoint's secret and TLS from the URL: the
// password of its userinfo or secret-file, and tls, ca, server-name,
// cert and key.
func (ep *endpoint) credentials(u *url.URL) error {
	q := u.Query()
	if u.User != nil {
		// The user name is not shown: it may be a secret put in the
		// wrong place.
		if u.User.Username() != "" {
			return errors.New("the secret goes after a colon, with no user name: sluice://:SECRET@HOST:PORT/NAME")
		}
		p, _ := u.User.Password()
		if p == "" {
			return errors.New("empty secret in sluice://:SECRET@HOST:PORT/NAME")
		}
		ep.secret = []byte(p)
	}
	if path := q.Get("secret-file"); path != "" {
		if ep.secret != nil {
			return errors.New("both a secret and secret-file: give one")
		}
		secret, err := ReadSecretFile(path)
		if err != nil {
			return err
		}
		ep.secret = secret
	}
	on := false
	if v := q.Get("tls"); v != "" {
		var err error
		if on, err = strconv.ParseBool(v); err != nil {
			return fmt.Errorf("tls %q: want true or false: %w", v, err)
		}
	}
	if !on {
		for _, k := range []string{"ca", "server-name", "cert", "key"} {
			if q.Has(k) {
				return fmt.Errorf("%s applies to TLS: add tls=true", k)
			}
		}
		return nil
	}
	conf, err := clientTLS(q, u.Hostname())
	if err != nil {
		return err
	}
	ep.tls = conf
	return nil
}

// redacted returns the URL for messages: its userinfo, which holds the
// secret (or a secret put where the user name goes), is replaced.
func redacted(u *url.URL) string {
	c := *u
	if c.User != nil {
		c.User = url.UserPassword("", "xxxxx")
	}
	return c.String()
}

// clientTLS builds the TLS configuration of the URL's options.
func clientTLS(q url.Values, host string) (*tls.Config, error) {
	conf := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: host}
	if v := q.Get("server-name"); v != "" {
		conf.ServerName = v
	}
	if path := q.Get("ca"); path != "" {
		pem, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("ca: %w", err)
		}
		conf.RootCAs = x509.NewCertPool()
		if !conf.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("ca %s: no PEM certificate in it", path)
		}
	}
	cert, key := q.Get("cert"), q.Get("key")
	if (cert == "") != (key == "") {
		return nil, errors.New("cert and key go together: the client's certificate and its private key, for a server that requires one")
	}
	if cert != "" {
		pair, err := tls.LoadX509KeyPair(cert, key)
		if err != nil {
			return nil, fmt.Errorf("client certificate: %w", err)
		}
		conf.Certificates = []tls.Certificate{pair}
	}
	return conf, nil
}

// ReadSecretFile returns the secret in the file at path, less a trailing
// newline: what the server's --secret-file and the URL's secret-file
// hold. A file that cannot be read, or holds nothing, is an error.
func ReadSecretFile(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("secret file: %w", err)
	}
	s := strings.TrimRight(string(b), "\r\n")
	if s == "" {
		return nil, fmt.Errorf("secret file %s is empty", path)
	}
	return []byte(s), nil
}
