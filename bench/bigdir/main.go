// Command bigdir fills a directory of a volume with many empty files
// through the metadata API (much faster than through a mount), for
// bench/bigdir.sh, which then lists it through a mount and watches the
// mount's memory.
//
//	bigdir -meta META-URL -n 1000000 -dir big
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicefs/sluice/internal/meta"
	"github.com/sluicefs/sluice/internal/meta/engine/all"
	"github.com/sluicefs/sluice/internal/meta/store"
)

func main() {
	metaURL := flag.String("meta", "", "metadata URL of a formatted volume")
	n := flag.Int("n", 1_000_000, "number of files")
	dir := flag.String("dir", "big", "directory under the root to fill (created)")
	workers := flag.Int("workers", 4, "concurrent creators")
	flag.Parse()
	if err := run(*metaURL, *dir, *n, *workers); err != nil {
		fmt.Fprintln(os.Stderr, "bigdir:", err)
		os.Exit(1)
	}
}

func run(metaURL, dir string, n, workers int) error {
	ctx := context.Background()
	st, err := all.Open(ctx, metaURL, false)
	if err != nil {
		return err
	}
	defer st.Close()
	c, err := meta.NewSession(ctx, st, meta.Config{})
	if err != nil {
		return err
	}
	defer c.Close(ctx)
	d, err := c.Mknod(ctx, meta.RootIno, []byte(dir), meta.NewNode{Type: store.TypeDir, Mode: 0o755})
	if err != nil {
		return fmt.Errorf("mkdir %s: %w", dir, err)
	}
	start := time.Now()
	var next, done atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1) - 1
				if i >= int64(n) {
					return
				}
				name := fmt.Sprintf("file-%08d", i)
				if _, err := c.Mknod(ctx, d.Ino, []byte(name), meta.NewNode{Type: store.TypeFile, Mode: 0o644}); err != nil {
					errs <- fmt.Errorf("create %s: %w", name, err)
					return
				}
				if k := done.Add(1); k%100_000 == 0 {
					fmt.Fprintf(os.Stderr, "  %d files, %.0f/s\n", k, float64(k)/time.Since(start).Seconds())
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return err
	}
	fmt.Printf("created %d files in /%s in %.1fs\n", n, dir, time.Since(start).Seconds())
	return nil
}
