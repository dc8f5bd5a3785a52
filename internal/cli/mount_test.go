package cli

import (
	"log/slog"
	"testing"
	"time"
)

// TestMountSessionTimeout checks --session-timeout: parsed as seconds or
// a duration, refused below 3 heartbeats (with the default heartbeat for
// --heartbeat 0), and handed to the metadata client, where 0 stands for
// its default of 25 heartbeats.
func TestMountSessionTimeout(t *testing.T) {
	tests := []struct {
		heartbeat, timeout string
		ok                 bool
		want               time.Duration
	}{
		{"12", "0", true, 0},
		{"12", "36", true, 36 * time.Second},
		{"12", "35", false, 0},
		{"0.2", "0.6", true, 600 * time.Millisecond},
		{"0.2", "500ms", false, 0},
		{"0", "30s", false, 0}, // the default heartbeat, 12 s
		{"0", "1m", true, time.Minute},
		{"12", "10m", true, 10 * time.Minute},
	}
	for _, tt := range tests {
		t.Run(tt.heartbeat+"/"+tt.timeout, func(t *testing.T) {
			o := validMountOptions(t)
			cmd := newMount()
			// The command's flags write into its own options; read them back.
			fl := cmd.Flags()
			if err := fl.Set("heartbeat", tt.heartbeat); err != nil {
				t.Fatal(err)
			}
			if err := fl.Set("session-timeout", tt.timeout); err != nil {
				t.Fatal(err)
			}
			o.heartbeat = *fl.Lookup("heartbeat").Value.(secondsValue).d
			o.sessionTimeout = *fl.Lookup("session-timeout").Value.(secondsValue).d
			err := o.validate()
			if (err == nil) != tt.ok {
				t.Fatalf("validate with --heartbeat %s --session-timeout %s: %v, want ok %v", tt.heartbeat, tt.timeout, err, tt.ok)
			}
			if !tt.ok {
				return
			}
			if got := o.volumeOptions("/mnt", slog.New(slog.DiscardHandler)).Meta.SessionTimeout; got != tt.want {
				t.Errorf("meta.Config.SessionTimeout %v, want %v", got, tt.want)
			}
		})
	}
}

// validMountOptions returns options that pass validate.
func validMountOptions(t *testing.T) *mountOptions {
	t.Helper()
	o := &mountOptions{bufferSize: 300 << 20, maxUploads: 1, maxDownloads: 1, cacheDir: "memory"}
	if err := o.validate(); err != nil {
		t.Fatalf("base options: %v", err)
	}
	return o
}
