// Package bench is the measurement engine of `sluice bench`: it runs the
// workloads of a quick file system benchmark in a fresh directory of a
// mounted volume, or of any directory, and returns what it measured as a
// Report.
//
// Run creates PATH/__sluice_bench_*, in which each of Options.Threads
// threads writes one big file in writes of Options.BlockSize, fsyncs and
// closes it, and reads it back; writes Options.SmallFileCount small files
// and reads them; and stats its small files. Every read checks the data
// written. Before each read the page cache of the files to read is dropped
// (posix_fadvise), and with Options.DropCaches the machine's caches too.
// The directory is removed at the end, also when the run fails or ctx is
// cancelled. Each of the five items gets its throughput, its mean latency
// per operation as a thread saw it, and its ratio to the figures measured
// on a reference machine (docs/benchmarks.md), and the Report names the
// items below half of their reference.
//
// The package does not print and does not catch signals. The command
// formats the Report (a table or JSON), draws progress through
// Options.Progress, and cancels ctx on Ctrl-C. The options mirror the
// flags of `sluice bench`, and errors about them name them as those flags.
package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/sluicefs/sluice/internal/mountinfo"
)

// DropCachesFile is where root drops the machine's page, dentry and inode
// caches.
const DropCachesFile = "/proc/sys/vm/drop_caches"

// Options are the settings of a run. Validate's errors name each option
// as the flag of `sluice bench` that sets it.
type Options struct {
	// Threads is how many threads run at a time, each with its own
	// files (--threads).
	Threads int
	// BlockSize is the size of each write and read of the big files
	// (--block-size), from 1 byte to 1 GiB.
	BlockSize int64
	// BigFileSize is the size of each thread's big file
	// (--big-file-size).
	BigFileSize int64
	// SmallFileSize is the size of each small file (--small-file-size),
	// and SmallFileCount the number of small files each thread writes
	// (--small-file-count).
	SmallFileSize  int64
	SmallFileCount int
	// DropCaches also drops the whole machine's caches before each read
	// (--drop-caches) by writing DropFile, which needs root.
	DropCaches bool
	// DropFile is the file DropCaches writes; "" means DropCachesFile.
	// Tests name another.
	DropFile string
	// Progress, when set, is called as each item starts, with the item's
	// label and the number of operations it counts. It returns the
	// function to call after each operation, which the item's threads
	// call at once, and the one to call when the item ends; either may
	// be nil.
	Progress func(label string, ops int64) (op, done func())
}

// Defaults returns the settings `sluice bench` runs with when no flag is
// given: those of `juicefs bench`.
func Defaults() Options {
	return Options{Threads: 1, BlockSize: 1 << 20, BigFileSize: 1 << 30,
		SmallFileSize: 128 << 10, SmallFileCount: 100, DropFile: DropCachesFile}
}

// Validate checks the options before anything is written.
func (o *Options) Validate() error {
	switch {
	case o.Threads < 1:
		return fmt.Errorf("--threads %d: must be at least 1", o.Threads)
	case o.BlockSize < 1 || o.BlockSize > 1<<30:
		return fmt.Errorf("--block-size %d: must be from 1 byte to 1G", o.BlockSize)
	case o.BigFileSize < 1:
		return fmt.Errorf("--big-file-size %d: must be at least 1 byte", o.BigFileSize)
	case o.SmallFileSize < 1:
		return fmt.Errorf("--small-file-size %d: must be at least 1 byte", o.SmallFileSize)
	case o.SmallFileCount < 1:
		return fmt.Errorf("--small-file-count %d: must be at least 1", o.SmallFileCount)
	}
	return nil
}

// Run measures the directory path (which must exist) with the options o
// and returns the report. It writes in a fresh directory inside path and
// removes it before returning, also when it fails or ctx is cancelled
// (then the error says so and wraps ctx.Err()).
func Run(ctx context.Context, path string, o Options) (*Report, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	if o.DropFile == "" {
		o.DropFile = DropCachesFile
	}
	dir, err := benchDir(path)
	if err != nil {
		return nil, err
	}
	cache := Cache{Root: os.Geteuid() == 0, DropCachesWritable: canWrite(o.DropFile), DroppedAll: o.DropCaches}
	if o.DropCaches && !cache.DropCachesWritable {
		return nil, fmt.Errorf("--drop-caches: cannot write %s (it needs root, and a /proc/sys that is not read-only)", o.DropFile)
	}
	r := &Report{Path: dir, Threads: o.Threads, BlockSize: o.BlockSize, BigFileSize: o.BigFileSize,
		SmallFileSize: o.SmallFileSize, SmallFileCount: o.SmallFileCount, Cache: cache}
	if m, ok := mountinfo.Containing(dir); ok {
		r.MountPoint, r.FSType, r.Source = m.Point, m.FSType, m.Source
		r.Volume, r.Sluice = m.SluiceVolume()
	}

	start := time.Now()
	tmp, err := os.MkdirTemp(dir, "__sluice_bench_")
	if err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	runErr := run(ctx, tmp, &o, r)
	rmErr := os.RemoveAll(tmp)
	r.ElapsedSeconds = time.Since(start).Seconds()
	switch {
	case runErr != nil && ctx.Err() != nil:
		return nil, fmt.Errorf("bench interrupted; removed %s: %w", tmp, errors.Join(ctx.Err(), rmErr))
	case runErr != nil:
		return nil, errors.Join(runErr, rmErr)
	case rmErr != nil:
		return nil, fmt.Errorf("bench: remove %s: %w", tmp, rmErr)
	}
	r.Compare(ReferenceFor(o.Threads))
	return r, nil
}

// benchDir checks that path is an existing directory and returns it
// absolute, with symbolic links resolved.
func benchDir(path string) (string, error) {
	abs, err := filepath.Abs(path)
	if err == nil {
		abs, err = filepath.EvalSymlinks(abs)
	}
	if errors.Is(err, os.ErrNotExist) {
		return "", fmt.Errorf("%s does not exist", path)
	}
	if err != nil {
		return "", fmt.Errorf("bench %s: %w", path, err)
	}
	fi, err := os.Stat(abs)
	if err != nil {
		return "", fmt.Errorf("bench %s: %w", path, err)
	}
	if !fi.IsDir() {
		return "", fmt.Errorf("%s is not a directory", path)
	}
	return abs, nil
}

// canWrite reports whether this process may write the file at path
// (DropCachesFile); opening it for writing drops nothing.
func canWrite(path string) bool {
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return false
	}
	f.Close()
	return true
}
