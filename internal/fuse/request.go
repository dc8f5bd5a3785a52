package fuse

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	gofuse "github.com/hanwen/go-fuse/v2/fuse"

	"github.com/sluicefs/sluice/internal/meta"
)

// request is the context of one FUSE request: it carries the credentials
// of the calling process, and it is cancelled when the kernel interrupts
// the request and the caller is being killed, so that a killed process's
// metadata and object requests stop (vfs keeps what must happen anyway,
// such as releasing locks at close, out of its reach).
//
// go-fuse closes the request's cancel channel when the kernel sends
// INTERRUPT, which the kernel does for any signal that arrives while the
// caller waits, handled ones included (a SIGCHLD to make, a timer's
// SIGALRM). Answering those with EINTR would fail a stat or a read that
// the program does not expect to fail (the kernel does not restart a
// system call that a FUSE file system ends with EINTR), so an ordinary
// request ends early only when the caller has a fatal signal pending: the
// kernel marks every thread of a process that a signal kills with a
// pending SIGKILL before it interrupts the request. A lock wait (see
// waitCtx) ends on any signal, as POSIX says F_SETLKW and flock do.
//
// go-fuse reuses the channel of a request that was not interrupted for a
// later one, so a request's context must not outlive the request: every
// method ends it (end) before it returns, and nothing started for a
// request may keep it.
type request struct {
	context.Context // the caller's credentials; never cancelled
	cancel          <-chan struct{}
	tid             uint32 // the calling thread
	anySignal       bool   // cancel on any interrupt, not only a fatal one

	once  sync.Once
	done  chan struct{} // made by the first Done
	ended chan struct{} // closed by end

	mu       sync.Mutex
	stopped  bool           // done is closed
	finished bool           // end was called
	timer    *time.Timer    // starts watch after watchDelay
	after    map[int]func() // AfterFunc's, by id
	nextID   int
}

// ctx returns the context of an ordinary request.
func (fs *fileSystem) ctx(cancel <-chan struct{}, h *gofuse.InHeader) *request {
	c := meta.Cred{Uid: h.Uid, Gid: h.Gid, Pid: h.Pid}
	if c.Uid != 0 {
		c.Gids = fs.groups.get(h.Pid)
	}
	return &request{Context: meta.WithCred(context.Background(), c), cancel: cancel, tid: h.Pid,
		ended: make(chan struct{})}
}

// waitCtx returns the context of a request that waits for another
// process (a blocking lock): any signal to the caller ends it.
func (fs *fileSystem) waitCtx(cancel <-chan struct{}, h *gofuse.InHeader) *request {
	r := fs.ctx(cancel, h)
	r.anySignal = true
	return r
}

// Done returns a channel closed when the request is to stop. The first
// call arranges for a goroutine to watch the kernel's interrupt until the
// request ends; requests that never ask (most answer from memory) cost
// nothing.
//
// The watcher starts only once the request has lasted watchDelay:
// most requests that ask (every metadata transaction derives a context
// with a deadline, and a write checks Err) are answered sooner, and a
// goroutine per request, woken again at its end, put a goroutine start
// and a wake-up on the path of every one of them.
func (r *request) Done() <-chan struct{} {
	r.once.Do(func() {
		r.done = make(chan struct{})
		r.mu.Lock()
		if !r.finished {
			r.timer = time.AfterFunc(watchDelay, r.watch)
		}
		r.mu.Unlock()
	})
	return r.done
}

// watchDelay is how long a request runs before its interrupts are
// watched; a killed caller's request stops that much later at most.
const watchDelay = 2 * time.Millisecond

func (r *request) watch() {
	select {
	case <-r.cancel:
		if !r.anySignal && !killed(r.tid) {
			return
		}
		r.mu.Lock()
		r.stopped = true
		after := r.after
		r.after = nil
		close(r.done)
		r.mu.Unlock()
		for _, f := range after {
			go f()
		}
	case <-r.ended:
	}
}

// AfterFunc arranges for f to run in its own goroutine once the request
// is cancelled, as context.AfterFunc does. The context package finds it
// and uses it instead of a goroutine of its own per derived context (every
// metadata transaction derives one for its time bound).
func (r *request) AfterFunc(f func()) (stop func() bool) {
	r.Done()
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stopped {
		go f()
		return func() bool { return false }
	}
	if r.after == nil {
		r.after = map[int]func(){}
	}
	id := r.nextID
	r.nextID++
	r.after[id] = f
	return func() bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		_, ok := r.after[id]
		delete(r.after, id)
		return ok
	}
}

// Err reports context.Canceled once Done is closed. Until the kernel has
// interrupted the request, Done cannot be closed, so Err answers without
// starting the watcher: the engine checks Err before every transaction.
func (r *request) Err() error {
	select {
	case <-r.cancel:
	default:
		return nil
	}
	select {
	case <-r.Done():
		return context.Canceled
	default:
		return nil
	}
}

// end ends the request's context: its watcher stops, or never starts.
func (r *request) end() {
	r.mu.Lock()
	r.finished = true
	if r.timer != nil {
		r.timer.Stop()
	}
	r.mu.Unlock()
	close(r.ended)
}

// killed reports whether thread tid has SIGKILL pending, which is how the
// kernel marks a thread whose process a signal is killing. A thread that
// has gone already counts as killed.
func killed(tid uint32) bool {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", tid))
	if err != nil {
		return true
	}
	defer f.Close()
	const kill = uint64(1) << (syscall.SIGKILL - 1)
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		for _, field := range []string{"SigPnd:", "ShdPnd:"} {
			if rest, ok := strings.CutPrefix(line, field); ok {
				mask, err := strconv.ParseUint(strings.TrimSpace(rest), 16, 64)
				if err == nil && mask&kill != 0 {
					return true
				}
			}
		}
	}
	return false
}
