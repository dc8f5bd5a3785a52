package postgres

import (
	"database/sql/driver"
	"errors"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/sluicefs/sluice/internal/meta/store"
)

// notSent is an error pgx declares safe to retry: the request never left.
type notSent struct{}

func (notSent) Error() string     { return "conn closed" }
func (notSent) SafeToRetry() bool { return true }

// TestClassify: the core learns from classify which failures are a lost
// race (retried on conflict) and which a request never sent (a bad
// connection, retried within --meta-timeout); other errors pass as they
// are.
func TestClassify(t *testing.T) {
	plain := errors.New("something else")
	for _, tc := range []struct {
		name              string
		err               error
		conflict, badConn bool
	}{
		{"not sent", fmt.Errorf("query: %w", notSent{}), false, true},
		{"serialization failure", &pgconn.PgError{Code: "40001"}, true, false},
		{"other", plain, false, false},
	} {
		got := classify(tc.err)
		if errors.Is(got, store.ErrConflict) != tc.conflict || errors.Is(got, driver.ErrBadConn) != tc.badConn {
			t.Errorf("%s: classify gives %v; want conflict %v, bad connection %v", tc.name, got, tc.conflict, tc.badConn)
		}
	}
}
