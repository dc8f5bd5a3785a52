package cli

import (
	"context"
	"strings"
	"testing"
)

// TestWebDAVRefuses checks what sluice webdav refuses before it opens
// the volume.
func TestWebDAVRefuses(t *testing.T) {
	for _, c := range []struct {
		name, addr string
		env        map[string]string
		args       []string
		want       string
	}{
		{"open to the network without credentials", "0.0.0.0:0", nil, nil, "is not a loopback address"},
		{"a user without a password", "127.0.0.1:0", map[string]string{webdavUserEnv: "alice"}, nil, "set both WEBDAV_USER and WEBDAV_PASSWORD"},
		{"a certificate without its key", "127.0.0.1:0", nil, []string{"--cert-file", "c.pem"}, "--cert-file and --key-file go together"},
		{"a bad umask", "127.0.0.1:0", nil, []string{"--umask", "999"}, "want an octal mode"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Setenv(webdavUserEnv, c.env[webdavUserEnv])
			t.Setenv(webdavPasswordEnv, c.env[webdavPasswordEnv])
			root := NewRoot()
			root.SetArgs(append([]string{"webdav", "sqlite3:///nonexistent/meta.db", c.addr}, c.args...))
			err := root.ExecuteContext(context.Background())
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want one with %q", err, c.want)
			}
		})
	}
	for addr, want := range map[string]bool{"127.0.0.1:80": true, "[::1]:80": true, "localhost:80": true, "0.0.0.0:80": false, "10.0.0.5:80": false, "host": false} {
		if got := isLoopback(addr); got != want {
			t.Errorf("isLoopback(%q) = %v", addr, got)
		}
	}
}
