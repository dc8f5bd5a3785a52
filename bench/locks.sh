#!/usr/bin/env bash
# locks.sh [ROUNDS]: the cost of a lock through a mount (bench/lockbench:
# fcntl and flock lock+unlock pairs, and a 4 KiB read under a read lock),
# side by side for up to three file systems mounted on the same engine
# (SQLite, or Redis with ENGINE=redis) with a local-directory bucket,
# rounds interleaved; prints the median of each figure per file system.
# Run as root from the project's root.
#
# SLUICE   a sluice binary (default: built from ./cmd/sluice)
# BASE     an earlier sluice binary to compare with (optional)
# JUICEFS  a JuiceFS binary (optional; `JUICEFS=$(bench/juicefs/build.sh)` for the reference)
# N        pairs per case per round (2000)
set -euo pipefail
R=${1:-3}
D=$(mktemp -d /tmp/locks.XXXXXX); chmod 755 "$D"
names=()
cleanup() { for n in "${names[@]}"; do umount "$D/m-$n" 2>/dev/null || umount -l "$D/m-$n" 2>/dev/null || true; done; rm -rf "$D"; }
trap cleanup EXIT
if [ -z "${SLUICE:-}" ]; then SLUICE=$D/sluice; go build -o "$SLUICE" ./cmd/sluice; fi
go build -o "$D/lockbench" ./bench/lockbench
declare -A bins=([sluice]=$SLUICE)
names=(sluice)
if [ -n "${BASE:-}" ]; then bins[base]=$BASE; names+=(base); fi
if [ -n "${JUICEFS:-}" ]; then bins[juicefs]=$JUICEFS; names+=(juicefs); fi
db=10
for n in "${names[@]}"; do
  case ${ENGINE:-sqlite} in
    sqlite) url="sqlite3://$D/$n.db" ;;
    redis) base=${REDIS_URL:-redis://127.0.0.1:6379}; db=$((db + 1)); url=$base/$db
           hp=${base#redis://}; redis-cli -h "${hp%:*}" -p "${hp##*:}" -n "$db" flushdb >/dev/null ;;
  esac
  "${bins[$n]}" format "$url" "v$n" --bucket "$D/b-$n" >"$D/f-$n.log" 2>&1 || { cat "$D/f-$n.log"; exit 1; }
  mkdir -p "$D/m-$n"
  "${bins[$n]}" mount -d "$url" "$D/m-$n" --cache-dir "$D/c-$n" --log "$D/l-$n.log" >/dev/null 2>&1
done
for r in $(seq 1 "$R"); do
  for n in "${names[@]}"; do
    "$D/lockbench" -n "${N:-2000}" "$D/m-$n/lockfile" | sed "s/^/$n /" >>"$D/res"
  done
done
python3 - "$D/res" "${names[@]}" <<'PY'
import re, sys, statistics as st
res, names = sys.argv[1], sys.argv[2:]
vals = {}
for line in open(res):
    who, _, case, *fields = line.split()
    for f in fields:
        k, v = f.split("=")
        vals.setdefault((case, k, who), []).append(float(v))
cases = sorted({(c, k) for c, k, _ in vals})
print("%-36s" % "figure (median of rounds)" + "".join("%12s" % n for n in names))
for c, k in cases:
    print("%-36s" % (c + " " + k) + "".join("%12.1f" % st.median(vals.get((c, k, n), [float("nan")])) for n in names))
PY
