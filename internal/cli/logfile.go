package cli

import (
	"fmt"
	"io"
	stdlog "log"
	"log/slog"
	"os"
	"path/filepath"
	"sync"

	"github.com/spf13/pflag"
	"golang.org/x/sys/unix"
	"gopkg.in/natefinch/lumberjack.v2"
)

// The log of a background mount, and its rotation.
//
// `mount -d` starts the mount as a child process whose stdout and stderr
// are the --log file (daemonize), so that what bypasses the logger (a
// panic's trace, a fatal runtime error) still lands there. The child
// logs through a rotatingLog on the same file: when a record would take
// the file past --log-max-size, lumberjack renames it
// NAME-<UTC time>.EXT (gzip-compressed in the background with
// --log-compress), starts a new one, and deletes the backups beyond
// --log-backups.
//
// The rename leaves the child's descriptors 1 and 2 on the rotated file,
// which compression then deletes, so after each rotation rotatingLog
// points them at the new file (dup3). A crash in the instant between a
// rotation and that step writes its trace to the rotated file (kept, or
// lost once compressed). Every writer of the file appends (O_APPEND),
// so a write to stderr is never overwritten by the log's next record;
// the standard log package, which go-fuse's --debug output uses, is
// sent through the rotating writer too. A foreground mount logs to
// stderr and rotates nothing.

// logRotation holds the rotation flags of a background mount's log.
type logRotation struct {
	maxSize  int64 // bytes; 0 never rotates
	backups  int   // rotated files kept; 0 keeps all
	compress bool  // gzip rotated files
}

// addFlags binds the rotation flags to r, with their defaults.
func (r *logRotation) addFlags(fl *pflag.FlagSet) {
	r.maxSize = 100 << 20
	fl.Var(sizeValue{&r.maxSize, 1 << 20}, "log-max-size", "rotate the log of a background mount before it grows past this size (a plain number is MiB; 0: never rotate)")
	fl.IntVar(&r.backups, "log-backups", 5, "rotated logs of a background mount to keep, named after the log with the UTC time of rotation (0: keep all)")
	fl.BoolVar(&r.compress, "log-compress", true, "gzip the rotated logs of a background mount")
}

// mountLogger returns the logger of runMount and the function that
// closes what it opened. The process a background mount started
// (daemonize: readyFdEnv is set until it reports) logs to path through a
// rotatingLog that keeps its stdout and stderr on the current file; any
// other mount, or one with rotation off, logs to stderr as every command
// does.
func mountLogger(debug bool, path string, r logRotation) (*slog.Logger, func()) {
	if os.Getenv(readyFdEnv) == "" || r.maxSize <= 0 || path == "" {
		return logger(debug), func() {}
	}
	if abs, err := filepath.Abs(path); err == nil {
		path = abs
	}
	w := newRotatingLog(path, r, func() error { return redirectFds(path, 1, 2) })
	stdlog.SetOutput(w)
	level := slog.LevelInfo
	if debug {
		level = slog.LevelDebug
	}
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: level})), func() {
		stdlog.SetOutput(os.Stderr)
		w.Close()
	}
}

// rotatingLog is an io.Writer that appends to a file and rotates it
// through lumberjack. It decides the rotations itself, so that it knows
// when one happened: it calls onRotate after each, and reopens the new
// file in append mode (lumberjack creates it without O_APPEND).
type rotatingLog struct {
	mu       sync.Mutex
	lj       *lumberjack.Logger
	max      int64 // rotate before the file grows past max bytes
	size     int64 // bytes in the current file; -1 before the first write
	onRotate func() error
}

var _ io.WriteCloser = (*rotatingLog)(nil)

// newRotatingLog returns a writer appending to path that rotates it
// before it grows past r.maxSize bytes (which must be > 0) and calls
// onRotate, when not nil, after each rotation.
func newRotatingLog(path string, r logRotation, onRotate func() error) *rotatingLog {
	return &rotatingLog{
		lj: &lumberjack.Logger{
			Filename: path,
			// Past what rotatingLog allows, so lumberjack never rotates
			// on its own (its size is in whole MiB).
			MaxSize:    int(r.maxSize>>20) + 1,
			MaxBackups: r.backups,
			Compress:   r.compress,
		},
		max:      r.maxSize,
		size:     -1,
		onRotate: onRotate,
	}
}

// Write appends p, whole, to the current file, first rotating it when p
// would take it past the maximum size. (A single p larger than that goes
// whole into a new file.)
func (w *rotatingLog) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.size < 0 {
		w.size = 0
		if fi, err := os.Stat(w.lj.Filename); err == nil {
			w.size = fi.Size()
		}
	}
	if w.size > 0 && w.size+int64(len(p)) > w.max {
		if err := w.rotateLocked(); err != nil {
			return 0, err
		}
	}
	n, err := w.lj.Write(p)
	w.size += int64(n)
	return n, err
}

// rotateLocked moves the current file aside and starts a new one, which
// the next write opens in append mode.
func (w *rotatingLog) rotateLocked() error {
	if err := w.lj.Rotate(); err != nil {
		return fmt.Errorf("rotate log: %w", err)
	}
	w.size = 0
	// Close what Rotate opened: the next Write reopens the (empty, and
	// so below the size limit) file with O_APPEND.
	if err := w.lj.Close(); err != nil {
		return fmt.Errorf("rotate log: %w", err)
	}
	if w.onRotate != nil {
		if err := w.onRotate(); err != nil {
			msg := fmt.Sprintf("log rotated, but a crash report may go to the rotated file: %v\n", err)
			n, _ := w.lj.Write([]byte(msg))
			w.size += int64(n)
		}
	}
	return nil
}

// Close closes the current file; a later Write opens it again.
func (w *rotatingLog) Close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.lj.Close()
}

// redirectFds points each of the descriptors fds at the file path,
// opened for appending.
func redirectFds(path string, fds ...int) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	for _, fd := range fds {
		if err := unix.Dup3(int(f.Fd()), fd, 0); err != nil {
			return fmt.Errorf("point descriptor %d at %s: %w", fd, path, err)
		}
	}
	return nil
}
