package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"sync"
	"time"

	sqlite3 "github.com/mattn/go-sqlite3"

	"github.com/sluicefs/sluice/internal/meta/engine/sqlstore"
)

// Checkpoints. In WAL mode SQLite appends each commit to the log and
// copies the log back into the database file in a checkpoint. By default
// the commit that takes the log past 1,000 pages runs that checkpoint
// itself, and with synchronous=NORMAL a checkpoint syncs the log and then
// the database file: one commit in about 300 of a create burst took 1-10
// ms, 23 µs a commit on average in a mount. And a commit was durable only
// once a checkpoint had synced the log, which a quiet volume might not
// reach for hours.
//
// So Sluice's connections open with automatic checkpoints off, and each
// open store checkpoints in the background every checkpointEvery
// (PASSIVE: it never waits for readers or writers, and commits go on
// beside it). A commit is durable at most checkpointEvery after it
// returned, and no commit pays for a checkpoint. Several processes on one
// file each checkpoint; SQLite serializes them.
//
// The log starts over from its beginning only when a commit begins with
// every frame checkpointed and no reader in the log, which under a steady
// stream of commits a passive checkpoint never leaves: the log grew to
// 50-64 MiB during 5,000 creates, every read searched its index, and once
// the host's page cache dropped it a round of creates read 100 MiB back
// from disk and ran at two thirds of the speed. So when a passive
// checkpoint leaves the log over restartFrames, a TRUNCATE checkpoint
// follows: it copies the few frames added meanwhile, waits (at most
// restartWait, holding new commits back that long) for readers to leave
// the log, and empties it, so that the next commit starts it over. A log
// that starts over on its own is cut back to walLimit.

// driverName is go-sqlite3 with the connection settings above.
const driverName = "sqlite3-sluice"

// walLimit is the size the log is cut back to when it starts over.
const walLimit = 16 << 20

// restartFrames is the log length, in pages, from which a checkpoint makes
// the log start over (SQLite's own automatic checkpoint ran at 1,000).
const restartFrames = 1000

// restartWait bounds how long a TRUNCATE checkpoint waits for readers.
const restartWait = 50 * time.Millisecond

// checkpointEvery is how often an open store checkpoints.
var checkpointEvery = 250 * time.Millisecond

func init() {
	sql.Register(driverName, &sqlite3.SQLiteDriver{ConnectHook: func(c *sqlite3.SQLiteConn) error {
		if _, err := c.Exec("PRAGMA wal_autocheckpoint=0", nil); err != nil {
			return err
		}
		_, err := c.Exec(fmt.Sprintf("PRAGMA journal_size_limit=%d", walLimit), nil)
		return err
	}})
}

// Store is the SQLite store: sqlstore's, with the background checkpoints
// of its file.
type Store struct {
	*sqlstore.Store
	db      *sql.DB
	conn    *sql.Conn // the checkpoints' own, with a short busy timeout
	stop    chan struct{}
	done    chan struct{}
	stopped sync.Once
}

func newStore(st *sqlstore.Store, db *sql.DB) *Store {
	s := &Store{Store: st, db: db, stop: make(chan struct{}), done: make(chan struct{})}
	go s.checkpoints()
	return s
}

// checkpoints runs a checkpoint every checkpointEvery, and a last one when
// the store closes. A failed checkpoint (the file is read-only, another
// process is checkpointing) is left to the next one.
func (s *Store) checkpoints() {
	defer close(s.done)
	t := time.NewTicker(checkpointEvery)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			s.checkpoint()
			if s.conn != nil {
				s.conn.Close()
			}
			return
		case <-t.C:
			s.checkpoint()
		}
	}
}

func (s *Store) checkpoint() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if s.conn == nil {
		c, err := s.db.Conn(ctx)
		if err != nil {
			return
		}
		// This connection's busy timeout bounds the TRUNCATE's wait.
		if _, err := c.ExecContext(ctx, fmt.Sprintf("PRAGMA busy_timeout=%d", restartWait.Milliseconds())); err != nil {
			c.Close()
			return
		}
		s.conn = c
	}
	var busy, frames, done int
	if err := s.conn.QueryRowContext(ctx, "PRAGMA wal_checkpoint(PASSIVE)").Scan(&busy, &frames, &done); err != nil {
		return
	}
	if frames >= restartFrames {
		_, _ = s.conn.ExecContext(ctx, "PRAGMA wal_checkpoint(TRUNCATE)")
	}
}

// Close stops the checkpoints, after a last one, and closes the store.
// Closing again does no harm, as with sqlstore's Close.
func (s *Store) Close() error {
	s.stopped.Do(func() { close(s.stop) })
	<-s.done
	return s.Store.Close()
}
