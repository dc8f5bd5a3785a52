// Command synclat measures the floor under a durable commit on a disk:
// the latency of appending one small record to a log file and making it
// durable, the way a write-ahead log does, with each way of doing so that
// Linux offers.
//
//	go run ./bench/synclat [-n 2000] [-size 700] [-rounds 3] DIR
//
// Ways, interleaved over the rounds so that the disk's noise spreads over
// all of them:
//
//   - fallocate+fdatasync: space allocated ahead with fallocate (what the
//     metadata server's log does), pwrite, fdatasync;
//   - zeroed+fdatasync: space written with zeros ahead, pwrite, fdatasync;
//   - zeroed+O_DSYNC: the same file opened O_DSYNC, pwrite alone;
//   - zeroed+O_DIRECT|O_DSYNC: the tail's 4 KiB pages written again from
//     an aligned buffer, bypassing the page cache.
//
// It prints one RESULT line per way and round with the median, 90th and
// 99th percentile of one durable append, in microseconds. No commit of a
// log on this disk can be acknowledged sooner than the fastest median.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

func main() {
	n := flag.Int("n", 2000, "appends per way and round")
	size := flag.Int("size", 700, "bytes per record")
	rounds := flag.Int("rounds", 3, "rounds over all ways")
	flag.Parse()
	if flag.NArg() != 1 || *size <= 0 || *size > 4096 || *n <= 0 {
		fmt.Fprintln(os.Stderr, "usage: synclat [-n N] [-size BYTES (1-4096)] [-rounds R] DIR")
		os.Exit(2)
	}
	for r := 1; r <= *rounds; r++ {
		for _, w := range ways {
			d, err := measure(flag.Arg(0), w, *n, *size)
			if err != nil {
				fmt.Fprintf(os.Stderr, "synclat: %s: %v\n", w.name, err)
				os.Exit(1)
			}
			fmt.Printf("RESULT %-24s round=%d p50_us=%d p90_us=%d p99_us=%d\n", w.name, r,
				pct(d, 0.50).Microseconds(), pct(d, 0.90).Microseconds(), pct(d, 0.99).Microseconds())
		}
	}
}

// way is one way of making an append durable.
type way struct {
	name   string
	flags  int  // extra open flags
	zero   bool // write zeros ahead instead of fallocate
	direct bool // rewrite whole aligned pages
	sync   bool // fdatasync after each write
}

var ways = []way{
	{name: "fallocate+fdatasync", sync: true},
	{name: "zeroed+fdatasync", zero: true, sync: true},
	{name: "zeroed+O_DSYNC", flags: unix.O_DSYNC, zero: true},
	{name: "zeroed+O_DIRECT|O_DSYNC", flags: unix.O_DIRECT | unix.O_DSYNC, zero: true, direct: true},
}

// ahead is the space prepared before the appends.
const ahead = 16 << 20

func measure(dir string, w way, n, size int) ([]time.Duration, error) {
	path := filepath.Join(dir, fmt.Sprintf("synclat-%d.log", os.Getpid()))
	f, err := os.OpenFile(path, os.O_CREATE|os.O_TRUNC|os.O_RDWR, 0o600)
	if err != nil {
		return nil, err
	}
	defer os.Remove(path)
	if w.zero {
		if _, err := f.Write(make([]byte, ahead)); err != nil {
			f.Close()
			return nil, err
		}
	} else if err := unix.Fallocate(int(f.Fd()), 0, 0, ahead); err != nil {
		f.Close()
		return nil, fmt.Errorf("fallocate: %w", err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return nil, err
	}
	f.Close()
	if f, err = os.OpenFile(path, os.O_RDWR|w.flags, 0); err != nil {
		return nil, err
	}
	defer f.Close()
	// An aligned buffer of two pages, for O_DIRECT.
	raw := make([]byte, 3*4096)
	skip := (4096 - int(uintptr(unsafe.Pointer(&raw[0]))&4095)) & 4095
	buf := raw[skip : skip+2*4096]
	for i := range buf {
		buf[i] = byte(i*7 + 1)
	}
	if int64(n)*int64(size) > ahead-8192 {
		n = (ahead - 8192) / size
	}
	out := make([]time.Duration, 0, n)
	var pos int64
	for range n {
		start := time.Now()
		if w.direct {
			page := pos &^ 4095
			end := (pos + int64(size) + 4095) &^ 4095
			_, err = f.WriteAt(buf[:end-page], page)
		} else {
			_, err = f.WriteAt(buf[:size], pos)
		}
		if err == nil && w.sync {
			err = unix.Fdatasync(int(f.Fd()))
		}
		if err != nil {
			return nil, err
		}
		out = append(out, time.Since(start))
		pos += int64(size)
	}
	return out, nil
}

func pct(d []time.Duration, p float64) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[int(float64(len(s)-1)*p)]
}
