// Package postgres is the PostgreSQL metadata engine: one table of ordered
// key-value pairs (sqlkv) behind kvstore, in a database named by a URL
//
//	postgres://USER:PASSWORD@HOST:PORT/DATABASE?sslmode=disable[&table_prefix=P]
//
// (postgresql:// is accepted too). Parameters are pgx's (libpq's), plus
// table_prefix, which names the table P + "kv" so that several volumes can
// share one database. Without connect_timeout, connecting gives up after 5 s.
//
// The driver is github.com/jackc/pgx/v5 through its database/sql adapter
// (stdlib): it is maintained, pure Go, and reports errors with their
// SQLSTATE. Write transactions run at SERIALIZABLE isolation, so a
// transaction that read something another one changed (keys or ranges:
// phantoms included) fails with SQLSTATE 40001 and is retried by kvstore.
// Read transactions are REPEATABLE READ READ ONLY: one consistent snapshot,
// never aborted.
package postgres

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/sluicefs/sluice/internal/meta/engine/sqlkv"
)

const (
	connectTimeout = 5 * time.Second
	maxIdle        = 16
	maxIdleTime    = 5 * time.Minute
	urlForm        = "postgres://USER:PASSWORD@HOST:PORT/DATABASE?sslmode=disable"
)

var dialect = sqlkv.Dialect{
	Dollar:    true,
	KeyType:   "bytea",
	ValueType: "bytea",
	Upsert:    "INSERT INTO %s (k, v) VALUES ($1, $2) ON CONFLICT (k) DO UPDATE SET v = EXCLUDED.v",
	WriteTx:   &sql.TxOptions{Isolation: sql.LevelSerializable},
	ReadTx:    &sql.TxOptions{Isolation: sql.LevelRepeatableRead, ReadOnly: true},
	Classify:  classify,
}

// Open connects to the database rawURL names. With create the table is
// created if missing; without, a missing table is an error saying the
// volume is not formatted.
func Open(ctx context.Context, rawURL string, create bool) (*sqlkv.DB, error) {
	conf, table, name, err := parseURL(rawURL)
	if err != nil {
		return nil, err
	}
	pool := stdlib.OpenDB(*conf)
	// Keep connections for concurrent file operations rather than
	// logging in again for each burst.
	pool.SetMaxIdleConns(maxIdle)
	pool.SetConnMaxIdleTime(maxIdleTime)
	db, err := sqlkv.Open(ctx, sqlkv.Config{
		Name:    name,
		Table:   table,
		Writer:  pool,
		Dialect: dialect,
		// connect_timeout bounds each address tried; this bounds them all.
		ConnectTimeout: conf.ConnectTimeout,
	}, create)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return db, nil
}

// parseURL returns the connection settings, the table name, and the URL
// without its password.
func parseURL(rawURL string) (conf *pgx.ConnConfig, table, name string, err error) {
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
	table, err = sqlkv.TableName(q.Get("table_prefix"), "kv")
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
	return conf, table, name, nil
}

// classify marks lost races as conflicts and explains what a user can fix.
func classify(err error) error {
	var pe *pgconn.PgError
	if !errors.As(err, &pe) {
		return err
	}
	switch pe.Code {
	case "40001", "40P01", "23505", "55P03":
		// serialization_failure, deadlock_detected, unique_violation
		// (two inserts of one key), lock_not_available
		return sqlkv.Conflict(err)
	case "28P01":
		return sqlkv.Explain(err, pe.Message+" (check the user and password in the URL)")
	case "28000", "3D000", "42501":
		// no pg_hba.conf entry, database does not exist, no privilege
		return sqlkv.Explain(err, pe.Message)
	case "42P01":
		return sqlkv.NoTable(err)
	}
	return err
}
