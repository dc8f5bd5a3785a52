package vfs

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/sluicefs/sluice/internal/control"
	"github.com/sluicefs/sluice/internal/meta"
	"github.com/sluicefs/sluice/internal/meta/store"
)

// Internal files: virtual files at the root of every mount, on inodes
// reserved for them (above meta's internal base, below the trash's), that
// the metadata engine never stores and other mounts never see.
//
//   - .control (0666): the control channel (package control); requests run
//     with the credentials of the process that writes them.
//   - .accesslog (0400, root): while open, one line per operation of this
//     mount (see AccessLog); end of file after a quiet second.
//   - .stats (0444): the mount's metrics in the Prometheus text format,
//     as of the open.
//   - .config (0400, root): the mount's running configuration as JSON,
//     secrets hidden.
//
// Their names shadow entries of the same names at the root, which cannot
// be created, removed or renamed. Config.HideInternal keeps them out of
// listings; they can still be opened by name.
const (
	ControlIno   meta.Ino = 0x7FFFFFFF00000001
	AccessLogIno meta.Ino = 0x7FFFFFFF00000002
	StatsIno     meta.Ino = 0x7FFFFFFF00000003
	ConfigIno    meta.Ino = 0x7FFFFFFF00000004
)

// Names of the internal files.
const (
	AccessLogName = ".accesslog"
	StatsName     = ".stats"
	ConfigName    = ".config"
)

// internalFile is one virtual file.
type internalFile struct {
	ino  meta.Ino
	name string
	mode uint16
}

var internalFiles = []internalFile{
	{AccessLogIno, AccessLogName, 0o400},
	{ConfigIno, ConfigName, 0o400},
	{ControlIno, control.FileName, 0o666},
	{StatsIno, StatsName, 0o444},
}

// IsInternal reports whether ino is one of the internal files.
func IsInternal(ino meta.Ino) bool { return ino >= ControlIno && ino <= ConfigIno }

// internalByName returns the internal file called name at the root.
func internalByName(parent meta.Ino, name []byte) *internalFile {
	if parent != meta.RootIno || len(name) < 6 || name[0] != '.' {
		return nil
	}
	for i := range internalFiles {
		if internalFiles[i].name == string(name) {
			return &internalFiles[i]
		}
	}
	return nil
}

func internalByIno(ino meta.Ino) *internalFile {
	for i := range internalFiles {
		if internalFiles[i].ino == ino {
			return &internalFiles[i]
		}
	}
	return nil
}

// attr returns the attributes of f: owned by root, empty (reads go
// straight to the mount), timed at the mount's start.
func (f *internalFile) attr(started time.Time) *meta.Attr {
	return &meta.Attr{Ino: f.ino, Type: store.TypeFile, Mode: f.mode, Nlink: 1, Parent: meta.RootIno,
		Atime: started.Unix(), Mtime: started.Unix(), Ctime: started.Unix()}
}

// allowed reports whether the caller in ctx may open f with flags.
func (f *internalFile) allowed(ctx context.Context, flags uint32) bool {
	cred := meta.CredOf(ctx)
	if cred.IsRoot() {
		return true
	}
	need := uint16(0o4)
	switch flags & syscall.O_ACCMODE {
	case syscall.O_WRONLY:
		need = 0o2
	case syscall.O_RDWR:
		need = 0o6
	}
	return f.mode&need == need
}

// internalEntries returns the listing entries of the internal files.
func (v *VFS) internalEntries() []meta.Entry {
	es := make([]meta.Entry, len(internalFiles))
	for i := range internalFiles {
		f := &internalFiles[i]
		es[i] = meta.Entry{Name: []byte(f.name), Ino: f.ino, Type: store.TypeFile, Attr: f.attr(v.started)}
	}
	return es
}

// internalHandle is an open internal file.
type internalHandle struct {
	file *internalFile
	// content is what .stats and .config show, fixed at the open.
	content []byte
	log     *logReader   // .accesslog
	ctl     *controlConv // .control
}

// openInternal opens an internal file.
func (v *VFS) openInternal(ctx context.Context, f *internalFile, flags uint32) (*meta.Attr, uint64, error) {
	if !f.allowed(ctx, flags) {
		return nil, 0, syscall.EACCES
	}
	ih := &internalHandle{file: f}
	switch f.ino {
	case StatsIno:
		var b bytes.Buffer
		if v.conf.Stats != nil {
			if err := v.conf.Stats(&b); err != nil {
				return nil, 0, err
			}
		}
		ih.content = b.Bytes()
	case ConfigIno:
		b, err := json.MarshalIndent(v.conf.Settings, "", "  ")
		if err != nil {
			return nil, 0, err
		}
		ih.content = append(b, '\n')
	case AccessLogIno:
		ih.log = v.accessLog.open()
	case ControlIno:
		ih.ctl = &controlConv{v: v}
	}
	return f.attr(v.started), v.addHandle(&handle{ino: f.ino, flags: flags, internal: ih}), nil
}

// read reads from an internal file.
func (ih *internalHandle) read(ctx context.Context, off uint64, p []byte) (int, error) {
	switch {
	case ih.log != nil:
		return ih.log.read(ctx, p)
	case ih.ctl != nil:
		return ih.ctl.read(ctx, p)
	}
	if off >= uint64(len(ih.content)) {
		return 0, nil
	}
	return copy(p, ih.content[off:]), nil
}

// write writes to an internal file: only .control takes writes.
func (ih *internalHandle) write(ctx context.Context, data []byte) error {
	if ih.ctl == nil {
		return syscall.EBADF
	}
	return ih.ctl.write(ctx, data)
}

// release closes an internal file: a reader of the access log stops
// collecting, a control request still running is cancelled.
func (v *VFS) releaseInternal(ih *internalHandle) {
	if ih.log != nil {
		v.accessLog.close(ih.log)
	}
	if ih.ctl != nil {
		ih.ctl.cancel()
	}
}

// Control runs one request of the control channel (package control) for
// the caller in ctx, whose credentials it must check itself. It may call
// progress with reports the client shows as it goes, and returns its
// result; both are marshalled as JSON. ctx is cancelled when the client
// closes the control file.
type Control func(ctx context.Context, req control.Request, progress func(any)) (any, error)

// controlConv is one conversation on .control: a request written, the
// reply read.
type controlConv struct {
	v *VFS

	mu      sync.Mutex
	in      []byte        // the request so far
	out     []byte        // reply not yet read
	started bool          // the request is complete and running
	done    bool          // the reply is complete
	wake    chan struct{} // closed and replaced when out grows or done
	stop    context.CancelFunc
}

func (c *controlConv) write(ctx context.Context, data []byte) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.started {
		return syscall.EBUSY // one request per open
	}
	if len(c.in)+len(data) > control.MaxRequest {
		return syscall.E2BIG
	}
	c.in = append(c.in, data...)
	line, _, complete := bytes.Cut(c.in, []byte{'\n'})
	if !complete {
		return nil
	}
	var req control.Request
	if err := json.Unmarshal(line, &req); err != nil {
		c.in = nil
		return syscall.EINVAL
	}
	fn := c.v.conf.Controls[req.Op]
	if fn == nil {
		c.in = nil
		return syscall.EINVAL
	}
	if sub, ok := c.v.meta.(subtreeMeta); ok {
		// A request names any inode number: only those inside the
		// directory mounted are there. The controls work on the
		// volume's own numbers.
		if err := sub.Reachable(ctx, req.Ino); err != nil {
			c.in = nil
			return err
		}
		req.Ino = sub.In(req.Ino)
	}
	c.started = true
	c.wake = make(chan struct{})
	// The request outlives the write that started it: it keeps the
	// writer's credentials, not its cancellation.
	rctx, stop := context.WithCancel(context.WithoutCancel(ctx))
	c.stop = stop
	go c.run(rctx, fn, req)
	return nil
}

// run runs the request and queues its reply.
func (c *controlConv) run(ctx context.Context, fn Control, req control.Request) {
	defer c.stop()
	res, err := fn(ctx, req, func(p any) {
		b, merr := json.Marshal(p)
		if merr == nil {
			c.emit(control.Reply{Progress: b}, false)
		}
	})
	var last control.Reply
	if err != nil {
		last.Error = err.Error()
		var errno syscall.Errno
		if errors.As(err, &errno) {
			last.Errno = errno
		}
	} else {
		b, merr := json.Marshal(res)
		if merr != nil {
			last.Error = "encode result: " + merr.Error()
		} else {
			last.Result, last.Done = b, true
		}
	}
	c.emit(last, true)
}

// emit queues one reply line; last ends the reply.
func (c *controlConv) emit(r control.Reply, last bool) {
	b, _ := json.Marshal(r)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.out = append(append(c.out, b...), '\n')
	c.done = c.done || last
	close(c.wake)
	c.wake = make(chan struct{})
}

// read returns reply bytes, waiting for them; 0 at the end of the reply.
// Before a request is written there is nothing to read.
func (c *controlConv) read(ctx context.Context, p []byte) (int, error) {
	for {
		c.mu.Lock()
		if !c.started {
			c.mu.Unlock()
			return 0, nil
		}
		if len(c.out) > 0 {
			n := copy(p, c.out)
			c.out = c.out[n:]
			c.mu.Unlock()
			return n, nil
		}
		if c.done {
			c.mu.Unlock()
			return 0, nil
		}
		wake := c.wake
		c.mu.Unlock()
		select {
		case <-wake:
		case <-ctx.Done():
			return 0, syscall.EINTR
		}
	}
}

func (c *controlConv) cancel() {
	c.mu.Lock()
	stop := c.stop
	c.mu.Unlock()
	if stop != nil {
		stop()
	}
}

// accessLogBuffer bounds the lines one reader of the access log may have
// waiting; lines beyond it are dropped and counted.
const accessLogBuffer = 4 << 20

// AccessLog hands one line per operation to the readers of .accesslog.
// When nobody reads it, Active is false and callers format nothing.
type AccessLog struct {
	active sync.Mutex // guards readers
	n      atomic.Int64
	rs     map[*logReader]struct{}
}

// Active reports whether anybody reads the access log.
func (l *AccessLog) Active() bool { return l != nil && l.n.Load() > 0 }

// Log hands line (ending with a newline) to every reader.
func (l *AccessLog) Log(line []byte) {
	l.active.Lock()
	defer l.active.Unlock()
	for r := range l.rs {
		r.add(line)
	}
}

func (l *AccessLog) open() *logReader {
	r := &logReader{wake: make(chan struct{})}
	l.active.Lock()
	defer l.active.Unlock()
	if l.rs == nil {
		l.rs = map[*logReader]struct{}{}
	}
	l.rs[r] = struct{}{}
	l.n.Store(int64(len(l.rs)))
	return r
}

func (l *AccessLog) close(r *logReader) {
	l.active.Lock()
	defer l.active.Unlock()
	delete(l.rs, r)
	l.n.Store(int64(len(l.rs)))
}

// logReader is one reader's queue of access log lines.
type logReader struct {
	mu      sync.Mutex
	buf     []byte
	dropped int64
	wake    chan struct{} // closed and replaced when buf grows
}

func (r *logReader) add(line []byte) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.buf)+len(line) > accessLogBuffer {
		r.dropped++
		return
	}
	if r.dropped > 0 {
		r.buf = append(r.buf, "#dropped "...)
		r.buf = strconv.AppendInt(r.buf, r.dropped, 10)
		r.buf = append(r.buf, " lines: the reader was too slow\n"...)
		r.dropped = 0
	}
	r.buf = append(r.buf, line...)
	close(r.wake)
	r.wake = make(chan struct{})
}

// accessLogIdle is how long a read of the access log waits for a line
// before it returns end of file.
const accessLogIdle = time.Second

// read waits for lines and returns whole lines that fit in p (or a part
// of one longer than p). When no line comes for accessLogIdle it returns
// 0, end of file: a program that walks the mount and reads every file
// (a backup, a checksum, diff -r) must not stream the log for ever, and
// a follower such as `sluice profile` opens the file again.
func (r *logReader) read(ctx context.Context, p []byte) (int, error) {
	idle := time.NewTimer(accessLogIdle)
	defer idle.Stop()
	for {
		r.mu.Lock()
		if len(r.buf) > 0 {
			n := len(r.buf)
			if n > len(p) {
				n = bytes.LastIndexByte(r.buf[:len(p)], '\n') + 1
				if n == 0 {
					n = len(p)
				}
			}
			copy(p, r.buf[:n])
			r.buf = r.buf[n:]
			if len(r.buf) == 0 {
				r.buf = nil
			}
			r.mu.Unlock()
			return n, nil
		}
		wake := r.wake
		r.mu.Unlock()
		select {
		case <-wake:
		case <-idle.C:
			return 0, nil
		case <-ctx.Done():
			return 0, syscall.EINTR
		}
	}
}
