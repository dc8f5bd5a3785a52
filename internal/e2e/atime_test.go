package e2e

import (
	"os"
	"testing"

	"golang.org/x/sys/unix"
)

// TestAtimeModes checks that reads update access times as the mount's
// --atime-mode says.
func TestAtimeModes(t *testing.T) {
	for _, tc := range []struct {
		mode    string
		updates bool
	}{{"noatime", false}, {"relatime", true}, {"strictatime", true}} {
		t.Run(tc.mode, func(t *testing.T) {
			v := newVolume(t)
			v.mount(t, "--atime-mode", tc.mode, "--attr-cache", "0")
			p := v.path("f")
			write(t, p, []byte("data"))
			old := []unix.Timespec{{Sec: 1000}, {Sec: 2000}} // atime before mtime
			if err := unix.UtimesNano(p, old); err != nil {
				t.Fatal(err)
			}
			if _, err := os.ReadFile(p); err != nil {
				t.Fatal(err)
			}
			var st unix.Stat_t
			if err := unix.Stat(p, &st); err != nil {
				t.Fatal(err)
			}
			if updated := st.Atim.Sec != 1000; updated != tc.updates {
				t.Errorf("atime after a read: %v (updated %v, want %v)", st.Atim, updated, tc.updates)
			}
		})
	}
}
