package control

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"

	"github.com/sluicefs/sluice/internal/meta"
	"github.com/sluicefs/sluice/internal/mountinfo"
)

// Mount is a Sluice mount a path lies on.
type Mount struct {
	Root   string   // the mount point
	Source string   // "sluice:NAME"
	Ino    meta.Ino // the inode of the path itself
}

// Find finds the Sluice mount that path lies on, and path's inode there.
// It fails with a clear error for a path on another file system.
func Find(path string) (*Mount, error) {
	abs, err := filepath.Abs(path)
	if err == nil {
		abs, err = filepath.EvalSymlinks(abs)
	}
	if err != nil {
		return nil, err
	}
	var st syscall.Stat_t
	if err := syscall.Stat(abs, &st); err != nil {
		return nil, fmt.Errorf("stat %s: %w", abs, err)
	}
	m, ok := mountinfo.Containing(abs)
	if !ok {
		return nil, fmt.Errorf("%s is not on a Sluice mount (no mount holds it)", path)
	}
	if _, sluice := m.SluiceVolume(); !sluice {
		return nil, fmt.Errorf("%s is not on a Sluice mount (%s is mounted from %s)", path, m.Point, m.Source)
	}
	return &Mount{Root: m.Point, Source: m.Source, Ino: meta.Ino(st.Ino)}, nil
}

// Error is a failure the mount reported.
type Error struct {
	Op    string
	Msg   string
	Errno syscall.Errno // 0 when not a POSIX error
}

// Error returns the operation and the mount's message.
func (e *Error) Error() string { return e.Op + ": " + e.Msg }

// Unwrap returns the errno, so that errors.Is(err, syscall.EPERM) works.
func (e *Error) Unwrap() error {
	if e.Errno == 0 {
		return nil
	}
	return e.Errno
}

// Call sends req to the mount whose root is root and returns the result,
// calling progress (when not nil) with each progress report. Cancelling
// ctx closes the control file, which cancels the request in the mount.
func Call(ctx context.Context, root string, req Request, progress func(json.RawMessage)) (json.RawMessage, error) {
	line, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	f, err := os.OpenFile(filepath.Join(root, FileName), os.O_RDWR, 0)
	if err != nil {
		return nil, fmt.Errorf("open the control file of %s (is it a Sluice mount?): %w", root, err)
	}
	stop := context.AfterFunc(ctx, func() { f.Close() })
	defer func() {
		if stop() {
			f.Close()
		}
	}()
	if _, err := f.Write(append(line, '\n')); err != nil {
		return nil, fmt.Errorf("%s: send request: %w", req.Op, err)
	}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 64<<20)
	for sc.Scan() {
		var r Reply
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			return nil, fmt.Errorf("%s: bad reply from the mount: %w", req.Op, err)
		}
		switch {
		case r.Error != "":
			return nil, &Error{Op: req.Op, Msg: r.Error, Errno: r.Errno}
		case r.Done:
			return r.Result, nil
		case progress != nil && r.Progress != nil:
			progress(r.Progress)
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: read reply: %w", req.Op, err)
	}
	return nil, fmt.Errorf("%s: %w", req.Op, errors.New("the mount ended the reply without a result"))
}
