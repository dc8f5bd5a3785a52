#!/usr/bin/env bash
# bench/juicefs/seq.sh DIR: sequential 1 MiB writes and reads with fio
# through any mounted file system.
#
# For each job count in JOBS (default "1 4"): each job writes a file of SIZE
# (default 1g) in DIR/seq.PID with psync and a final fsync (so the figure
# includes handing the data to the file system, not only the page cache),
# the page cache is dropped (as root), and the jobs read their files back.
# Aggregate MiB/s of all jobs, one line per figure for vs.sh:
#   FIGURE write_N_jobs <MiB/s> MiB/s higher
#   FIGURE read_N_jobs <MiB/s> MiB/s higher
set -euo pipefail
dir=${1:?usage: seq.sh DIR}
size=${SIZE:-1g}
command -v fio >/dev/null || { echo "seq.sh: fio is not installed (apt-get install fio)" >&2; exit 1; }
work=$dir/seq.$$
mkdir -p "$work"
trap 'rm -rf "$work"' EXIT

drop() {
  sync
  echo 3 >/proc/sys/vm/drop_caches 2>/dev/null || true
}

# mibps KIND: the summed bandwidth of fio's JSON report on stdin, in MiB/s.
mibps() {
  python3 -c 'import json, sys
jobs = json.load(sys.stdin)["jobs"]
print("%.1f" % (sum(j[sys.argv[1]]["bw_bytes"] for j in jobs) / 1048576))' "$1"
}

opts=(--directory="$work" --bs=1M --size="$size" --ioengine=psync --direct=0
  --fallocate=none --group_reporting=0 --output-format=json)
for jobs in ${JOBS:-1 4}; do
  rm -f "$work"/seq.*
  drop
  w=$(fio --name=seq --numjobs="$jobs" --rw=write --end_fsync=1 --create_on_open=1 "${opts[@]}" | mibps write)
  drop
  r=$(fio --name=seq --numjobs="$jobs" --rw=read "${opts[@]}" | mibps read)
  unit="jobs"; [[ $jobs == 1 ]] && unit=job
  echo "FIGURE write_${jobs}_$unit $w MiB/s higher"
  echo "FIGURE read_${jobs}_$unit $r MiB/s higher"
done
