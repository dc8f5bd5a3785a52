package cli

import "testing"

func TestRedactURL(t *testing.T) {
	tests := []struct{ in, want string }{
		{"sluice://:s3cret@10.0.0.5:9400/vol", "sluice://:removed@10.0.0.5:9400/vol"},
		{"sluice://:s3cret@10.0.0.5:9400/vol?tls=true&ca=%2Fetc%2Fca.pem", "sluice://:removed@10.0.0.5:9400/vol?tls=true&ca=%2Fetc%2Fca.pem"},
		{"sluice://10.0.0.5:9400/vol?secret-file=/etc/sluice/meta.secret", "sluice://10.0.0.5:9400/vol?secret-file=/etc/sluice/meta.secret"},
		{"redis://user:pw@127.0.0.1:6379/1", "redis://user:removed@127.0.0.1:6379/1"},
		{"sqlite3:///var/lib/vol.db", "sqlite3:///var/lib/vol.db"},
		{"30s", "30s"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			if got := redactURL(tt.in); got != tt.want {
				t.Errorf("redactURL(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}
