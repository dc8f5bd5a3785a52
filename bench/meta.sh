#!/usr/bin/env bash
# Metadata benchmark through FUSE for every metadata engine whose test
# server is available: formats a volume per engine, mounts it, runs
# bench/mdbench (create, stat, readdir, rename, unlink of N files, and a
# listing of a big directory), then unmounts. Run it inside
# scripts/test-servers.sh to get throwaway servers:
#
#   scripts/test-servers.sh bench/meta.sh [N] [BIG]
#
# ENGINES="postgres mysql" limits the run to those engines (default: all
# of sqlite3 redis postgres mysql etcd whose server is there, and sluice,
# the in-memory metadata server, which the script starts itself).
#
# Results go to stdout; docs/benchmarks.md records them with this command.
set -euo pipefail
cd "$(dirname "$0")/.."
n=${1:-10000}
big=${2:-100000}
work=$(mktemp -d /tmp/sluice-bench.XXXXXX)
chmod 755 "$work"
mspid=
trap 'for m in "$work"/mnt-*; do grep -qs " $m " /proc/mounts && bin/sluice umount --force "$m"; done; [ -n "$mspid" ] && kill "$mspid"; wait; rm -rf "$work"' EXIT
go build -o bin/sluice ./cmd/sluice
go build -o "$work/mdbench" ./bench/mdbench
ns="bench$$"
declare -A urls=([sqlite3]="sqlite3://$work/meta.db")
[ -n "${SLUICE_TEST_REDIS:-}" ] && urls[redis]="${SLUICE_TEST_REDIS%/}?prefix=$ns"
[ -n "${SLUICE_TEST_POSTGRES:-}" ] && urls[postgres]="$SLUICE_TEST_POSTGRES&table_prefix=${ns}_"
[ -n "${SLUICE_TEST_MYSQL:-}" ] && urls[mysql]="$SLUICE_TEST_MYSQL?table_prefix=${ns}_"
[ -n "${SLUICE_TEST_ETCD:-}" ] && urls[etcd]="${SLUICE_TEST_ETCD%/}/$ns"
if [[ " ${ENGINES:-sluice} " == *" sluice "* ]]; then
  msport=$((20000 + RANDOM % 10000))
  bin/sluice meta-server --dir "$work/metaserver" --listen "127.0.0.1:$msport" --log "$work/metaserver.log" &
  mspid=$!
  urls[sluice]="sluice://127.0.0.1:$msport/$ns"
  for _ in $(seq 1 100); do (echo >"/dev/tcp/127.0.0.1/$msport") 2>/dev/null && break; sleep 0.1; done
fi
for engine in ${ENGINES:-sqlite3 redis postgres mysql etcd sluice}; do
  url=${urls[$engine]:-}
  [ -n "$url" ] || { echo "== $engine: no server, skipped"; continue; }
  mnt="$work/mnt-$engine"
  mkdir -p "$mnt"
  bin/sluice format "$url" "b-$engine" --bucket "$work/data-$engine" >/dev/null
  bin/sluice mount -d "$url" "$mnt" --log "$work/$engine.log" >/dev/null
  echo "== $engine"
  "$work/mdbench" -dir "$mnt/bench" -n "$n" -list "$big"
  bin/sluice umount "$mnt"
done
