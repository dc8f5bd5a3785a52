#!/usr/bin/env bash
# observe.sh: the seed workload of docs/observability.md. On a SQLite
# volume with a local-directory bucket, a C tree with its .git
# (bench/ctree.sh) is copied into the mount; then, for each set of mount
# options, the access log is recorded while `git status` runs and while
# `make -j2` runs, `sluice profile --interval 0` summarizes each log, and
# `sluice stats` samples the mount during the build. Run as root from the
# project's root. Env: SRC (a tree from ctree.sh; made in the work
# directory when unset), SLUICE (binary; built when unset), OUT (where the
# outputs go; default a temporary directory).
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
W=$(mktemp -d /tmp/observe.XXXXXX)
OUT=${OUT:-$W/out}
mkdir -p "$OUT" "$W/mnt"
if [ -z "${SLUICE:-}" ]; then
  (cd "$HERE/.." && go build -o "$W/sluice" ./cmd/sluice)
  SLUICE=$W/sluice
fi
if [ -z "${SRC:-}" ]; then
  SRC=$W/src
  "$HERE/ctree.sh" "$SRC" >/dev/null
fi
META=sqlite3://$W/meta.db
MNT=$W/mnt
cleanup() {
  "$SLUICE" umount "$MNT" 2>/dev/null || true
  rm -rf "$W/bucket" "$W/cache" "$W/meta.db"*
}
trap cleanup EXIT
"$SLUICE" format "$META" observe --bucket "$W/bucket" --trash-days 0 >/dev/null
export GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0=safe.directory GIT_CONFIG_VALUE_0="*"

# record LOG CMD...: runs CMD in the mount's tree while copying
# .accesslog into LOG (opening it again after each quiet second).
record() {
  local log=$1; shift
  : >"$log"
  ( while :; do cat "$MNT/.accesslog" >>"$log" 2>/dev/null || sleep 0.1; done ) &
  local rec=$!
  sleep 0.3
  local t0 t1
  t0=$(date +%s.%N)
  (cd "$MNT/tree" && "$@" >/dev/null 2>&1)
  t1=$(date +%s.%N)
  sleep 0.3
  kill "$rec" 2>/dev/null; wait "$rec" 2>/dev/null || true
  pkill -f "cat $MNT/.accesslog" 2>/dev/null || true
  python3 -c 'import sys; print("%.2f" % (float(sys.argv[2]) - float(sys.argv[1])))' "$t0" "$t1"
}

round() {
  local name=$1; shift
  "$SLUICE" mount -d "$META" "$MNT" --log "$W/mount.log" --cache-dir "$W/cache" "$@" >/dev/null
  [ -d "$MNT/tree" ] || cp -a "$SRC" "$MNT/tree"
  (cd "$MNT/tree" && git status >/dev/null) # the index is refreshed once
  s=$(record "$OUT/$name.status.log" git status --porcelain)
  echo "== $name: git status ${s}s (options: ${*:-defaults})" | tee -a "$OUT/summary.txt"
  "$SLUICE" profile "$OUT/$name.status.log" --interval 0 >"$OUT/$name.status.profile"
  (cd "$MNT/tree" && git clean -fdxq)
  "$SLUICE" stats "$MNT" --interval 2 --schema ufmco >"$OUT/$name.make.stats" &
  local st=$!
  s=$(record "$OUT/$name.make.log" make -j2)
  kill "$st"; wait "$st" 2>/dev/null || true
  sleep 1.2 # the last reader of .accesslog sees its quiet second
  echo "== $name: make -j2 ${s}s" | tee -a "$OUT/summary.txt"
  "$SLUICE" profile "$OUT/$name.make.log" --interval 0 >"$OUT/$name.make.profile"
  (cd "$MNT/tree" && git clean -fdxq)
  "$SLUICE" umount "$MNT"
}

round defaults
round caches --entry-cache 300 --attr-cache 300 --dir-entry-cache 300
round negative --entry-cache 300 --attr-cache 300 --dir-entry-cache 300 --negative-entry-cache 300
round writeback --entry-cache 300 --attr-cache 300 --dir-entry-cache 300 --negative-entry-cache 300 --writeback
# local disk, for the ceiling
rm -rf "$W/local" && cp -a "$SRC" "$W/local"
(cd "$W/local" && git status >/dev/null)
t0=$(date +%s.%N); (cd "$W/local" && git status --porcelain >/dev/null); t1=$(date +%s.%N)
echo "== local disk: git status $(python3 -c 'import sys; print("%.2f" % (float(sys.argv[2]) - float(sys.argv[1])))' "$t0" "$t1")s" | tee -a "$OUT/summary.txt"
t0=$(date +%s.%N); (cd "$W/local" && make -j2 >/dev/null 2>&1); t1=$(date +%s.%N)
echo "== local disk: make -j2 $(python3 -c 'import sys; print("%.2f" % (float(sys.argv[2]) - float(sys.argv[1])))' "$t0" "$t1")s" | tee -a "$OUT/summary.txt"
rm -rf "$W/local"
echo "outputs in $OUT"
