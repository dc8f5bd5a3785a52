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
type connPool struct {
	db   *sql.DB
	free chan *ownConn
	mu   sync.Mutex
	n    int  // connections open, free or in use
	shut bool // closed: no more connections
}

// ownConn is a connection of a connPool and its prepared statements, by the
// statement's text as written in this package.
type ownConn struct {
	c     *sql.Conn
	stmts map[string]*sql.Stmt
}

func newConnPool(db *sql.DB) *connPool {
	return &connPool{db: db, free: make(chan *ownConn, WriteConns)}
}

// get returns a free connection, opening one while fewer than WriteConns
// are open, or else waiting for one.
func (p *connPool) get(ctx context.Context) (*ownConn, error) {
	select {
	case c := <-p.free:
		return c, nil
	default:
	}
	p.mu.Lock()
	if p.shut {
		p.mu.Unlock()
		return nil, sql.ErrConnDone
	}
	if p.n < WriteConns {
		p.n++
		p.mu.Unlock()
		c, err := p.db.Conn(ctx)
		if err != nil {
			p.mu.Lock()
			p.n--
			p.mu.Unlock()
			return nil, err
		}
		return &ownConn{c: c, stmts: make(map[string]*sql.Stmt)}, nil
	}
	p.mu.Unlock()
	select {
	case c := <-p.free:
		return c, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// put gives c back, or closes it when err says it is broken or the pool
// is closed.
func (p *connPool) put(c *ownConn, err error) {
	p.mu.Lock()
	drop := p.shut || errors.Is(err, driver.ErrBadConn) || errors.Is(err, sql.ErrConnDone)
	if drop {
		p.n--
	}
	p.mu.Unlock()
	if drop {
		c.close()
		return
	}
	p.free <- c
}

// close closes the free connections and makes put close the others.
func (p *connPool) close() {
	p.mu.Lock()
	p.shut = true
	for {
		select {
		case c := <-p.free:
			p.n--
			c.close()
			continue
		default:
		}
		break
	}
	p.mu.Unlock()
}

func (c *ownConn) close() {
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
func (s *Store) runConn(ctx context.Context, fn func(store.Tx) error) (err error) {
	c, err := s.conns.get(ctx)
	if err != nil {
		return s.d.Describe(err)
	}
	begun, done := false, false
	defer func() {
		var rerr error
		if begun && !done {
			_, rerr = c.c.ExecContext(ctx, "ROLLBACK")
		}
		s.conns.put(c, errors.Join(err, rerr))
	}()
	if _, err := c.c.ExecContext(ctx, s.d.BeginWrite); err != nil {
		return s.d.Describe(err)
	}
	begun = true
	t := &tx{ctx: ctx, s: s, conn: c, write: true}
	if err := failed(fn(t), t.err); err != nil {
		return err
	}
	if _, err := c.c.ExecContext(ctx, "COMMIT"); err != nil {
		return s.d.Describe(err)
	}
	done = true
	return nil
}
