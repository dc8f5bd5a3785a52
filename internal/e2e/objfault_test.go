package e2e

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// faultMount mounts v with SLUICE_FAULTS=spec and a fresh cache directory,
// so reads go to the (faulty) object store.
func faultMount(t *testing.T, v *volume, name, spec string, args ...string) {
	t.Helper()
	t.Setenv("SLUICE_FAULTS", spec)
	v.mount(t, append([]string{"--cache-dir", filepath.Join(v.dir, "cache-"+name), "--get-timeout", "1s", "--put-timeout", "1s"}, args...)...)
	t.Setenv("SLUICE_FAULTS", "")
}

// TestObjectFaults runs a mount over an object store that fails, hangs and
// cuts reads short, and checks the promise to applications: a write
// either fails with EIO or its data is durable, and a read either returns
// the right bytes or EIO, never wrong bytes.
func TestObjectFaults(t *testing.T) {
	v := newVolume(t, "--block-size", "256K")
	files := map[string][]byte{}
	for i := range 6 {
		files[fmt.Sprintf("f%d", i)] = randomData(1<<20+i*4099, uint64(200+i))
	}

	t.Run("transient faults are retried", func(t *testing.T) {
		faultMount(t, v, "flaky", "seed=11,all:err=0.2,get:short=0.2,get:readerr=0.1,put:hang=0.05")
		for name, data := range files {
			err := os.WriteFile(v.path(name), data, 0o644)
			switch {
			case errors.Is(err, syscall.EIO):
				delete(files, name) // not acknowledged: nothing to keep
			case err != nil:
				t.Fatalf("write %s: %v, want success or EIO", name, err)
			}
		}
		if len(files) == 0 {
			t.Fatal("every write failed: retries hid no fault")
		}
		v.umount(t)
		faultMount(t, v, "flaky-read", "seed=12,get:err=0.3,get:short=0.3,get:hang=0.05")
		ok := 0
		for name, data := range files {
			got, err := os.ReadFile(v.path(name))
			switch {
			case errors.Is(err, syscall.EIO):
			case err != nil:
				t.Fatalf("read %s: %v, want the data or EIO", name, err)
			case !bytes.Equal(got, data):
				t.Fatalf("read %s: wrong bytes (%d of %d)", name, len(got), len(data))
			default:
				ok++
			}
		}
		if ok == 0 {
			t.Fatal("every read failed: retries hid no fault")
		}
		v.umount(t)
	})

	t.Run("a store that refuses every read gives EIO", func(t *testing.T) {
		faultMount(t, v, "noget", "get:err=1")
		_, err := os.ReadFile(v.path("f0"))
		if !errors.Is(err, syscall.EIO) {
			t.Fatalf("read with every GET failing: %v, want EIO", err)
		}
		v.umount(t)
	})

	t.Run("a store that refuses every write gives EIO", func(t *testing.T) {
		faultMount(t, v, "noput", "put:err=1")
		err := os.WriteFile(v.path("lost"), randomData(1<<20, 300), 0o644)
		if !errors.Is(err, syscall.EIO) {
			t.Fatalf("write with every PUT failing: %v, want EIO", err)
		}
		v.umount(t)
	})

	t.Run("what was acknowledged is intact", func(t *testing.T) {
		faultMount(t, v, "clean", "")
		for name, data := range files {
			if got, err := os.ReadFile(v.path(name)); err != nil || !bytes.Equal(got, data) {
				t.Fatalf("%s: %d bytes (%v), want %d identical bytes", name, len(got), err, len(data))
			}
		}
		if fi, err := os.Stat(v.path("lost")); err == nil && fi.Size() != 0 {
			got, _ := os.ReadFile(v.path("lost"))
			if !bytes.Equal(got, randomData(1<<20, 300)[:len(got)]) {
				t.Fatalf("the failed write left %d wrong bytes", fi.Size())
			}
		}
		v.umount(t)
		v.wantFsckClean(t)
	})
}
