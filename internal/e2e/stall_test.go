package e2e

import (
	"errors"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/sluicefs/sluice/internal/testserver"
)

// TestEngineOutageEveryServer: on every engine with a server, a metadata
// operation made while the engine does not answer fails with EIO within
// the mount's --meta-timeout, applies nothing, and the mount works again
// once the engine answers. (TestEngineOutage stops a Redis server of its
// own; here the engine's traffic is held by a proxy.)
func TestEngineOutageEveryServer(t *testing.T) {
	for _, engine := range []string{"postgres", "mysql", "etcd", "redis"} {
		t.Run(engine, func(t *testing.T) {
			requireFUSE(t)
			dir := t.TempDir()
			for _, d := range []string{dir, dir + "/.."} {
				os.Chmod(d, 0o755)
			}
			url, proxy := testserver.Proxied(t, metaURL(t, engine, dir))
			v := &volume{dir: dir, metaURL: url, bucket: dir + "/bucket", mnt: dir + "/mnt", log: dir + "/mount.log"}
			os.Mkdir(v.mnt, 0o755)
			mustSluice(t, "format", v.metaURL, "vol", "--bucket", v.bucket)
			const bound = 3 * time.Second
			v.mount(t, "--attr-cache", "0", "--entry-cache", "0", "--dir-entry-cache", "0", "--meta-timeout", "3")
			write(t, v.path("before"), []byte("kept"))

			proxy.Stall(true)
			start := time.Now()
			err := os.WriteFile(v.path("during"), []byte("x"), 0o644)
			took := time.Since(start)
			proxy.Stall(false)
			if !errors.Is(err, syscall.EIO) {
				t.Errorf("create while the engine does not answer: %v, want EIO", err)
			}
			if took > bound+30*time.Second {
				t.Errorf("create while the engine does not answer failed after %v, want about %v", took, bound)
			}
			checkAfterOutage(t, v)
			t.Logf("create during the outage failed after %v", took.Round(time.Millisecond))
		})
	}
}
