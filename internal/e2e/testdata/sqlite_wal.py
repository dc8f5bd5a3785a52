"""SQLite in WAL mode on one long-lived connection, driven line by line,
for a test that kills the mount under it.

usage: sqlite_wal.py DB serve   # commands on stdin, one per line
       sqlite_wal.py DB check   # open afresh, report, then write once

serve: sets journal_mode=WAL, synchronous=FULL (a commit returns once the
WAL is synced) and no automatic checkpoint (the rows stay in the WAL, so
reading them needs the WAL index), creates table t, prints "ready". Then:
  insert K   inserts row K in its own transaction; "ok K" once committed
  read       counts the rows (through the WAL index); "rows N"
  hold       BEGIN IMMEDIATE and inserts row -1 without committing, so the
             connection holds the WAL write lock; "held"
Errors print "err MESSAGE". The connection stays open until stdin ends.

check: a fresh connection with no busy timeout (a lock left by a dead
connection fails at once with "database is locked"). Prints
"journal_mode M", "integrity R", "rows K1,K2,...", then commits one more
row (-2) and prints "wrote"; or "err MESSAGE" at the first failure.
"""

import sqlite3
import sys


def serve(db):
    con = sqlite3.connect(db, timeout=10, isolation_level=None)
    print("journal_mode", con.execute("PRAGMA journal_mode=WAL").fetchone()[0], flush=True)
    con.execute("PRAGMA synchronous=FULL")
    con.execute("PRAGMA wal_autocheckpoint=0")
    con.execute("CREATE TABLE IF NOT EXISTS t (k INTEGER PRIMARY KEY, v BLOB)")
    print("ready", flush=True)
    for line in sys.stdin:
        f = line.split()
        try:
            if f[0] == "insert":
                con.execute("BEGIN")
                con.execute("INSERT INTO t VALUES (?, randomblob(2000))", (int(f[1]),))
                con.execute("COMMIT")
                print("ok", f[1], flush=True)
            elif f[0] == "read":
                print("rows", con.execute("SELECT count(*) FROM t").fetchone()[0], flush=True)
            elif f[0] == "hold":
                con.execute("BEGIN IMMEDIATE")
                con.execute("INSERT INTO t VALUES (-1, randomblob(2000))")
                print("held", flush=True)
        except sqlite3.Error as e:
            print("err", str(e).replace("\n", " "), flush=True)


def check(db):
    try:
        con = sqlite3.connect(db, timeout=0, isolation_level=None)
        print("journal_mode", con.execute("PRAGMA journal_mode").fetchone()[0], flush=True)
        print("integrity", con.execute("PRAGMA integrity_check").fetchone()[0], flush=True)
        keys = [str(r[0]) for r in con.execute("SELECT k FROM t ORDER BY k")]
        print("rows", ",".join(keys), flush=True)
        con.execute("BEGIN IMMEDIATE")
        con.execute("INSERT INTO t VALUES (-2, randomblob(2000))")
        con.execute("COMMIT")
        print("wrote", flush=True)
    except sqlite3.Error as e:
        print("err", str(e).replace("\n", " "), flush=True)


if __name__ == "__main__":
    {"serve": serve, "check": check}[sys.argv[2]](sys.argv[1])
