// Package testserver finds the real servers (Redis, PostgreSQL, MariaDB,
// etcd, S3) that tests run against. Each server is named by an environment
// variable holding its URL, set by scripts/test-servers.sh (which `make
// test` and CI use). Without the variable a test skips with a loud message,
// except under CI=true, where a missing server fails the test so CI can
// never go green by skipping.
package testserver

import (
	"os"
	"strings"
	"testing"
)

// Environment variables naming test servers.
const (
	Redis        = "SLUICE_TEST_REDIS"         // redis://127.0.0.1:PORT
	RedisCluster = "SLUICE_TEST_REDIS_CLUSTER" // redis://127.0.0.1:P1,127.0.0.1:P2,127.0.0.1:P3
	Postgres     = "SLUICE_TEST_POSTGRES"      // postgres://USER:PASS@127.0.0.1:PORT/DB?sslmode=disable (may create databases)
	MySQL        = "SLUICE_TEST_MYSQL"         // mysql://USER:PASS@(127.0.0.1:PORT)/DB (may create databases)
	Etcd         = "SLUICE_TEST_ETCD"          // etcd://127.0.0.1:PORT
	EtcdCluster  = "SLUICE_TEST_ETCD_CLUSTER"  // etcd://127.0.0.1:P1,127.0.0.1:P2,127.0.0.1:P3
	S3           = "SLUICE_TEST_S3"            // http://ACCESS:SECRET@127.0.0.1:PORT/BUCKET
	// S3VirtualDomain names the domain under which the S3 server of S3 also
	// serves virtual-host style requests (BUCKET.DOMAIN:PORT), e.g. localhost.
	S3VirtualDomain = "SLUICE_TEST_S3_VIRTUAL_DOMAIN"
)

// URL returns the URL in env, or skips t (fails it under CI=true) when it
// is unset.
func URL(t testing.TB, env string) string {
	t.Helper()
	if u := os.Getenv(env); u != "" {
		return u
	}
	Missing(t, env+" is not set", "run scripts/test-servers.sh, or `make test`, to start real servers")
	return ""
}

// Missing reports that something a test needs (a server, a tool, FUSE) is
// not here: the test skips with a loud message, except under CI=true,
// where everything is required and the test fails. hint says how to get
// it.
func Missing(t testing.TB, what, hint string) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatalf("%s: required under CI=true (%s)", what, hint)
	}
	t.Skipf("SKIPPING: %s (%s)", what, hint)
}

// MetaURL returns a metadata URL on the test server of engine (redis,
// postgres, mysql or etcd) whose volume lives in namespace ns of its own
// (a key prefix, table prefix or key range), so tests may share a server.
// It skips t as URL does when the server is missing.
func MetaURL(t testing.TB, engine, ns string) string {
	t.Helper()
	switch engine {
	case "redis":
		return strings.TrimRight(URL(t, Redis), "/") + "?prefix=" + ns
	case "postgres":
		return URL(t, Postgres) + "&table_prefix=" + ns + "_"
	case "mysql":
		return URL(t, MySQL) + "?table_prefix=" + ns + "_"
	case "etcd":
		return strings.TrimRight(URL(t, Etcd), "/") + "/" + ns
	}
	t.Fatalf("unknown engine %s", engine)
	return ""
}
