package cache

import (
	"bytes"
	"testing"
)

func TestTiered(t *testing.T) {
	mem := NewMemory(1 << 20)
	d := openDisk(t, []string{t.TempDir()}, DiskConfig{})
	c := NewTiered(mem, d)
	c.Put(blockKey(1), blockData(1))
	d.Flush()
	mem.Remove(blockKey(1)) // only on disk now
	b, ok := c.Get(blockKey(1))
	if !ok || !bytes.Equal(b, blockData(1)) {
		t.Fatal("Get from the disk tier failed")
	}
	if _, ok := mem.Get(blockKey(1)); !ok {
		t.Error("a disk hit did not fill the memory tier")
	}
	c.Remove(blockKey(1))
	if _, ok := c.Get(blockKey(1)); ok {
		t.Error("Remove left the block in a tier")
	}
}
