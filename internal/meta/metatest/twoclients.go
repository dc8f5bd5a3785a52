package metatest

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/sluicefs/sluice/internal/meta"
	"github.com/sluicefs/sluice/internal/meta/store"
)

// TwoClients formats st1, opens a second handle of the same database with
// open2, and runs two meta clients, one on each, creating 200 files each in one directory at
// the same time; all 400 must exist with distinct inodes.
func TwoClients(t *testing.T, st1 store.Store, open2 func() store.Store) {
	ctx := context.Background()
	if _, err := meta.FormatVolume(ctx, st1, &meta.Format{Name: "test", UUID: "u", Storage: "mem", Bucket: "x", BlockSize: 4096}); err != nil {
		t.Fatal(err)
	}
	st2 := open2()
	const perClient = 200
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i, st := range []store.Store{st1, st2} {
		wg.Go(func() {
			c, err := meta.NewSession(ctx, st, meta.Config{})
			if err != nil {
				errs[i] = err
				return
			}
			defer func() {
				if err := c.Close(ctx); err != nil && errs[i] == nil {
					errs[i] = err
				}
			}()
			for j := range perClient {
				name := fmt.Sprintf("c%d-%03d", i, j)
				if _, err := c.Mknod(ctx, meta.RootIno, []byte(name), meta.NewNode{Type: store.TypeFile, Mode: 0o644}); err != nil {
					errs[i] = fmt.Errorf("create %s: %w", name, err)
					return
				}
			}
		})
	}
	wg.Wait()
	done := time.Now()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("client %d: %v", i, err)
		}
	}
	c, err := meta.NewSession(ctx, st2, meta.Config{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	es, err := c.ReadDir(ctx, meta.RootIno, nil, 1000, true)
	if err != nil {
		t.Fatal(err)
	}
	if len(es) != 2*perClient {
		t.Fatalf("%d entries, want %d", len(es), 2*perClient)
	}
	seen := map[meta.Ino]bool{}
	for _, e := range es {
		if e.Attr == nil || seen[e.Ino] {
			t.Fatalf("entry %q: inode %d missing or shared", e.Name, e.Ino)
		}
		seen[e.Ino] = true
	}
	// Each client flushed its usage counters when it closed; the flush of
	// the client on st1 may stay unseen through st2 for store.MaxLag.
	for {
		began := time.Now()
		st, err := c.StatFS(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if st.UsedInodes == 2*perClient {
			break
		}
		if st.UsedInodes > 2*perClient || began.Sub(done) > store.MaxLag {
			t.Fatalf("statfs counts %d inodes %v after the clients closed, want %d",
				st.UsedInodes, began.Sub(done).Round(time.Millisecond), 2*perClient)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
