package chunk

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync"
	"testing"

	"github.com/sluicefs/sluice/internal/object/file"
)

// Environment of the child process of TestWritebackCrash.
const (
	crashCacheEnv  = "SLUICE_TEST_CRASH_CACHE"
	crashObjectEnv = "SLUICE_TEST_CRASH_OBJECTS"
)

// TestWritebackCrash kills a process with SIGKILL while it stages blocks
// with writeback (their uploads held), then opens a store on the same
// cache directory: every block whose putBlock had returned must reach the
// object store byte-identical.
func TestWritebackCrash(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a child process")
	}
	cacheDir, objDir := t.TempDir(), t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestWritebackCrashChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), crashCacheEnv+"="+cacheDir, crashObjectEnv+"="+objDir)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	acked := map[string]uint64{} // key → seed of its data
	sc := bufio.NewScanner(out)
	for len(acked) < 40 && sc.Scan() {
		var seed uint64
		var key string
		if _, err := fmt.Sscan(sc.Text(), &seed, &key); err == nil {
			acked[key] = seed
		}
	}
	if err := cmd.Process.Kill(); err != nil { // SIGKILL, in the middle of the writes
		t.Fatal(err)
	}
	go io.Copy(io.Discard, out)
	cmd.Wait()
	if len(acked) < 40 {
		t.Fatalf("child acknowledged only %d blocks: %v", len(acked), sc.Err())
	}

	obj, err := file.New(objDir)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if got := listAll(t, ctx, obj); len(got) != 0 {
		t.Fatalf("the child stored objects although its uploads were held: %v", got)
	}
	s := openStore(t, obj, cacheDir, Config{})
	if err := s.FlushStaged(ctx); err != nil {
		t.Fatalf("FlushStaged: %v", err)
	}
	for key, seed := range acked {
		r, err := obj.Get(ctx, key, 0, -1)
		if err != nil {
			t.Errorf("acknowledged block %s was not uploaded after the crash: %v", key, err)
			continue
		}
		got, err := io.ReadAll(r)
		r.Close()
		if err != nil || !bytes.Equal(got, pattern(seed, testBlockSize)) {
			t.Errorf("block %s: %d bytes (%v), not the bytes written", key, len(got), err)
		}
	}
	t.Logf("%d acknowledged blocks recovered; %d objects stored in all", len(acked), len(listAll(t, ctx, obj)))
}

// TestWritebackCrashChild is the process TestWritebackCrash kills: it
// stages blocks from four goroutines, uploads held forever, and prints
// "seed key" for each block once putBlock has returned.
func TestWritebackCrashChild(t *testing.T) {
	cacheDir, objDir := os.Getenv(crashCacheEnv), os.Getenv(crashObjectEnv)
	if cacheDir == "" {
		t.Skip("run by TestWritebackCrash")
	}
	base, err := file.New(objDir)
	if err != nil {
		t.Fatal(err)
	}
	held := &holdStore{Store: base, release: make(chan struct{})}
	s, err := Open(held, Config{BlockSize: testBlockSize, CacheDirs: []string{cacheDir},
		VolumeUUID: testVolumeUUID, Writeback: true})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 100 {
				seed := uint64(g*1000 + i)
				id := 1 + seed/4
				if err := s.putBlock(context.Background(), id, int(seed%4), pattern(seed, testBlockSize)); err != nil {
					t.Errorf("putBlock: %v", err)
					return
				}
				mu.Lock()
				fmt.Printf("%d %s\n", seed, BlockKey(id, int(seed%4), testBlockSize, false))
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	select {} // wait for the kill
}
