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
// file each checkpoint; SQLite serializes them. The log is cut back to
// walLimit after a checkpoint lets it start over.

// driverName is go-sqlite3 with the connection settings above.
const driverName = "sqlite3-sluice"

// walLimit is the size the log is cut back to when it starts over.
const walLimit = 64 << 20

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
			return
		case <-t.C:
			s.checkpoint()
		}
	}
}

func (s *Store) checkpoint() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, _ = s.db.ExecContext(ctx, "PRAGMA wal_checkpoint(PASSIVE)")
}

// Close stops the checkpoints, after a last one, and closes the store.
// Closing again does no harm, as with sqlstore's Close.
func (s *Store) Close() error {
	s.stopped.Do(func() { close(s.stop) })
	<-s.done
	return s.Store.Close()
}
