package sqlkv

import (
	"errors"
	"fmt"
	"net"
	"regexp"

	"github.com/sluicefs/sluice/internal/meta/store"
)

// ErrNoTable marks the error of a statement on a table that does not exist;
// a Dialect's Classify returns it wrapped with NoTable.
var ErrNoTable = errors.New("table does not exist")

// Conflict marks err as a lost race, so that kvstore retries the
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

var tablePrefixRE = regexp.MustCompile(`^([A-Za-z_][A-Za-z0-9_]{0,39})?$`)

// TableName returns the table named base with the prefix a URL's
// table_prefix parameter gives, so that several volumes (or tests) can share
// one database. The prefix is letters, digits and underscores, not starting
// with a digit, so the name needs no quoting in any dialect.
func TableName(prefix, base string) (string, error) {
	if !tablePrefixRE.MatchString(prefix) {
		return "", fmt.Errorf("bad table_prefix %q: want up to 40 letters, digits or underscores, not starting with a digit", prefix)
	}
	return prefix + base, nil
}
