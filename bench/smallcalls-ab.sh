#!/usr/bin/env bash
# Per-call costs (bench/smallcalls.py) on Redis-backed mounts of several Sluice binaries and of JuiceFS
# 1.4.1, alternating, for telling two builds apart on a noisy machine: each round runs the loops on every
# mount in turn, and the table gives each call's median over the rounds with every round's figure.
#
#   bench/smallcalls-ab.sh ROUNDS SLUICE_BINARY...      (as root, from anywhere in the repository)
#
# Environment:
#   REDIS_URL   the server (default redis://127.0.0.1:6379); databases 8, 9, ... (one per binary) and 12
#               (JuiceFS) are flushed and used
#   CALLS       iterations of each loop (default 1000)
#   JUICEFS     the JuiceFS binary (default: scripts/build-juicefs.sh; JUICEFS=none skips it)
#   TMPDIR      where buckets, caches and mounts go (default /tmp; removed at the end)
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -ge 2 ] || { echo "usage: $0 ROUNDS SLUICE_BINARY..." >&2; exit 2; }
[ "$(id -u)" = 0 ] || { echo "run as root (FUSE mounts)" >&2; exit 1; }
rounds=$1; shift
base=${REDIS_URL:-redis://127.0.0.1:6379}; hp=${base#redis://}
J=${JUICEFS:-$(scripts/build-juicefs.sh)}
D=$(mktemp -d "${TMPDIR:-/tmp}/sluice-ab.XXXXXX"); chmod 755 "$D"
mounts=()
cleanup() { for m in "${mounts[@]}"; do umount "${m#*=}" 2>/dev/null || umount -l "${m#*=}" 2>/dev/null || true; done; rm -rf "$D"; }
trap cleanup EXIT
flush() { redis-cli -h "${hp%:*}" -p "${hp##*:}" -n "$1" flushdb >/dev/null; }
i=0
for b in "$@"; do
  db=$((8 + i)); i=$((i + 1)); flush $db
  "$b" format "$base/$db" "ab-$i" --storage file --bucket "$D/b$i" --trash-days 0 >"$D/f$i.log" 2>&1 || { cat "$D/f$i.log"; exit 1; }
  mkdir -p "$D/m$i"
  "$b" mount -d "$base/$db" "$D/m$i" --cache-dir "$D/c$i" --log "$D/l$i" >/dev/null
  mounts+=("$i:$(basename "$b")=$D/m$i")
done
if [ "$J" != none ]; then
  flush 12
  "$J" format "$base/12" ab-juicefs --storage file --bucket "$D/jb/" --trash-days 0 >"$D/jf.log" 2>&1 || { cat "$D/jf.log"; exit 1; }
  mkdir -p "$D/jm"; "$J" mount -d "$base/12" "$D/jm" --cache-dir "$D/jc" --log "$D/jl" >/dev/null 2>&1
  mounts+=("j:juicefs=$D/jm")
fi
for m in "${mounts[@]}"; do
  for _ in $(seq 50); do mountpoint -q "${m#*=}" && break; sleep 0.1; done
  mountpoint -q "${m#*=}" || { echo "${m%%=*} did not mount" >&2; exit 1; }
done
for _ in $(seq "$rounds"); do
  for m in "${mounts[@]}"; do
    python3 bench/smallcalls.py "${m#*=}" "${CALLS:-1000}" | sed "s/^RESULT /RESULT ${m%%=*} /"
  done
done >"$D/res"
python3 - "$D/res" <<'PY'
import collections, statistics, sys
d = collections.defaultdict(list)
for line in open(sys.argv[1]):
    _, system, k, v = line.split()  # RESULT SYSTEM CALL us=N
    d[(system, k)].append(float(v.split("=")[1]))
systems = list(dict.fromkeys(s for s, _ in d))
calls = list(dict.fromkeys(k for _, k in d))
print("%-22s" % "µs (median [rounds])" + "".join("%30s" % s for s in systems))
for k in calls:
    print("%-22s" % k + "".join("%30s" % ("%.1f [%s]" % (statistics.median(d[(s, k)]), " ".join("%.0f" % x for x in d[(s, k)]))) for s in systems))
PY
