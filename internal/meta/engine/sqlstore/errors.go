package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net"
	"regexp"
	"time"

	"github.com/sluicefs/sluice/internal/meta/store"
)

// ErrNoTable marks the error of a statement on a table that does not exist;
// a Dialect's Classify returns it wrapped with NoTable.
var ErrNoTable = errors.New("table does not exist")

// Conflict marks err as a lost race, so that Update retries the
// transaction.
func Conflict(err error) error { return fmt.Errorf("%w: %w", store.ErrConflict, err) }

// NoTable marks err as a statement on a missing table.
func NoTable(err error) error { return fmt.Errorf("%w: %w", ErrNoTable, err) }

// Explain returns an error whose text is msg, one line a user can act on,
// and which wraps err for errors.Is and errors.As.
func Explain(err error, msg string) error { return &explained{msg: msg, err: err} }

type explained struct {
	msg string
	err error
}

func (e *explained) Error() string { return e.msg }
func (e *explained) Unwrap() error { return e.err }

// Describe passes err through the dialect's Classify, then rewords a
// failure to reach the server if Classify left err as it was.
func (d Dialect) Describe(err error) error {
	if err == nil {
		return nil
	}
	if d.Classify != nil {
		if c := d.Classify(err); c != err {
			return c
		}
	}
	return describeNet(err)
}

// describeNet rewords a failure to reach the server, which drivers report
// in long and driver-specific ways (pgx lists every address it tried).
func describeNet(err error) error {
	var dns *net.DNSError
	if errors.As(err, &dns) {
		return Explain(err, fmt.Sprintf("cannot resolve the server's host name %q: %v", dns.Name, dns.Err))
	}
	var op *net.OpError
	if !errors.As(err, &op) || op.Op != "dial" {
		return err
	}
	why := "connection timed out"
	if !op.Timeout() && op.Err != nil {
		why = op.Err.Error()
	}
	addr := "the server"
	if op.Addr != nil {
		addr = op.Addr.String()
	}
	return Explain(err, fmt.Sprintf("cannot reach the server at %s: %s", addr, why))
}

// ping makes the first connection of pool within timeout (0: no bound),
// the handshake and login included, and returns the failure passed
// through describe.
func ping(ctx context.Context, pool *sql.DB, timeout time.Duration, describe func(error) error) error {
	pctx := ctx
	if timeout > 0 {
		var cancel context.CancelFunc
		pctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	err := pool.PingContext(pctx)
	if err == nil {
		return nil
	}
	var ne net.Error
	late := errors.Is(err, context.DeadlineExceeded) || errors.As(err, &ne) && ne.Timeout()
	if !late || timeout == 0 || ctx.Err() != nil {
		return describe(err)
	}
	return Explain(err, fmt.Sprintf("no answer from the server within %v", timeout))
}

// failed returns the error of a transaction's callback that returned err
// after its first failed statement returned first (nil if none): the
// statement's failure decides when the callback dropped or replaced it,
// since it may be a conflict worth retrying.
func failed(err, first error) error {
	if first != nil && !errors.Is(err, first) {
		return first
	}
	return err
}

// run begins a transaction on pool with opts and runs fn in it. A write
// transaction is committed when fn returns nil; a read one is rolled
// back. Errors of the database pass through Describe; those before the
// commit are marked store.NotApplied.
func (d Dialect) run(ctx context.Context, pool *sql.DB, opts *sql.TxOptions, write bool, fn func(*sql.Tx) error) error {
	sqlTx, err := pool.BeginTx(ctx, opts)
	if err != nil {
		return store.NotApplied(d.Describe(err))
	}
	if err := fn(sqlTx); err != nil {
		sqlTx.Rollback()
		return store.NotApplied(err)
	}
	if !write {
		return d.Describe(sqlTx.Rollback())
	}
	return d.Describe(sqlTx.Commit())
}

var tablePrefixRE = regexp.MustCompile(`^([A-Za-z_][A-Za-z0-9_]{0,39})?$`)

// TablePrefix checks the prefix a URL's table_prefix parameter gives every
// table name, so that several volumes (or tests) can share one database.
// The prefix is letters, digits and underscores, not starting with a
// digit, so the names need no quoting in any dialect.
func TablePrefix(prefix string) (string, error) {
	if !tablePrefixRE.MatchString(prefix) {
		return "", fmt.Errorf("bad table_prefix %q: want up to 40 letters, digits or underscores, not starting with a digit", prefix)
	}
	return prefix, nil
}
