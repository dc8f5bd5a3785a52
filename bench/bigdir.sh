#!/usr/bin/env bash
# Lists a directory of N entries (default 1,000,000) through a mount and
# reports the listing rate and the mount process's resident memory before
# and during the listing: listings stream in pages, so memory must stay
# flat however big the directory is. SQLite metadata by default; META_URL
# may name another engine's empty namespace.
#
#   bench/bigdir.sh [N]
set -euo pipefail
cd "$(dirname "$0")/.."
n=${1:-1000000}
work=$(mktemp -d /tmp/sluice-bigdir.XXXXXX)
chmod 755 "$work"
meta=${META_URL:-sqlite3://$work/meta.db}
bin=$work/sluice
trap 'grep -qs " $work/mnt " /proc/mounts && "$bin" umount --force "$work/mnt"; rm -rf "$work"' EXIT
go build -o "$bin" ./cmd/sluice
go build -o "$work/bigdir" ./bench/bigdir
"$bin" format "$meta" bigdir --bucket "$work/bucket" --trash-days 0 >/dev/null
"$work/bigdir" -meta "$meta" -n "$n"
mkdir -p "$work/mnt"
"$bin" mount -d "$meta" "$work/mnt" --cache-dir memory --log "$work/mount.log" >/dev/null
pid=$(pgrep -f -- "mount -d $meta $work/mnt" | head -1)
rss() { awk '/VmRSS/ {print $2}' "/proc/$pid/status"; }
echo "mount RSS before listing: $(rss) KiB"
peak=0
( while sleep 0.2; do r=$(rss) || exit 0; echo "$r"; done ) >"$work/rss" &
sampler=$!
start=$(date +%s.%N)
count=$(python3 -c 'import os,sys; print(sum(1 for _ in os.scandir(sys.argv[1])))' "$work/mnt/big")
end=$(date +%s.%N)
kill "$sampler" 2>/dev/null || true
peak=$(sort -n "$work/rss" | tail -1)
echo "listed $count entries in $(awk -v a="$start" -v b="$end" 'BEGIN{printf "%.1f", b-a}')s ($(awk -v a="$start" -v b="$end" -v n="$count" 'BEGIN{printf "%.0f", n/(b-a)}') entries/s); peak mount RSS during the listing: $peak KiB"
[ "$count" = "$n" ] || { echo "listed $count entries, want $n" >&2; exit 1; }
