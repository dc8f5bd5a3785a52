// Package postgres is the PostgreSQL metadata engine: a table per record
// kind (sqlstore), in a database named by a URL
//
//	postgres://USER:PASSWORD@HOST:PORT/DATABASE?sslmode=disable[&table_prefix=P]
//
// (postgresql:// is accepted too). Parameters are pgx's (libpq's), plus
// table_prefix, which starts every table name with P so that several
// volumes can share one database. Without connect_timeout, connecting
// gives up after 5 s.
//
// The driver is github.com/jackc/pgx/v5 through its database/sql adapter
// (stdlib): it is maintained, pure Go, and reports errors with their
// SQLSTATE. Write transactions run at SERIALIZABLE isolation, so a
// transaction that read something another one changed (keys or ranges:
// phantoms included) fails with SQLSTATE 40001 and is retried.
// Read transactions are REPEATABLE READ READ ONLY: one consistent snapshot,
// never aborted.
package postgres

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/sluicefs/sluice/internal/meta/engine/sqlstore"
	"github.com/sluicefs/sluice/internal/meta/store"
)

const (
	connectTimeout = 5 * time.Second
	maxIdle        = 16
	maxIdleTime    = 5 * time.Minute
	urlForm        = "postgres://USER:PASSWORD@HOST:PORT/DATABASE?sslmode=disable"
)

var dialect = sqlstore.Dialect{
	Dollar:   true,
	Analyze:  "ANALYZE %s",
	WriteTx:  &sql.TxOptions{Isolation: sql.LevelSerializable},
	ReadTx:   &sql.TxOptions{Isolation: sql.LevelRepeatableRead, ReadOnly: true},
	Classify: classify,
	Int:      "bigint",
	Name:     "bytea",
	Blob:     "bytea",
	Concat:   "%s || %s",
}

// Open connects to the database rawURL names and returns the volume in it
// (see sqlstore.Open). With create the tables are created if missing;
// without, missing tables are an error saying the volume is not
// formatted.
func Open(ctx context.Context, rawURL string, create bool) (store.Store, error) {
	return sqlstore.OpenURL(ctx, rawURL, create, config)
}

// config returns what Open opens for rawURL, its pool included.
func config(rawURL string) (sqlstore.Config, error) {
	conf, prefix, name, err := parseURL(rawURL)
	if err != nil {
		return sqlstore.Config{}, err
	}
	return sqlstore.Config{
		Name:    name,
		Prefix:  prefix,
		Writer:  pool(conf),
		Dialect: dialect,
		// connect_timeout bounds each address tried; this bounds them all.
		ConnectTimeout: conf.ConnectTimeout,
	}, nil
}

// pool returns the connection pool of conf.
func pool(conf *pgx.ConnConfig) *sql.DB {
	p := stdlib.OpenDB(*conf)
	// Keep connections for concurrent file operations rather than
	// logging in again for each burst.
	p.SetMaxIdleConns(maxIdle)
	p.SetConnMaxIdleTime(maxIdleTime)
	return p
}

// parseURL returns the connection settings, the table prefix, and the URL
// without its password.
func parseURL(rawURL string) (conf *pgx.ConnConfig, prefix, name string, err error) {
	bad := func(why string) error {
		return fmt.Errorf("malformed PostgreSQL URL: %s (expected %s)", why, urlForm)
	}
	u, err := url.Parse(rawURL)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // url.Error repeats the URL, password included
		}
		return nil, "", "", bad(err.Error())
	}
	if u.Scheme != "postgres" && u.Scheme != "postgresql" {
		return nil, "", "", bad(fmt.Sprintf("scheme %q", u.Scheme))
	}
	if strings.Trim(u.Path, "/") == "" {
		return nil, "", "", bad("no database")
	}
	name = u.Redacted()
	q, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		return nil, "", "", bad(err.Error())
	}
	prefix, err = sqlstore.TablePrefix(q.Get("table_prefix"))
	if err != nil {
		return nil, "", "", fmt.Errorf("%s: %w", name, err)
	}
	q.Del("table_prefix")
	u.RawQuery = q.Encode()
	conf, err = pgx.ParseConfig(u.String())
	if err != nil {
		return nil, "", "", bad(err.Error()) // pgx hides the password
	}
	if !q.Has("connect_timeout") {
		conf.ConnectTimeout = connectTimeout
	}
	return conf, prefix, name, nil
}

// classify marks lost races as conflicts and explains what a user can fix.
func classify(err error) error {
	if pgconn.SafeToRetry(err) {
		// The request was never sent (pgx found its connection closed
		// before using it): a bad connection in database/sql's terms,
		// which the core runs again within --meta-timeout.
		return fmt.Errorf("%w: %w", driver.ErrBadConn, err)
	}
	var pe *pgconn.PgError
	if !errors.As(err, &pe) {
		return err
	}
	switch pe.Code {
	case "40001", "40P01", "23505", "55P03":
		// serialization_failure, deadlock_detected, unique_violation
		// (two inserts of one key), lock_not_available
		return sqlstore.Conflict(err)
	case "28P01":
		return sqlstore.Explain(err, pe.Message+" (check the user and password in the URL)")
	case "28000", "3D000", "42501":
		// no pg_hba.conf entry, database does not exist, no privilege
		return sqlstore.Explain(err, pe.Message)
	case "42P01":
		return sqlstore.NoTable(err)
	}
	return err
}
