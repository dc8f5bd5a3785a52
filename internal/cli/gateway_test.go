package cli

import (
	"context"
	"strings"
	"testing"
)

// TestGatewayRefuses checks what sluice gateway refuses before it opens
// the volume.
func TestGatewayRefuses(t *testing.T) {
	keys := map[string]string{gatewayUserEnv: "admin", gatewayPasswordEnv: "12345678"}
	for _, c := range []struct {
		name, addr string
		env        map[string]string
		args       []string
		want       string
	}{
		{"no keys", "127.0.0.1:0", nil, nil, "set MINIO_ROOT_USER and MINIO_ROOT_PASSWORD"},
		{"an access key without a secret", "127.0.0.1:0", map[string]string{gatewayUserEnv: "admin"}, nil, "set MINIO_ROOT_USER and MINIO_ROOT_PASSWORD"},
		{"a certificate without its key", "127.0.0.1:0", keys, []string{"--cert-file", "c.pem"}, "--cert-file and --key-file go together"},
		{"a bad umask", "127.0.0.1:0", keys, []string{"--umask", "999"}, "want an octal mode"},
		{"no port", "127.0.0.1", keys, nil, "want HOST:PORT"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Setenv(gatewayUserEnv, c.env[gatewayUserEnv])
			t.Setenv(gatewayPasswordEnv, c.env[gatewayPasswordEnv])
			root := NewRoot()
			root.SetArgs(append([]string{"gateway", "sqlite3:///nonexistent/meta.db", c.addr}, c.args...))
			err := root.ExecuteContext(context.Background())
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want one with %q", err, c.want)
			}
		})
	}
}
