#!/usr/bin/env bash
# shared-sqlite.sh: one SQLite database on a volume mounted several times,
# several processes per mount inserting rows (one connection per insert,
# the default rollback journal), as programs share a database on a network
# file system. Prints acknowledged commits, rows in the table, errors by
# code, the integrity check and the time taken. Run as root from the
# project's root.
#
# MOUNTS (2) mounts, PROCS (1) processes per mount, ROWS (150) attempts
# per process, TIMEOUT (20) SQLite's busy timeout in seconds.
# FS, SLUICE, JUICEFS, ENGINE, OPTS and FORMAT_OPTS: see shared-volume.sh.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
MOUNTS=${MOUNTS:-2} PROCS=${PROCS:-1} ROWS=${ROWS:-150} TIMEOUT=${TIMEOUT:-20}
D=$(mktemp -d /tmp/shared-sqlite.XXXXXX); chmod 755 "$D"
. "$HERE/shared-volume.sh"
python3 -c "import sqlite3,sys; c=sqlite3.connect(sys.argv[1]); c.execute('CREATE TABLE t (worker INTEGER, seq INTEGER)'); c.commit()" "$D/m1/db"
start=$(date +%s.%N)
pids=()
for i in $(seq 1 "$MOUNTS"); do
  for p in $(seq 1 "$PROCS"); do
    w=$(( (i - 1) * PROCS + p ))
    python3 "$HERE/../internal/e2e/testdata/sqlite_writer.py" "$D/m$i/db" "$w" "$ROWS" "$TIMEOUT" >"$D/w$w.out" 2>&1 &
    pids+=($!)
  done
done
wait "${pids[@]}"
end=$(date +%s.%N)
acked=$(cat "$D"/w*.out | grep -c '^ok' || true)
python3 - "$D/m1/db" "$acked" "$(( MOUNTS * PROCS * ROWS ))" "$(echo "$end - $start" | bc)" "$D" <<'PY'
import collections, glob, sqlite3, sys
db, acked, attempts, secs, d = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4]), sys.argv[5]
con = sqlite3.connect(db, timeout=60)
rows = set(con.execute("SELECT worker, seq FROM t"))
ok = set()
errs = collections.Counter()
for f in glob.glob(d + "/w*.out"):
    for line in open(f):
        p = line.split()
        if p and p[0] == "ok":
            ok.add((int(p[1]), int(p[2])))
        elif p and p[0] == "err":
            errs[p[3]] += 1
lost = len(ok - rows)
print("RESULT attempts=%d acked=%d rows=%d lost=%d integrity=%s s=%.1f commits_per_s=%.1f errors=%s" % (
    attempts, acked, len(rows), lost, con.execute("pragma integrity_check").fetchone()[0], secs,
    acked / secs, dict(errs) or "none"))
PY
