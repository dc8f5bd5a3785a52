#!/usr/bin/env bash
# Cache group: reads of blocks cached on a peer against the same reads from the local disk cache,
# and the GETs a group sends to object storage.
#
#   scripts/test-servers.sh bench/cachegroup.sh [MiB]     (as root, from the repository; default 1024)
#
# Formats a volume on the S3 test server (SLUICE_TEST_S3, which scripts/test-servers.sh starts) and
# mounts it three times on this host, each mount with a cache directory of its own:
#   local   no group: the baseline, reading from its own disk cache;
#   owner   --cache-group bench: holds every block of the group;
#   reader  --cache-group bench --no-sharing: holds none, so every block it reads is the owner's.
# A file of MiB MiB is written through local and warmed into local's disk cache (`sluice warmup`),
# then warmed into the group through reader (which puts every block on owner: it counts the GETs
# the group sent, one per block expected). The mounts are remounted, so that their memory caches
# are empty, and each round reads the file with dd bs=1M iflag=direct through local and through
# reader, twice: with the page cache dropped first ("cold": the disk cache files come from the
# disk, on both sides) and not ("warm": they come from the page cache), then does 2,000 random
# 4 KiB preads at distinct offsets (POSIX_FADV_RANDOM) through each, with the page cache dropped,
# reporting p50 and p99. Each sequential read also reports the CPU seconds per GiB of the mount
# reading and of owner (from /proc/PID/stat): with every mount on one host, owner and reader share
# its CPUs, which members on hosts of their own do not. Two lines follow: the GETs the group sent during the rounds (0 expected:
# every block is on owner), and the bytes reader received from owner per byte it read (1.0: each
# block crossed the network once per pass).
#
# Prints RESULT lines per round, then medians and the ratios reader/local.
#
# Environment:
#   ROUNDS   rounds (default 3)
#   PIN=1    pin owner to CPU 0, and local, reader and dd to CPU 1 (taskset): each side of the
#            group gets a CPU of its own, as members on hosts of their own do, and the local
#            baseline gets the one CPU reader has
#   SLUICE   a sluice binary (default: built from ./cmd/sluice)
#   TMPDIR   where mounts and caches go (default /tmp; removed at the end)
set -euo pipefail
cd "$(dirname "$0")/.."
MIB=${1:-1024}
ROUNDS=${ROUNDS:-3}
[ "$(id -u)" = 0 ] || { echo "run as root (FUSE mounts)" >&2; exit 1; }
[ -n "${SLUICE_TEST_S3:-}" ] || { echo "SLUICE_TEST_S3 is not set: run under scripts/test-servers.sh" >&2; exit 1; }
work=$(mktemp -d "${TMPDIR:-/tmp}/sluice-cachegroup.XXXXXX")
chmod 755 "$work"
bin=${SLUICE:-}
if [ -z "$bin" ]; then
  go build -o bin/sluice ./cmd/sluice
  bin=bin/sluice
fi
mounts=(local owner reader)
cleanup() {
  for m in "${mounts[@]}"; do grep -qs " $work/$m " /proc/mounts && "$bin" umount --force "$work/$m"; done
  rm -rf "$work"
}
trap cleanup EXIT

# SLUICE_TEST_S3 is http://AK:SK@HOST:PORT/BUCKET.
s3=${SLUICE_TEST_S3#http://}
creds=${s3%%@*}
ak=${creds%%:*} sk=${creds#*:}
bucket=http://${s3#*@}
name=cgbench$$
url="sqlite3://$work/meta.db"
"$bin" format "$url" "$name" --storage s3 --bucket "$bucket" --access-key "$ak" --secret-key "$sk" --trash-days 0 >/dev/null

flags_local=()
flags_owner=(--cache-group bench --cache-group-listen 127.0.0.1:0)
flags_reader=(--cache-group bench --cache-group-listen 127.0.0.1:0 --no-sharing)
mount_one() { # mount_one NAME
  local m=$1 f="flags_$1[@]"
  mkdir -p "$work/$m"
  out=$("$bin" mount -d "$url" "$work/$m" --log "$work/$m.log" --cache-dir "$work/cache-$m" --cache-size 4096 \
    --metrics "127.0.0.1:${ports[$m]}" "${!f}" 2>&1)
  pids[$m]=$(sed -n 's/.*(pid \([0-9]*\).*/\1/p' <<<"$out")
  if [ "${PIN:-}" = 1 ]; then
    taskset -a -p -c "$([ "$m" = owner ] && echo 0 || echo 1)" "${pids[$m]}" >/dev/null
  fi
}
run() { # run CMD...: CMD, on CPU 1 with PIN=1
  if [ "${PIN:-}" = 1 ]; then taskset -c 1 "$@"; else "$@"; fi
}
declare -A ports=([local]=19571 [owner]=19572 [reader]=19573) pids=()
cpu() { # cpu NAME: CPU seconds (user + system) the mount's process has used
  awk -v hz="$(getconf CLK_TCK)" '{printf "%.3f\n", ($14 + $15) / hz}' "/proc/${pids[$1]}/stat"
}
metric() { # metric NAME SERIES: the value of a series of a mount's metrics
  curl -s "http://127.0.0.1:${ports[$1]}/metrics" | awk -v s="$2" '$1 == s {printf "%d\n", $2}'
}
gets() { # gets NAME...: GETs the mounts sent to object storage
  local n=0 m v
  for m in "$@"; do
    v=$(curl -s "http://127.0.0.1:${ports[$m]}/metrics" | awk '/^sluice_object_requests_total\{op="get"\}/ {print $2}')
    n=$(python3 -c "print(int($n + float('${v:-0}')))")
  done
  echo "$n"
}
for m in "${mounts[@]}"; do mount_one "$m"; done
sleep 4 # a refresh of the group's member list

head -c $((MIB << 20)) /dev/urandom > "$work/local/data"
"$bin" warmup "$work/local/data" >/dev/null
before=$(gets owner reader)
"$bin" warmup "$work/reader/data" >/dev/null
after=$(gets owner reader)
blocks=$(((MIB + 3) / 4))
echo "RESULT warmup-gets group=$((after - before)) blocks=$blocks"

for m in "${mounts[@]}"; do "$bin" umount "$work/$m"; done
sleep 1
for m in "${mounts[@]}"; do mount_one "$m"; done
sleep 4

cat > "$work/rand.py" <<'EOF'
import os, random, sys, time
path, n = sys.argv[1], int(sys.argv[2])
fd = os.open(path, os.O_RDONLY)
size = os.fstat(fd).st_size
os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_RANDOM)
offs = random.Random(7).sample(range(size // 4096), n)
lat = []
for o in offs:
    t = time.perf_counter_ns()
    os.pread(fd, 4096, o * 4096)
    lat.append(time.perf_counter_ns() - t)
lat.sort()
print("%.0f %.0f" % (lat[len(lat) // 2] / 1000, lat[len(lat) * 99 // 100] / 1000))
EOF
drop() { sync; echo 3 > /proc/sys/vm/drop_caches; }
base=$(gets owner reader)
fetched=$(metric reader sluice_cachegroup_fetched_bytes_total)
for r in $(seq "$ROUNDS"); do
  for temp in cold warm; do
    for m in local reader; do
      [ "$temp" = cold ] && drop
      c0=$(cpu "$m") o0=$(cpu owner)
      # O_DIRECT: every read reaches the mount, whatever the page cache
      # holds of the file; dd prints its own unit, normalized to MB/s.
      out=$(run dd if="$work/$m/data" of=/dev/null bs=1M iflag=direct 2>&1 | tail -1)
      c1=$(cpu "$m") o1=$(cpu owner)
      rate=$(python3 -c 'import re, sys
m = re.search(r"([0-9.]+) ([kMG]B)/s", sys.argv[1])
print(round(float(m.group(1)) * {"kB": 1e-3, "MB": 1, "GB": 1e3}[m.group(2)]))' "$out")
      # CPU seconds per GiB read, of the reading mount and (for reader)
      # of the owner serving it.
      cpus=$(python3 -c "print('cpu-s/GiB=%.2f owner-cpu-s/GiB=%.2f' % (($c1 - $c0) * 1024 / $MIB, ($o1 - $o0) * 1024 / $MIB))")
      echo "RESULT round=$r seq-$temp $m MB/s=$rate $cpus" | tee -a "$work/results"
    done
  done
  for m in local reader; do
    drop
    read -r p50 p99 < <(run python3 "$work/rand.py" "$work/$m/data" 2000)
    echo "RESULT round=$r rand4k $m p50-us=$p50 p99-us=$p99" | tee -a "$work/results"
  done
done
echo "RESULT gets-after-reads group=$(($(gets owner reader) - base))"
# Bytes reader received from owner per byte of the file it read
# sequentially (1.0: each block crossed once per pass).
echo "RESULT peer-bytes-per-seq-byte $(python3 -c "print(round(($(metric reader sluice_cachegroup_fetched_bytes_total) - $fetched) / ($ROUNDS * 2 * $MIB * 1048576 + $ROUNDS * 2 * 2000 * 4096), 3))")"
python3 - "$work/results" <<'EOF'
import statistics, sys
v = {}
for line in open(sys.argv[1]):
    f = line.split()
    for kv in f[4:]:
        k, x = kv.split("=")
        v.setdefault((f[2], f[3], k), []).append(float(x))
med = {k: statistics.median(x) for k, x in v.items()}
for (what, m, k), x in sorted(med.items()):
    print("MEDIAN %s %s %s=%g" % (what, m, k, x))
for what in ("seq-cold", "seq-warm"):
    l, r = med[(what, "local", "MB/s")], med[(what, "reader", "MB/s")]
    print("RATIO %s reader/local=%.2f" % (what, r / l))
EOF
