package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestMetaServerRefusesOpenPort checks that the server will not serve an
// address other hosts reach without credentials, and says how to give
// them, before it touches its data directory.
func TestMetaServerRefusesOpenPort(t *testing.T) {
	t.Setenv(metaSecretEnv, "")
	dir := filepath.Join(t.TempDir(), "meta")
	_, _, err := runSluice(t, "", "meta-server", "--dir", dir, "--listen", "0.0.0.0:0")
	if err == nil {
		t.Fatal("meta-server started on 0.0.0.0 without a secret")
	}
	for _, want := range []string{"--secret-file", "head -c 32 /dev/urandom", "--insecure-no-auth"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %s", err, want)
		}
	}
	if _, serr := os.Stat(dir); !os.IsNotExist(serr) {
		t.Errorf("the refused server created its data directory: %v", serr)
	}
}

func TestMetaServerAuth(t *testing.T) {
	dir := t.TempDir()
	secretFile := filepath.Join(dir, "meta.secret")
	if err := os.WriteFile(secretFile, []byte("c2VjcmV0\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name       string
		listen     string
		auth       metaServerAuth
		env        string
		wantErr    string // empty: accepted
		wantSecret string
		wantWarn   bool
	}{
		{name: "loopback default", listen: "127.0.0.1:9400"},
		{name: "loopback v6", listen: "[::1]:9400"},
		{name: "localhost", listen: "localhost:9400"},
		{name: "every interface", listen: ":9400", wantErr: "no secret is set"},
		{name: "0.0.0.0", listen: "0.0.0.0:9400", wantErr: "no secret is set"},
		{name: "a host's address", listen: "10.0.0.5:9400", wantErr: "no secret is set"},
		{name: "a name", listen: "meta.example:9400", wantErr: "no secret is set"},
		{name: "insecure on purpose", listen: "0.0.0.0:9400", auth: metaServerAuth{insecureNoAuth: true}, wantWarn: true},
		{name: "secret file", listen: "0.0.0.0:9400", auth: metaServerAuth{secretFile: secretFile}, wantSecret: "c2VjcmV0"},
		{name: "secret in the environment", listen: "0.0.0.0:9400", env: "from-env", wantSecret: "from-env"},
		{name: "both", listen: "0.0.0.0:9400", auth: metaServerAuth{secretFile: secretFile}, env: "x", wantErr: "give one"},
		{name: "missing secret file", listen: "127.0.0.1:9400", auth: metaServerAuth{secretFile: secretFile + ".gone"}, wantErr: "--secret-file"},
		{name: "cert without key", listen: "127.0.0.1:9400", auth: metaServerAuth{tlsCert: "c.pem"}, wantErr: "--tls-cert and --tls-key go together"},
		{name: "client CA without TLS", listen: "127.0.0.1:9400", auth: metaServerAuth{tlsClientCA: "ca.pem"}, wantErr: "needs TLS"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv(metaSecretEnv, tt.env)
			a := tt.auth
			secret, _, err := a.server(tt.listen)
			checkErr(t, err, tt.wantErr)
			if err != nil {
				return
			}
			if string(secret) != tt.wantSecret {
				t.Errorf("secret %q, want %q", secret, tt.wantSecret)
			}
			if a.noAuthOnPurpose != tt.wantWarn {
				t.Errorf("warns of no authentication: %v, want %v", a.noAuthOnPurpose, tt.wantWarn)
			}
		})
	}
}

func checkErr(t *testing.T, err error, want string) {
	t.Helper()
	switch {
	case want == "" && err != nil:
		t.Fatalf("%v, want no error", err)
	case want != "" && err == nil:
		t.Fatalf("no error, want one with %q", want)
	case want != "" && !strings.Contains(err.Error(), want):
		t.Fatalf("%v, want an error with %q", err, want)
	}
}
