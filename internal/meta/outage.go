package meta

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"syscall"
	"time"

	"github.com/sluicefs/sluice/internal/meta/store"
)

// An outage is a time during which the metadata engine is known not to
// answer: an operation waited the whole bound (Config.OpTimeout) for it,
// or could not reach it for that long. While it lasts, operations fail
// at once instead of each waiting the bound again, and a probe asks the
// engine every probeEvery whether it answers; the first answer ends the
// outage.
//
// Failing at once is what keeps the bound a bound for applications. The
// kernel runs many requests one after the other: the creates, unlinks
// and renames of one directory hold its lock, the setattrs of one file
// the file's. Twenty processes writing in one directory of a mount whose
// engine stopped would otherwise see the twentieth fail after twenty
// bounds (ten minutes with the default), all blocked meanwhile in
// uninterruptible sleep; with the outage known, the first fails after
// the bound and the rest at once. An engine that is down for less than
// the bound is ridden out: operations wait for it, retrying one they
// could not send (a refused connection), and nothing fails.
//
// A transaction that fails for any other reason (a conflict, a record
// that is not there, a full disk of an embedded engine) says nothing of
// the engine's reach and does not start an outage.
type outage struct {
	name  string
	probe func(ctx context.Context) error // one round trip to the engine
	bound time.Duration
	log   *slog.Logger

	mu      sync.Mutex
	down    bool
	since   time.Time
	cause   error
	probing bool
}

// probeEvery is how often an outage's probe asks the engine whether it
// answers again: an operation made up to this long after the engine is
// back still fails.
const probeEvery = 250 * time.Millisecond

// ErrEngineDown reports an operation failed at once because the metadata
// engine is known not to answer (see outage).
var ErrEngineDown = errors.New("metadata engine not answering")

// check returns an error wrapping ErrEngineDown while an outage lasts,
// nil otherwise (and for a nil outage, one not watched).
func (o *outage) check() error {
	if o == nil {
		return nil
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if !o.down {
		return nil
	}
	return fmt.Errorf("%w: %s, since %s (%v)", ErrEngineDown, o.name, o.since.Format(time.TimeOnly), o.cause)
}

// failed starts an outage after a transaction failed by err: the bound
// passed, or the engine could not be reached.
func (o *outage) failed(err error) {
	if o == nil {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.down {
		return
	}
	o.down, o.since, o.cause = true, time.Now(), err
	if o.log != nil {
		o.log.Warn("metadata engine not answering: operations fail with EIO until it answers again", "engine", o.name, "err", err)
	}
	if !o.probing {
		o.probing = true
		go o.probeUntilBack()
	}
}

// probeUntilBack asks the engine whether it answers, every probeEvery,
// each question bounded as an operation is, and ends the outage at the
// first answer.
func (o *outage) probeUntilBack() {
	for {
		ctx, cancel := context.WithTimeout(context.Background(), o.bound)
		err := o.probe(ctx)
		cancel()
		if err == nil {
			o.mu.Lock()
			since := o.since
			o.down, o.probing, o.cause = false, false, nil
			o.mu.Unlock()
			if o.log != nil {
				o.log.Info("metadata engine answers again", "engine", o.name, "after", time.Since(since).Round(time.Millisecond))
			}
			return
		}
		time.Sleep(probeEvery)
	}
}

// unreachable reports whether err says the engine could not be reached
// at all, so that the request was never sent: a connection refused, no
// route to the host, a dial that timed out. Such a transaction is safe to
// run again whatever it writes. (A driver's own word that a request was
// not sent is the engine's to translate: PostgreSQL's classify makes
// pgx's SafeToRetry errors driver.ErrBadConn, which a transaction marked
// store.NotApplied runs again on.)
func unreachable(err error) bool {
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return true
	}
	for _, e := range []error{syscall.ECONNREFUSED, syscall.EHOSTUNREACH, syscall.ENETUNREACH} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// transport reports whether err is a failure of the connection to the
// engine (unreachable, reset, closed, cut short) rather than an answer
// from it. A read-only transaction that failed so is safe to run again;
// one that writes is not, as its commit may have been applied.
func transport(err error) bool {
	if unreachable(err) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, net.ErrClosed) || errors.Is(err, driver.ErrBadConn) ||
		errors.Is(err, store.ErrDisconnected) {
		return true
	}
	var e syscall.Errno
	if errors.As(err, &e) && transportErrnos[e] {
		return true
	}
	return timedOut(err)
}

// timedOut reports whether err is a timeout of the connection to the
// engine (a driver's read timeout), not an answer: a syscall.Errno is the
// core's answer (EAGAIN, a lock held elsewhere, says Timeout too).
func timedOut(err error) bool {
	var e syscall.Errno
	if errors.As(err, &e) {
		return false
	}
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
