#!/usr/bin/env bash
# bench/juicefs/rand.sh DIR: 4 KiB random reads of data the client holds,
# with fio, through any mounted file system.
#
# Writes a file of SIZE (default 1g) in DIR/rand.PID, reads it through twice
# so that it sits in the client's caches, then for each variant in VARIANTS
# (default "page_cache direct") reads 4 KiB at random offsets for RUNTIME
# seconds (default 10; psync, one job):
#   page_cache buffered reads: the kernel's page cache answers (a FUSE file
#              system must let the kernel keep its pages across opens)
#   direct     O_DIRECT: every read is a request to the file system
# One line per variant for vs.sh:
#   FIGURE <variant> <IOPS> IOPS higher
set -euo pipefail
dir=${1:?usage: rand.sh DIR}
size=${SIZE:-1g}
command -v fio >/dev/null || { echo "rand.sh: fio is not installed (apt-get install fio)" >&2; exit 1; }
work=$dir/rand.$$
mkdir -p "$work"
trap 'rm -rf "$work"' EXIT
file=$work/data

fio --name=fill --filename="$file" --rw=write --bs=1M --size="$size" --ioengine=psync \
  --fallocate=none --output-format=terse >/dev/null
# Flush the file to the file system (a measuring device without fsync may refuse).
sync "$file" 2>/dev/null || true
cat "$file" >/dev/null
cat "$file" >/dev/null

for v in ${VARIANTS:-page_cache direct}; do
  case $v in
    page_cache) extra=(--direct=0 --invalidate=0) ;;
    direct) extra=(--direct=1) ;;
    *) echo "rand.sh: unknown variant $v (page_cache or direct)" >&2; exit 2 ;;
  esac
  iops=$(fio --name=rand --filename="$file" --rw=randread --bs=4k --size="$size" --ioengine=psync \
    --numjobs=1 --time_based --runtime="${RUNTIME:-10}" --output-format=json "${extra[@]}" |
    python3 -c 'import json, sys; print("%.0f" % json.load(sys.stdin)["jobs"][0]["read"]["iops"])')
  echo "FIGURE $v $iops IOPS higher"
done
