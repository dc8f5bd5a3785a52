// Command lockbench measures what a lock costs through a mount: fcntl
// write lock + unlock and flock + unlock pairs on one open file, from one
// process, and the same with a 4 KiB read under each lock (SQLite's
// pattern: lock, read the header, unlock). Nothing else changes the file,
// so this is the cost of a lock when nothing changed.
//
//	go run ./bench/lockbench [-n 2000] FILE
//
// It prints one RESULT line per case with the median and the 90th
// percentile of one pair, in microseconds, and pairs per second.
package main

import (
	"flag"
	"fmt"
	"os"
	"slices"
	"time"

	"golang.org/x/sys/unix"
)

func main() {
	n := flag.Int("n", 2000, "lock and unlock pairs per case")
	flag.Parse()
	if flag.NArg() != 1 {
		fmt.Fprintln(os.Stderr, "usage: lockbench [-n N] FILE")
		os.Exit(2)
	}
	if err := run(flag.Arg(0), *n); err != nil {
		fmt.Fprintln(os.Stderr, "lockbench:", err)
		os.Exit(1)
	}
}

func run(path string, n int) error {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	defer f.Close()
	if _, err := f.WriteAt(make([]byte, 64<<10), 0); err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		return err
	}
	fd := int(f.Fd())
	buf := make([]byte, 4096)
	fcntl := func(typ int16) error {
		return unix.FcntlFlock(uintptr(fd), unix.F_SETLK, &unix.Flock_t{Type: typ, Whence: 0, Start: 0, Len: 0})
	}
	cases := []struct {
		name string
		pair func() error
	}{
		{"fcntl_lock_unlock", func() error {
			if err := fcntl(unix.F_WRLCK); err != nil {
				return err
			}
			return fcntl(unix.F_UNLCK)
		}},
		{"flock_lock_unlock", func() error {
			if err := unix.Flock(fd, unix.LOCK_EX); err != nil {
				return err
			}
			return unix.Flock(fd, unix.LOCK_UN)
		}},
		{"fcntl_lock_read_unlock", func() error {
			if err := fcntl(unix.F_RDLCK); err != nil {
				return err
			}
			if _, err := f.ReadAt(buf, 0); err != nil {
				return err
			}
			return fcntl(unix.F_UNLCK)
		}},
	}
	for _, c := range cases {
		times := make([]time.Duration, n)
		start := time.Now()
		for i := range times {
			t0 := time.Now()
			if err := c.pair(); err != nil {
				return fmt.Errorf("%s: %w", c.name, err)
			}
			times[i] = time.Since(t0)
		}
		total := time.Since(start)
		slices.Sort(times)
		fmt.Printf("RESULT %s median_us=%.1f p90_us=%.1f ops_per_s=%.0f\n", c.name,
			float64(times[n/2].Nanoseconds())/1e3, float64(times[n*9/10].Nanoseconds())/1e3,
			float64(n)/total.Seconds())
	}
	return nil
}
