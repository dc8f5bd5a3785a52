#!/usr/bin/env bash
# Data-path benchmark with fio through a Sluice mount (SQLite metadata,
# local-directory storage unless STORAGE/BUCKET say otherwise), and the
# client's CPU time per GiB moved, read from /proc of the mount process.
#
#   bench/fio.sh [SIZE] [RUNS]
#
# SIZE is the file size per fio job (default 1G); RUNS repeats every job and
# reports the median (default 3). Environment:
#   MOUNT_OPTS   extra `sluice mount` flags (e.g. "--writeback")
#   STORAGE, BUCKET, ACCESS_KEY, SECRET_KEY
#                object storage for `sluice format` (default: a temp dir)
#   EXT4_DIR     also run the same jobs in this local directory, as the
#                baseline (default: skipped)
#   JOBS         which jobs to run (default "seqwrite1 seqread1 seqwrite4
#                seqread4 randread4k")
#
# Sequential reads run on a fresh mount (empty client caches, kernel page
# cache of the files dropped); the local bucket directory stays in the OS
# page cache, as it would on a machine with a local-disk cache.
# docs/benchmarks.md records results with the command that produced them.
set -euo pipefail
cd "$(dirname "$0")/.."
size=${1:-1G}
runs=${2:-3}
jobs=${JOBS:-seqwrite1 seqread1 seqwrite4 seqread4 randread4k}
command -v fio >/dev/null || { echo "fio is not installed (apt-get install fio)" >&2; exit 1; }

work=$(mktemp -d /tmp/sluice-fio.XXXXXX)
chmod 755 "$work"
mnt=$work/mnt
bin=$work/sluice
meta="sqlite3://$work/meta.db"
cleanup() {
  grep -qs " $mnt " /proc/mounts && "$bin" umount --force "$mnt" >/dev/null 2>&1
  rm -rf "$work"
}
trap cleanup EXIT
go build -o "$bin" ./cmd/sluice
mkdir -p "$mnt"
storage=${STORAGE:-file}
bucket=${BUCKET:-$work/bucket}
"$bin" format "$meta" fiobench --storage "$storage" --bucket "$bucket" >/dev/null

# mount_pid prints the pid of the process serving $mnt.
mount_pid() {
  pgrep -f -- "mount.*$mnt" | head -1
}
# cpu_ticks prints utime+stime of pid in clock ticks.
cpu_ticks() {
  awk '{print $14 + $15}' "/proc/$1/stat"
}
do_mount() {
  # shellcheck disable=SC2086
  "$bin" mount -d "$meta" "$mnt" --log "$work/mount.log" --cache-dir "$work/cache" ${MOUNT_OPTS:-} >/dev/null
}
do_umount() {
  "$bin" umount "$mnt" >/dev/null
}

# fio_job NAME DIR ARGS... runs one fio job and prints "MiB/s IOPS".
fio_job() {
  local name=$1 dir=$2
  shift 2
  fio --name="$name" --directory="$dir" --output-format=json --group_reporting "$@" >"$work/fio.json"
  python3 - "$work/fio.json" <<'EOF'
import json, sys
j = json.load(open(sys.argv[1]))["jobs"][0]
bw = j["read"]["bw_bytes"] + j["write"]["bw_bytes"]
iops = j["read"]["iops"] + j["write"]["iops"]
lat = max(j["read"]["clat_ns"]["mean"], j["write"]["clat_ns"]["mean"]) / 1000
print(f"{bw / 2**20:.0f} {iops:.0f} {lat:.0f}")
EOF
}

# run_job JOB DIR MOUNTED prints "MiB/s IOPS lat_us cpu_s_per_GiB".
run_job() {
  local job=$1 dir=$2 mounted=$3 pid="" t0=0 res bytes
  local common=(--bs=1M --size="$size" --ioengine=psync)
  case $job in
  seqwrite1 | seqwrite4) rm -f "$dir"/"$job".* ;;
  esac
  if $mounted; then
    case $job in
    seqread* | randread*) do_umount; do_mount ;;
    esac
    pid=$(mount_pid)
    t0=$(cpu_ticks "$pid")
  fi
  sync
  echo 3 >/proc/sys/vm/drop_caches 2>/dev/null || true
  case $job in
  seqwrite1) res=$(fio_job "$job" "$dir" "${common[@]}" --rw=write --numjobs=1 --end_fsync=1) ;;
  seqread1) res=$(fio_job seqwrite1 "$dir" "${common[@]}" --rw=read --numjobs=1) ;;
  seqwrite4) res=$(fio_job "$job" "$dir" "${common[@]}" --rw=write --numjobs=4 --end_fsync=1) ;;
  seqread4) res=$(fio_job seqwrite4 "$dir" "${common[@]}" --rw=read --numjobs=4) ;;
  randread4k)
    # Warm the client's block cache with one buffered pass, then measure.
    cat "$dir"/seqwrite1.* >/dev/null
    $mounted && t0=$(cpu_ticks "$pid")
    res=$(fio_job seqwrite1 "$dir" --size="$size" --bs=4k --rw=randread --direct=1 --ioengine=psync \
      --numjobs=1 --runtime=15 --time_based)
    ;;
  esac
  local cpu="-"
  if $mounted; then
    local ticks=$(($(cpu_ticks "$pid") - t0)) hz
    hz=$(getconf CLK_TCK)
    bytes=$(numfmt --from=iec "$size")
    case $job in
    *4) bytes=$((bytes * 4)) ;;
    randread4k) bytes=$(awk -v r="${res%% *}" 'BEGIN{print int(r * 15 * 1048576)}') ;;
    esac
    cpu=$(awk -v t="$ticks" -v hz="$hz" -v b="$bytes" 'BEGIN{ if (b > 0) printf "%.2f", t / hz / (b / 2^30); else print "-" }')
  fi
  echo "$res $cpu"
}

median() { sort -n | awk '{a[NR]=$1} END{print a[int((NR+1)/2)]}'; }

report() {
  local where=$1 dir=$2 mounted=$3
  printf '%-10s %-11s %10s %8s %9s %13s\n' "$where" job "MiB/s" IOPS "lat µs" "CPU s/GiB"
  for job in $jobs; do
    local out=() i
    for ((i = 0; i < runs; i++)); do out+=("$(run_job "$job" "$dir" "$mounted")"); done
    local bw iops lat cpu
    bw=$(printf '%s\n' "${out[@]}" | awk '{print $1}' | median)
    iops=$(printf '%s\n' "${out[@]}" | awk '{print $2}' | median)
    lat=$(printf '%s\n' "${out[@]}" | awk '{print $3}' | median)
    cpu=$(printf '%s\n' "${out[@]}" | awk '{print $4}' | median)
    printf '%-10s %-11s %10s %8s %9s %13s   runs: %s\n' "$where" "$job" "$bw" "$iops" "$lat" "$cpu" \
      "$(printf '%s\n' "${out[@]}" | awk '{printf "%s ", $1}')"
  done
}

do_mount
echo "# fio, size $size per job, median of $runs runs; mount options: ${MOUNT_OPTS:-(none)}; storage $storage"
report sluice "$mnt" true
do_umount
if [ -n "${EXT4_DIR:-}" ]; then
  mkdir -p "$EXT4_DIR/fio"
  report local "$EXT4_DIR/fio" false
  rm -rf "$EXT4_DIR/fio"
fi
