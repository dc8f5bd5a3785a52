package sqlstore

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"sync"

	"github.com/sluicefs/sluice/internal/meta/store"
)

// WriteConns is the most connections an embedded database's writes keep
// out of its writer pool (see connPool): SQLite runs one writer at a
// time, and the others wait on its lock. The pool must allow more, for
// the statements that run on it directly (tables, ANALYZE).
const WriteConns = 4

// connPool keeps connections of an embedded database's writer pool
// checked out for good, each with its statements prepared on it, and runs
// write transactions on them with BEGIN and COMMIT of their own
// (Dialect.BeginWrite).
//
// A database/sql transaction starts a goroutine to watch its context, and
// another for each result set read in it; each start wakes a thread, which
// on a small machine costs more than an embedded statement. On a
// connection of its own, with a context that cannot be cancelled (see
// Store.run), a transaction starts none.
//
// A free connection is taken last in, first out. SQLite keeps a page
// cache per connection and throws it away whenever another connection
// has written since its last transaction: connections taken in turn
// re-read every page a commit touches (the tree's root and inner pages,
// the database header) from the log, about seven reads a commit. Writes
// one after the other take the same connection and find its cache warm.
type connPool struct {
	db      *sql.DB
	mu      sync.Mutex
	idle    []*ownConn      // free connections, the most recently used last
	waiters []chan *ownConn // gets waiting for a connection, first first; nil wakes one to try again
	n       int             // connections open, free or in use
	reads   int             // of them, taken by tryGetRead
	shut    bool            // closed: no more connections
}

// ownConn is a connection of a connPool and its prepared statements, by the
// statement's text as written in this package: on the driver's connection
// (raw, see raw.go), or through database/sql when the driver lacks the
// interfaces for that.
type ownConn struct {
	c       *sql.Conn
	stmts   map[string]*sql.Stmt
	raw     map[string]rawStmt
	rawMode int  // rawUnknown, rawOn or rawOff
	busy    bool // a raw statement's rows are being read
	// args and vals are the raw statements' buffers for arguments and a
	// row's values, kept between statements: one statement at a time
	// runs on a connection, and a driver keeps neither once its rows
	// are closed.
	args []driver.NamedValue
	vals []driver.Value
}

func newConnPool(db *sql.DB) *connPool {
	return &connPool{db: db}
}

// get returns the free connection used last, opening one while fewer than
// WriteConns are open, or else waiting for one.
func (p *connPool) get(ctx context.Context) (*ownConn, error) {
	for {
		p.mu.Lock()
		if p.shut {
			p.mu.Unlock()
			return nil, sql.ErrConnDone
		}
		if k := len(p.idle); k > 0 {
			c := p.idle[k-1]
			p.idle[k-1] = nil
			p.idle = p.idle[:k-1]
			p.mu.Unlock()
			return c, nil
		}
		if p.n < WriteConns {
			p.n++
			p.mu.Unlock()
			c, err := p.db.Conn(ctx)
			if err != nil {
				p.mu.Lock()
				p.n--
				p.wakeLocked(nil)
				p.mu.Unlock()
				return nil, err
			}
			return &ownConn{c: c, stmts: make(map[string]*sql.Stmt)}, nil
		}
		ch := make(chan *ownConn, 1)
		p.waiters = append(p.waiters, ch)
		p.mu.Unlock()
		select {
		case c := <-ch:
			if c != nil {
				return c, nil
			}
			// A connection was dropped or the pool closed: look again.
		case <-ctx.Done():
			p.mu.Lock()
			for i, w := range p.waiters {
				if w == ch {
					p.waiters = append(p.waiters[:i], p.waiters[i+1:]...)
					p.mu.Unlock()
					return nil, ctx.Err()
				}
			}
			p.mu.Unlock()
			// put or a drop already chose this get: pass what it sent on.
			if c := <-ch; c != nil {
				p.put(c, nil)
			} else {
				p.mu.Lock()
				p.wakeLocked(nil)
				p.mu.Unlock()
			}
			return nil, ctx.Err()
		}
	}
}

// tryGetRead returns the free connection used last for a read, or nil
// when none is free or reads hold all but one of WriteConns (it neither
// opens one nor waits): a write always finds a connection free or room
// to open one, however long reads take. putRead gives it back.
func (p *connPool) tryGetRead() *ownConn {
	p.mu.Lock()
	if p.shut || p.reads >= WriteConns-1 {
		p.mu.Unlock()
		return nil
	}
	if k := len(p.idle); k > 0 {
		p.reads++
		c := p.idle[k-1]
		p.idle[k-1] = nil
		p.idle = p.idle[:k-1]
		p.mu.Unlock()
		return c
	}
	p.mu.Unlock()
	return nil
}

// putRead gives back a connection tryGetRead returned.
func (p *connPool) putRead(c *ownConn, err error) {
	p.mu.Lock()
	p.reads--
	p.mu.Unlock()
	p.put(c, err)
}

// wakeLocked hands c to the longest waiting get, if there is one, and
// reports whether it did. A nil c makes that get look again.
func (p *connPool) wakeLocked(c *ownConn) bool {
	if len(p.waiters) == 0 {
		return false
	}
	w := p.waiters[0]
	p.waiters[0] = nil
	p.waiters = p.waiters[1:]
	w <- c
	return true
}

// joined is errors.Join of a transaction's error and its rollback's,
// without the allocation when one of them is nil (a lookup of a missing
// name ends with ENOENT and a clean rollback).
func joined(err, rerr error) error {
	switch {
	case rerr == nil:
		return err
	case err == nil:
		return rerr
	}
	return errors.Join(err, rerr)
}

// put gives c back, or closes it when err says it is broken or the pool
// is closed.
func (p *connPool) put(c *ownConn, err error) {
	p.mu.Lock()
	drop := p.shut || errors.Is(err, driver.ErrBadConn) || errors.Is(err, sql.ErrConnDone)
	if drop {
		p.n--
		p.wakeLocked(nil)
		p.mu.Unlock()
		c.close()
		return
	}
	if !p.wakeLocked(c) {
		p.idle = append(p.idle, c)
	}
	p.mu.Unlock()
}

// close closes the free connections and makes put close the others.
func (p *connPool) close() {
	p.mu.Lock()
	p.shut = true
	idle := p.idle
	p.idle = nil
	p.n -= len(idle)
	for p.wakeLocked(nil) {
	}
	p.mu.Unlock()
	for _, c := range idle {
		c.close()
	}
}

func (c *ownConn) close() {
	c.closeRaw()
	for _, st := range c.stmts {
		st.Close()
	}
	c.c.Close()
}

// statement returns q (the database's text of it, sqlText) prepared on c,
// preparing it on first use; if that fails, q as text.
func (c *ownConn) statement(ctx context.Context, q, sqlText string) statement {
	if st, ok := c.stmts[q]; ok {
		return st
	}
	st, err := c.c.PrepareContext(ctx, sqlText)
	if err != nil {
		return text{c.c, sqlText}
	}
	c.stmts[q] = st
	return st
}

// runConn runs fn in a write transaction on a connection of s.conns (see
// connPool) and commits it. A transaction that does not commit (fn failed
// or panicked, or COMMIT failed) is rolled back before the connection is
// given back.
//
// The process's write transactions take turns on s.writeMu. SQLite runs
// one writer at a time anyway, and a second BEGIN IMMEDIATE waits in the
// busy handler, which sleeps 1, 2, 5, 10 ms and more between tries: two
// writers of one mount (an application's unlinks beside the background
// dropping deleted files) would each pay milliseconds for a lock held
// for microseconds. Writers of other processes still wait on the file
// lock.
func (s *Store) runConn(ctx context.Context, fn func(store.Tx) error) (err error) {
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	c, err := s.conns.get(ctx)
	if err != nil {
		return store.NotApplied(s.d.Describe(err))
	}
	begun, done := false, false
	defer func() {
		var rerr error
		if begun && !done {
			rerr = c.execText(ctx, "ROLLBACK")
		}
		s.conns.put(c, joined(err, rerr))
	}()
	if err := c.execText(ctx, s.d.BeginWrite); err != nil {
		return store.NotApplied(s.d.Describe(err))
	}
	begun = true
	t := &tx{ctx: ctx, s: s, conn: c, write: true}
	if err := failed(fn(t), t.err); err != nil {
		return store.NotApplied(err)
	}
	if err := c.execText(ctx, "COMMIT"); err != nil {
		return s.d.Describe(err)
	}
	done = true
	return nil
}
