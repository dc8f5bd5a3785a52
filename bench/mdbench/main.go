// Command mdbench measures metadata operations through a mounted file
// system, single-threaded, the way an application sees them: create
// (open with O_CREAT and close), stat, a full listing, rename and unlink
// of N files in one directory. It prints one line per operation with
// operations per second.
//
//	go run ./bench/mdbench -dir /mnt/vol/bench -n 10000
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"
)

func main() {
	dir := flag.String("dir", "", "directory to work in (created; must be empty)")
	n := flag.Int("n", 10000, "number of files")
	list := flag.Int("list", 0, "also list a directory of this many entries (0: skip)")
	settle = flag.Duration("settle", 1500*time.Millisecond, "pause before the stat phase, longer than the mount's entry and attribute caches")
	flag.Parse()
	if *dir == "" {
		fmt.Fprintln(os.Stderr, "mdbench: -dir is required")
		os.Exit(2)
	}
	if err := run(*dir, *n, *list); err != nil {
		fmt.Fprintln(os.Stderr, "mdbench:", err)
		os.Exit(1)
	}
}

func name(dir string, i int) string { return filepath.Join(dir, fmt.Sprintf("f%08d", i)) }

func phase(op string, n int, fn func(i int) error) error {
	start := time.Now()
	for i := 0; i < n; i++ {
		if err := fn(i); err != nil {
			return fmt.Errorf("%s %d: %w", op, i, err)
		}
	}
	d := time.Since(start)
	fmt.Printf("%-8s %8d ops %10.0f ops/s %8.1f µs/op\n", op, n, float64(n)/d.Seconds(), float64(d.Microseconds())/float64(n))
	return nil
}

// settle is the pause before the stat phase.
var settle *time.Duration

func run(dir string, n, list int) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	var st unix.Stat_t
	steps := []struct {
		op string
		fn func(i int) error
	}{
		{"create", func(i int) error {
			fd, err := unix.Open(name(dir, i), unix.O_CREAT|unix.O_WRONLY|unix.O_EXCL, 0o644)
			if err != nil {
				return err
			}
			return unix.Close(fd)
		}},
		{"stat", func(i int) error { return unix.Stat(name(dir, i), &st) }},
		{"rename", func(i int) error { return unix.Rename(name(dir, i), name(dir, i)+".r") }},
		{"unlink", func(i int) error { return unix.Unlink(name(dir, i) + ".r") }},
	}
	for _, s := range steps {
		if s.op == "stat" && *settle > 0 {
			// Let the kernel's entry and attribute caches of the files
			// just created expire, so stat reaches the file system.
			time.Sleep(*settle)
		}
		if s.op == "rename" {
			if err := listing(dir, n); err != nil {
				return err
			}
		}
		if err := phase(s.op, n, s.fn); err != nil {
			return err
		}
	}
	if list > 0 {
		big := filepath.Join(dir, "big")
		if err := os.Mkdir(big, 0o755); err != nil {
			return err
		}
		if err := phase("fill", list, func(i int) error {
			fd, err := unix.Open(name(big, i), unix.O_CREAT|unix.O_WRONLY, 0o644)
			if err != nil {
				return err
			}
			return unix.Close(fd)
		}); err != nil {
			return err
		}
		if err := listing(big, list); err != nil {
			return err
		}
	}
	return nil
}

// listing reads the whole directory with getdents and reports entries/s.
func listing(dir string, want int) error {
	start := time.Now()
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer f.Close()
	got := 0
	for {
		names, err := f.Readdirnames(4096)
		got += len(names)
		if err != nil || len(names) == 0 {
			break
		}
	}
	d := time.Since(start)
	if got != want {
		return fmt.Errorf("listed %d entries of %s, want %d", got, dir, want)
	}
	fmt.Printf("%-8s %8d ents %10.0f ents/s %8.1f ms total\n", "readdir", got, float64(got)/d.Seconds(), float64(d.Microseconds())/1000)
	return nil
}
