#!/usr/bin/env bash
# Removal and reclaim: how long `rm -rf` of two copies of a source tree takes on a mount, and how long after
# it the mount's background deletion has emptied the bucket (the blocks of removed files are dropped by the
# mount, not by rm). One or more Sluice binaries side by side, rounds interleaved, each on a fresh volume.
#
#   bench/drain.sh BIN...          (as root, from anywhere in the repository)
#
# Each round, per binary: format a volume (--trash-days 0), mount it with default options, `tar -xf` the
# archive, `cp -a` the tree, then time `rm -rf` of both trees (RESULT ... rm) and poll the bucket every
# 0.5 s until no block is left (RESULT ... drain, seconds after rm returned; DRAIN_MAX caps the wait).
#
# Environment:
#   SRC        a directory to archive (default: $(go env GOROOT)/src, about 11,000 files and 160 MB)
#   ROUNDS     rounds (default 2)
#   ENGINE     sqlite (default) or redis (REDIS_URL, default redis://127.0.0.1:6379; database 13 is
#              flushed and used)
#   DRAIN_MAX  seconds to wait for the bucket to empty (default 300)
#   TMPDIR     where volumes, buckets and caches go (default /tmp; removed at the end)
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -ge 1 ] || { sed -n '2,9p' "$0" >&2; exit 2; }
[ "$(id -u)" = 0 ] || { echo "run as root (FUSE mounts)" >&2; exit 1; }
ROUNDS=${ROUNDS:-2} DRAIN_MAX=${DRAIN_MAX:-300}
D=$(mktemp -d "${TMPDIR:-/tmp}/sluice-drain.XXXXXX")
cleanup() { umount "$D/mnt" 2>/dev/null || umount -l "$D/mnt" 2>/dev/null || true; rm -rf "$D"; }
trap cleanup EXIT
SRC=${SRC:-$(go env GOROOT)/src}
tar -C "$(dirname "$SRC")" -cf "$D/tree.tar" "$(basename "$SRC")"
top=$(basename "$SRC")
blocks() { find "$D/bucket" -path "*/chunks/*" -type f 2>/dev/null | wc -l; }
now() { date +%s.%N; }
for r in $(seq 1 "$ROUNDS"); do
  for bin in "$@"; do
    name=$(basename "$bin")
    rm -rf "$D/bucket" "$D/cache" "$D/vol.db"; mkdir -p "$D/mnt"
    case ${ENGINE:-sqlite} in
      sqlite) url=sqlite3://$D/vol.db ;;
      redis)  base=${REDIS_URL:-redis://127.0.0.1:6379}; hp=${base#redis://}; url=$base/13
              redis-cli -h "${hp%:*}" -p "${hp##*:}" -n 13 flushdb >/dev/null ;;
      *) echo "ENGINE must be sqlite or redis" >&2; exit 2 ;;
    esac
    "$bin" format "$url" dvol --storage file --bucket "$D/bucket" --trash-days 0 >"$D/format.log" 2>&1 ||
      { cat "$D/format.log"; exit 1; }
    "$bin" mount -d "$url" "$D/mnt" --cache-dir "$D/cache" --log "$D/mount.log" >/dev/null
    for _ in $(seq 50); do mountpoint -q "$D/mnt" && break; sleep 0.1; done
    tar -C "$D/mnt" -xf "$D/tree.tar"
    cp -a "$D/mnt/$top" "$D/mnt/$top.copy"
    sync; echo 3 >/proc/sys/vm/drop_caches
    b=$(blocks); t0=$(now); rm -rf "$D/mnt/$top" "$D/mnt/$top.copy"; t1=$(now)
    echo "RESULT $name round=$r rm s=$(echo "$t1 - $t0" | bc) blocks=$b"
    left=$b
    while [ "$left" -gt 0 ] && [ "$(echo "$(now) - $t1 < $DRAIN_MAX" | bc)" = 1 ]; do sleep 0.5; left=$(blocks); done
    echo "RESULT $name round=$r drain s=$(echo "$(now) - $t1" | bc) left=$left"
    umount "$D/mnt"
  done
done
