"""Insert rows into one SQLite database from one process, the way programs
share a database on a network file system: one connection per insert,
Python's default transactions, the default rollback journal, a busy
timeout.

usage: sqlite_writer.py DB WORKER ROWS [TIMEOUT]

Makes ROWS attempts. Prints "ok WORKER SEQ" for each acknowledged commit
and "err WORKER SEQ CODE MESSAGE" for each failed attempt.
"""

import sqlite3
import sys


def main():
    db, worker, rows = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    timeout = float(sys.argv[4]) if len(sys.argv) > 4 else 20.0
    for seq in range(rows):
        try:
            con = sqlite3.connect(db, timeout=timeout)
            try:
                con.execute("INSERT INTO t (worker, seq) VALUES (?, ?)", (worker, seq))
                con.commit()
            finally:
                con.close()
        except sqlite3.Error as e:
            code = getattr(e, "sqlite_errorname", type(e).__name__)
            print("err", worker, seq, code, str(e).replace("\n", " "), flush=True)
            continue
        print("ok", worker, seq, flush=True)


if __name__ == "__main__":
    main()
