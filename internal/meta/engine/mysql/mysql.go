// Package mysql is the MySQL and MariaDB metadata engine: an InnoDB table
// per record kind (sqlstore), in a database named by a URL in the form
// JuiceFS uses
//
//	mysql://USER:PASSWORD@(HOST:PORT)/DATABASE[?table_prefix=P&PARAM=VALUE...]
//
// which becomes the driver's DSN USER:PASSWORD@tcp(HOST:PORT)/DATABASE
// (@HOST:PORT and @unix(/path/to/socket) work too). Other parameters are
// the driver's. table_prefix starts every table name with P so that
// several volumes can share one database. Without a timeout parameter, connecting
// gives up after 5 s.
//
// The driver is github.com/go-sql-driver/mysql, the standard database/sql
// driver for MySQL and MariaDB; it is used with interpolateParams (one
// round trip per statement instead of prepare, execute, close).
//
// InnoDB's REPEATABLE READ reads an unlocked snapshot, which would let two
// transactions read one counter and both write it back. So every read in a
// write transaction is a locking read (SELECT ... FOR UPDATE), which also
// locks the gaps of scanned ranges, making write transactions serializable;
// deadlocks (1213) and lock wait timeouts (1205) are retried as conflicts.
// Connections force strict mode, so a key too long for its column is an
// error rather than silently truncated, and NO_ENGINE_SUBSTITUTION, so the
// table is never created in a non-transactional engine.
package mysql

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/sluicefs/sluice/internal/meta/engine/sqlstore"
	"github.com/sluicefs/sluice/internal/meta/store"
)

const (
	connectTimeout = 5 * time.Second
	maxIdle        = 16
	maxIdleTime    = 5 * time.Minute
	maxLifetime    = 30 * time.Minute
	urlForm        = "mysql://USER:PASSWORD@(HOST:PORT)/DATABASE"
)

var dialect = sqlstore.Dialect{
	TableOptions: " ENGINE=InnoDB",
	LockReads:    " FOR UPDATE",
	// Every connection is set to REPEATABLE READ (see session), so
	// transactions need no isolation option, which would cost a round
	// trip each.
	ReadTx:         &sql.TxOptions{ReadOnly: true},
	Classify:       classify,
	Int:            "BIGINT",
	Name:           "VARBINARY(255)",
	Blob:           "LONGBLOB",
	Concat:         "CONCAT(%s, %s)",
	OnDuplicateKey: true,
	Analyze:        "ANALYZE TABLE %s",
}

// session sets each new connection to REPEATABLE READ, in case the
// server's default is READ COMMITTED, under which locking reads do not lock
// gaps. (No system variable names the level on both MySQL 8, which has only
// transaction_isolation, and MariaDB 10, which has only tx_isolation.)
type session struct{ driver.Connector }

func (s session) Connect(ctx context.Context) (driver.Conn, error) {
	c, err := s.Connector.Connect(ctx)
	if err != nil {
		return nil, err
	}
	if _, err := c.(driver.ExecerContext).ExecContext(ctx, "SET SESSION TRANSACTION ISOLATION LEVEL REPEATABLE READ", nil); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
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
	conf, prefix, err := parseURL(rawURL)
	if err != nil {
		return sqlstore.Config{}, err
	}
	p, err := pool(conf)
	if err != nil {
		return sqlstore.Config{}, err
	}
	return sqlstore.Config{
		Name:    redact(rawURL, conf),
		Prefix:  prefix,
		Writer:  p,
		Dialect: dialect,
		// conf.Timeout bounds the dial; this bounds the login too.
		ConnectTimeout: conf.Timeout,
	}, nil
}

// pool returns the connection pool of conf.
func pool(conf *mysql.Config) (*sql.DB, error) {
	conn, err := mysql.NewConnector(conf)
	if err != nil {
		return nil, fmt.Errorf("malformed MySQL URL: %w (expected %s)", err, urlForm)
	}
	p := sql.OpenDB(session{conn})
	// Keep connections for concurrent file operations rather than
	// logging in again for each burst, but retire them before the
	// server's wait_timeout (8 h by default) or a proxy drops them.
	p.SetMaxIdleConns(maxIdle)
	p.SetConnMaxIdleTime(maxIdleTime)
	p.SetConnMaxLifetime(maxLifetime)
	return p, nil
}

// parseURL turns a mysql:// URL into the driver's configuration and the
// table prefix.
func parseURL(rawURL string) (*mysql.Config, string, error) {
	bad := func(why string) error {
		return fmt.Errorf("malformed MySQL URL: %s (expected %s)", why, urlForm)
	}
	rest, ok := strings.CutPrefix(rawURL, "mysql://")
	if !ok {
		return nil, "", bad("no mysql:// scheme")
	}
	// The password may hold '@' and '/': split at the last '@' before the
	// address, which is followed by the last '/'.
	slash := strings.LastIndexByte(rest, '/')
	if slash < 0 {
		return nil, "", bad("no database")
	}
	user, addr := "", rest[:slash]
	if at := strings.LastIndexByte(addr, '@'); at >= 0 {
		user, addr = rest[:at+1], addr[at+1:]
	}
	switch {
	case strings.HasPrefix(addr, "("):
		addr = "tcp" + addr
	case addr != "" && !strings.Contains(addr, "("):
		addr = "tcp(" + addr + ")"
	}
	conf, err := mysql.ParseDSN(user + addr + rest[slash:])
	if err != nil {
		return nil, "", bad(err.Error()) // the driver's errors omit the password
	}
	if conf.DBName == "" {
		return nil, "", bad("no database")
	}
	prefix, err := sqlstore.TablePrefix(conf.Params["table_prefix"])
	if err != nil {
		return nil, "", fmt.Errorf("%s: %w", redact(rawURL, conf), err)
	}
	delete(conf.Params, "table_prefix")
	if conf.Timeout == 0 {
		conf.Timeout = connectTimeout
	}
	conf.InterpolateParams = true
	if _, ok := conf.Params["sql_mode"]; !ok {
		if conf.Params == nil {
			conf.Params = map[string]string{}
		}
		conf.Params["sql_mode"] = "'STRICT_ALL_TABLES,NO_ENGINE_SUBSTITUTION'"
	}
	return conf, prefix, nil
}

// redact returns the URL with the password replaced, for names and errors.
func redact(rawURL string, conf *mysql.Config) string {
	if conf.Passwd == "" {
		return rawURL
	}
	return strings.Replace(rawURL, ":"+conf.Passwd+"@", ":xxxxx@", 1)
}

// classify marks lost races as conflicts and explains what a user can fix.
func classify(err error) error {
	var me *mysql.MySQLError
	if !errors.As(err, &me) {
		return err
	}
	switch me.Number {
	case 1213, 1205, 1062, 1020:
		// deadlock, lock wait timeout, duplicate key (two inserts of
		// one key), record changed since read (MariaDB snapshot
		// isolation)
		return sqlstore.Conflict(err)
	case 1045, 1698:
		return sqlstore.Explain(err, me.Message+" (check the user and password in the URL)")
	case 1044, 1049:
		// no access to the database, unknown database
		return sqlstore.Explain(err, me.Message)
	case 1146:
		return sqlstore.NoTable(err)
	}
	return err
}
