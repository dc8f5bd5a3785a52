#!/usr/bin/env bash
# seqcpu.sh [ROUNDS]: sequential 1 MiB writes and reads through a Sluice and
# a JuiceFS 1.4.1 mount side by side, with each mount's CPU time per GiB
# moved (user + system of the mount process, from /proc/PID/stat), rounds
# interleaved. The other figures of issue 15 come from vs-juicefs.sh; this
# one measures what it does not: what the client spends per byte.
#
# Environment:
#   STORAGE  file (default), mem or s3 (S3_ENDPOINT=http://KEY:SECRET@HOST:PORT)
#   SIZE     per job (default 1g); JOBS, the job counts (default "1 4")
#   ENGINE   sqlite (default) or redis (REDIS_URL; databases 13 and 14 are flushed)
#   SLUICE, JUICEFS  binaries (default: built from ./cmd/sluice, and
#            scripts/build-juicefs.sh); SLUICE_OPTS, JUICEFS_OPTS extra mount flags
#
# Each round, per system and job count: fio writes JOBS files of SIZE
# (psync, --end_fsync=1), the page cache is dropped, fio reads them back.
# Prints RESULT lines per round and system, then the medians:
#   RESULT <sluice|juicefs> <write|read> jobs=N mibps=X cpu_s_per_gib=Y machine_s_per_gib=Z
# (Y: the mount's processes; Z: all CPUs, fio and the kernel's writeback
# included, with a sync after each write so that writeback left behind
# counts too)
# Run as root from the repository's root; the machine is noisy, so compare
# the two systems within one run.
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-3}
command -v fio >/dev/null || { echo "seqcpu: fio is not installed (apt-get install fio)" >&2; exit 1; }
D=$(mktemp -d /tmp/seqcpu.XXXXXX)
chmod 755 "$D"
MS=$D/ms MJ=$D/mj
cleanup() {
  for m in "$MS" "$MJ"; do umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || true; done
  rm -rf "$D"
}
trap cleanup EXIT
if [[ -z ${SLUICE:-} ]]; then SLUICE=$D/sluice; go build -o "$SLUICE" ./cmd/sluice; fi
JUICEFS=${JUICEFS:-$(scripts/build-juicefs.sh)}

case ${ENGINE:-sqlite} in
  sqlite) US="sqlite3://$D/s.db" UJ="sqlite3://$D/j.db" ;;
  redis)
    base=${REDIS_URL:-redis://127.0.0.1:6379}
    US=$base/13 UJ=$base/14
    hp=${base#redis://}
    for db in 13 14; do redis-cli -h "${hp%:*}" -p "${hp##*:}" -n $db flushdb >/dev/null; done ;;
  *) echo "seqcpu: ENGINE must be sqlite or redis" >&2; exit 2 ;;
esac
ST=${STORAGE:-file} SB=$D/sb/ JB=$D/jb/
case $ST in
  file) ;;
  mem) SB=svol JB=jvol ;;
  s3)
    tag=$(date +%s)-$$
    SB=${S3_ENDPOINT:?set S3_ENDPOINT}/seqcpu-s-$tag JB=$S3_ENDPOINT/seqcpu-j-$tag
    # JuiceFS does not create buckets on every S3 server: a throwaway Sluice format makes it.
    "$SLUICE" format "sqlite3://$D/mk.db" mkvol --storage s3 --bucket "$JB" >/dev/null 2>&1 || true ;;
  *) echo "seqcpu: STORAGE must be file, mem or s3" >&2; exit 2 ;;
esac
"$SLUICE" format "$US" svol --storage "$ST" --bucket "$SB" --trash-days 0 >"$D/sf.log" 2>&1 || { cat "$D/sf.log" >&2; exit 1; }
"$JUICEFS" format "$UJ" jvol --storage "$ST" --bucket "$JB" --trash-days 0 >"$D/jf.log" 2>&1 || { cat "$D/jf.log" >&2; exit 1; }
mkdir -p "$MS" "$MJ"
# shellcheck disable=SC2086
"$SLUICE" mount -d "$US" "$MS" --cache-dir "$D/sc" --log "$D/s.log" ${SLUICE_OPTS:-} >/dev/null
# shellcheck disable=SC2086
"$JUICEFS" mount -d "$UJ" "$MJ" --cache-dir "$D/jc" --log "$D/j.log" ${JUICEFS_OPTS:-} >/dev/null 2>&1

# mountpids MOUNT: the processes serving MOUNT (those holding a /dev/fuse
# descriptor whose command line names MOUNT): JuiceFS runs a supervisor and
# a worker, so their CPU is added up.
mountpids() {
  local p pids=()
  for p in /proc/[0-9]*; do
    [[ -r $p/cmdline ]] || continue
    if tr '\0' ' ' <"$p/cmdline" 2>/dev/null | grep -q -- " $1\( \|$\)" &&
      ls -l "$p/fd" 2>/dev/null | grep -q /dev/fuse; then
      pids+=("${p#/proc/}")
    fi
  done
  if ((${#pids[@]} == 0)); then
    echo "seqcpu: no process serves $1" >&2
    exit 1
  fi
  echo "${pids[*]}"
}
PS=$(mountpids "$MS") PJ=$(mountpids "$MJ")
ticks=$(getconf CLK_TCK)
cpu() { # cpu PID...: their user + system seconds
  local p sum=0
  for p in "$@"; do sum=$((sum + $(awk '{print $14 + $15}' "/proc/$p/stat"))); done
  python3 -c "print('%.3f' % ($sum / $ticks))"
}
# machine: busy seconds of all CPUs (user, nice, system, irq, softirq,
# steal), which also counts the kernel's writeback threads: a file system
# that leaves its writes to them shows less CPU of its own.
machine() { awk -v t="$ticks" '/^cpu /{printf "%.3f", ($2 + $3 + $4 + $7 + $8 + $9) / t}' /proc/stat; }
bytes() { numfmt --from=iec "${1^^}"; }

fio_bw() { # fio_bw MOUNT JOBS write|read: aggregate MiB/s
  local rw=$3 extra=()
  [[ $rw == write ]] && extra=(--end_fsync=1 --create_on_open=1)
  fio --name=seq --directory="$1/seqcpu" --numjobs="$2" --rw="$rw" --bs=1M --size="${SIZE:-1g}" \
    --ioengine=psync --direct=0 --fallocate=none --output-format=json "${extra[@]}" |
    python3 -c 'import json,sys; d=json.load(sys.stdin); k=sys.argv[1]; print("%.1f" % (sum(j[k]["bw_bytes"] for j in d["jobs"]) / 1048576))' "$rw"
}

one() { # one NAME MOUNT "PID..." JOBS: a write and a read round, RESULT lines
  local name=$1 mnt=$2 pids=$3 jobs=$4 gib c0 m0 bw
  gib=$(python3 -c "print($(bytes "${SIZE:-1g}") * $jobs / 2**30)")
  rm -rf "$mnt/seqcpu"
  mkdir -p "$mnt/seqcpu"
  sync
  echo 3 >/proc/sys/vm/drop_caches
  for rw in write read; do
    # shellcheck disable=SC2086
    c0=$(cpu $pids) m0=$(machine)
    bw=$(fio_bw "$mnt" "$jobs" $rw)
    if [[ $rw == write ]]; then sync; fi # the writeback a sync-less client leaves behind, counted too
    # shellcheck disable=SC2086
    echo "RESULT $name $rw jobs=$jobs mibps=$bw cpu_s_per_gib=$(python3 -c "print('%.3f' % (($(cpu $pids) - $c0) / $gib))") machine_s_per_gib=$(python3 -c "print('%.3f' % (($(machine) - $m0) / $gib))")"
    sync
    echo 3 >/proc/sys/vm/drop_caches
  done
  rm -rf "$mnt/seqcpu"
}

for r in $(seq 1 "$rounds"); do
  for jobs in ${JOBS:-1 4}; do
    one sluice "$MS" "$PS" "$jobs"
    one juicefs "$MJ" "$PJ" "$jobs"
  done
done | tee "$D/res"
python3 - "$D/res" <<'PY'
import re, statistics as st, sys
rows = {}
for line in open(sys.argv[1]):
    m = re.match(r"RESULT (\w+) (\w+) jobs=(\d+) mibps=([\d.]+) cpu_s_per_gib=([\d.-]+) machine_s_per_gib=([\d.-]+)", line)
    if m:
        rows.setdefault((m[2], int(m[3]), m[1]), []).append((float(m[4]), float(m[5]), float(m[6])))
print("%-10s %12s %9s %7s %14s %8s %16s %8s" % ("median", "sluice MiB/s", "juicefs", "ratio",
      "sluice CPU/GiB", "juicefs", "machine CPU/GiB", "juicefs"))
for rw in ("write", "read"):
    for jobs in sorted({k[1] for k in rows}):
        s, j = rows.get((rw, jobs, "sluice")), rows.get((rw, jobs, "juicefs"))
        if not s or not j:
            continue
        sb, jb = st.median(x[0] for x in s), st.median(x[0] for x in j)
        sc, jc = st.median(x[1] for x in s), st.median(x[1] for x in j)
        sm, jm = st.median(x[2] for x in s), st.median(x[2] for x in j)
        print("%-10s %12.1f %9.1f %6.2fx %13.2fs %7.2fs %15.2fs %7.2fs" % ("%s %d" % (rw, jobs), sb, jb, sb / jb, sc, jc, sm, jm))
PY
