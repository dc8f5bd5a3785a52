#!/usr/bin/env bash
# Space under overwrite: a file rewritten in place must not cost many times its size in the bucket.
# Sluice and JuiceFS 1.4.1 side by side in one run, same engine, local-directory buckets, --trash-days 0,
# default mount options; a fresh pair of volumes per round, Sluice first in each round.
#
#   bench/overwrite.sh            (as root, from anywhere in the repository)
#
# Each round, on each system: prefill a FILE_MIB file sequentially with fio (1 MiB writes, final fsync),
# then fio random overwrites of it for RUNTIME s (psync, one job, BSSPLIT sizes, an fsync every 16 writes,
# --norandommap), while `du -sb` of the whole bucket directory is sampled every INTERVAL s, during the writes
# and for SETTLE s after they stop; the last sample is taken SETTLE s after the writes stopped. Then the file
# is checked three ways: read through the mount, read through a fresh mount with an empty cache directory,
# and against the truth, the same two fio jobs replayed on a local file (the fio jobs are deterministic: the
# same seeds, fresh buffer contents per write, the replay stops after the same number of bytes).
#
# Prints a RESULT line per system and round (peak and settled bucket size in MiB and as a multiple of the
# file, fio's write throughput, the check), then medians and ratios JuiceFS/Sluice for sizes and
# Sluice/JuiceFS for throughput, so above 1 always means Sluice is better. Sizes are what count: throughput
# moves 30-50 % between runs on a shared machine.
#
# Environment:
#   RUNTIME      seconds of random overwrites (default 90)
#   SETTLE       seconds of sampling after the writes stop; the "settled" size is taken then (default 60)
#   INTERVAL     seconds between samples (default 5)
#   ROUNDS       rounds, each on fresh volumes; medians over rounds (default 1)
#   FILE_MIB     size of the file (default 96)
#   BSSPLIT      fio --bssplit of the overwrites (default 64 KiB to 8 MiB, about 1 MiB on average)
#   ENGINE       sqlite (default) or redis (REDIS_URL, default redis://127.0.0.1:6379; databases 11 and 12
#                are flushed and used)
#   SLUICE       a sluice binary (default: built from ./cmd/sluice)
#   JUICEFS      a juicefs binary (default: what scripts/build-juicefs.sh prints, or PEER_BUILD)
#   SLUICE_OPTS / JUICEFS_OPTS   extra mount flags for each
#   TMPDIR       where the volumes, buckets and caches go (default /tmp; removed at the end)
#   SYSTEMS      which systems to run (default "sluice juicefs"; "sluice" alone needs no JuiceFS)
#   OUT          directory for samples.csv (system,round,t_s,phase,t_after_write_s,bytes,mib,x_file,objects),
#                results.txt, the fio reports and the mount logs (default /tmp/sluice-overwrite-DATE; kept)
set -euo pipefail
cd "$(dirname "$0")/.."
RUNTIME=${RUNTIME:-90} SETTLE=${SETTLE:-60} INTERVAL=${INTERVAL:-5} ROUNDS=${ROUNDS:-1} FILE_MIB=${FILE_MIB:-96}
BSSPLIT=${BSSPLIT:-64k/30:128k/15:256k/15:512k/10:1m/10:2m/8:4m/7:8m/5}
SYSTEMS=${SYSTEMS:-sluice juicefs}
for c in fio python3 sha256sum du; do
  command -v "$c" >/dev/null || { echo "$c is not installed; for fio: apt-get install fio" >&2; exit 1; }
done
[ "$(id -u)" = 0 ] || { echo "run as root (FUSE mounts)" >&2; exit 1; }

D=$(mktemp -d "${TMPDIR:-/tmp}/sluice-overwrite.XXXXXX"); chmod 755 "$D"
# A bucket that keeps every overwritten byte grows at the write rate (a few hundred MiB/s here).
avail=$(df -Pk "$D" | awk 'NR == 2 { print int($4 / 1024) }')
[ "$avail" -ge $((RUNTIME * 256)) ] ||
  echo "overwrite.sh: warning: $avail MiB free under $D; a bucket may need up to $((RUNTIME * 256)) MiB" >&2
OUT=${OUT:-/tmp/sluice-overwrite-$(date +%Y%m%d-%H%M%S)}
mkdir -p "$OUT"
SPID=
cleanup() {
  if [ -n "$SPID" ]; then kill "$SPID" 2>/dev/null || true; fi
  for m in "$D"/*-mnt; do
    [ -d "$m" ] || continue
    umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || true
  done
  rm -rf "$D"
}
trap cleanup EXIT
say() { echo "overwrite.sh: $*" >&2; }

if [ -z "${SLUICE:-}" ]; then SLUICE=$D/sluice; go build -o "$SLUICE" ./cmd/sluice; fi
case " $SYSTEMS " in
  *" juicefs "*) JUICEFS=${JUICEFS:-$("${PEER_BUILD:-scripts/build-juicefs.sh}")} ;;
esac
case ${ENGINE:-sqlite} in
  sqlite) ;;
  redis)  REDIS=${REDIS_URL:-redis://127.0.0.1:6379}; hp=${REDIS#redis://}
          command -v redis-cli >/dev/null || { echo "redis-cli is not installed (apt-get install redis-tools)" >&2; exit 1; } ;;
  *) echo "ENGINE must be sqlite or redis" >&2; exit 2 ;;
esac

CSV=$OUT/samples.csv RUNS=$D/runs
echo "system,round,t_s,phase,t_after_write_s,bytes,mib,x_file,objects" >"$CSV"
: >"$RUNS"

# The fio jobs. Fresh random buffer contents per write and fixed seeds make them deterministic, so that a
# replay on a local file (io_size = the bytes the timed run wrote) gives the file's right contents.
FIO_COMMON=(--ioengine=psync --numjobs=1 --size="${FILE_MIB}m" --refill_buffers --randrepeat=1 --output-format=json)
prefill() { # prefill FILE REPORT
  fio --name=prefill --filename="$1" --rw=write --bs=1m --end_fsync=1 "${FIO_COMMON[@]}" --output="$2" >/dev/null
}
overwrite() { # overwrite FILE REPORT FIO-FLAGS...
  local f=$1 rep=$2; shift 2
  fio --name=overwrite --filename="$f" --rw=randwrite --bssplit="$BSSPLIT" --norandommap --overwrite=1 \
    "${FIO_COMMON[@]}" "$@" --output="$rep" >/dev/null
}
fio_write() { # fio_write REPORT: "MiB/s bytes" of the write direction, "nan 0" if no report
  python3 - "$1" <<'PY'
import json, sys
try:
    t = open(sys.argv[1]).read(); w = json.loads(t[t.index("{"):])["jobs"][0]["write"]
    print("%.1f %d" % (w["bw_bytes"] / 2**20, w["io_bytes"]))
except Exception:
    print("nan 0")
PY
}

now_us() { local t=$EPOCHREALTIME; echo "${t//[.,]/}"; }
fmt_s() { awk -v u="$1" 'BEGIN { printf "%.1f", u / 1e6 }'; }
bucket_size() { # bucket_size DIR: "bytes objects"
  local b o
  b=$(du -sb "$1" 2>/dev/null | cut -f1) || true
  o=$(find "$1" -type f 2>/dev/null | wc -l) || true
  echo "${b:-0} ${o:-0}"
}
# sampler SYSTEM ROUND BUCKET T0 ENDFILE: a sample every INTERVAL s from T0 (µs) on; once ENDFILE holds the
# time the writes stopped, a last one SETTLE s after it, then it returns.
sampler() {
  local sys=$1 r=$2 bucket=$3 t0=$4 endf=$5 k=0 target end now d phase after bytes objs
  while :; do
    target=$((t0 + k * INTERVAL * 1000000)) phase=
    while :; do
      if [ -s "$endf" ]; then
        end=$(($(<"$endf") + SETTLE * 1000000))
        if [ "$end" -le "$target" ]; then target=$end phase=final; fi
      fi
      now=$(now_us)
      [ "$now" -ge "$target" ] && break
      d=$((target - now)); [ "$d" -gt 1000000 ] && d=1000000
      sleep "$(printf '%d.%06d' $((d / 1000000)) $((d % 1000000)))"
    done
    read -r bytes objs < <(bucket_size "$bucket")
    after=
    if [ -s "$endf" ]; then after=$(fmt_s $((now - $(<"$endf")))); [ -n "$phase" ] || phase=settle; fi
    [ -n "$phase" ] || phase="write"
    awk -v s="$sys" -v r="$r" -v t="$(fmt_s $((now - t0)))" -v p="$phase" -v a="$after" -v b="$bytes" \
      -v o="$objs" -v f="$FILE_MIB" 'BEGIN { printf "%s,%s,%s,%s,%s,%.0f,%.1f,%.2f,%d\n", s, r, t, p, a, b, b / 1048576, b / 1048576 / f, o }' >>"$CSV"
    [ "$phase" = final ] && return
    k=$((k + 1))
  done
}

bin_of() { if [ "$1" = sluice ]; then echo "$SLUICE"; else echo "$JUICEFS"; fi; }
mount_fs() { # mount_fs SYSTEM META MOUNTPOINT CACHE-DIR LOG
  local bin; bin=$(bin_of "$1")
  mkdir -p "$3"
  if [ "$1" = sluice ]; then
    # shellcheck disable=SC2086
    "$bin" mount -d "$2" "$3" --cache-dir "$4" --log "$5" ${SLUICE_OPTS:-} >/dev/null || true
  else
    # shellcheck disable=SC2086
    "$bin" mount -d "$2" "$3" --cache-dir "$4" --log "$5" ${JUICEFS_OPTS:-} >/dev/null 2>&1 || true
  fi
  mountpoint -q "$3" || { say "$1 did not mount at $3; end of $5:"; tail -20 "$5" >&2; exit 1; }
}
umount_fs() { # umount_fs SYSTEM MOUNTPOINT: unmount and wait until the serving process is gone
  local bin; bin=$(bin_of "$1")
  "$bin" umount "$2" >/dev/null 2>&1 || umount "$2" 2>/dev/null || umount -l "$2"
  for _ in $(seq 1 300); do
    pgrep -f -- " $2( |\$)" >/dev/null || return 0
    sleep 0.1
  done
  say "the $1 process serving $2 is still running 30 s after unmount"
}

run_one() { # run_one SYSTEM ROUND: one round on one system, a line in RUNS
  local sys=$1 r=$2 tag=$1-r$2 pbytes bin meta name vol bucket mnt log endf t0 fio_ok=1 mibps bytes s_live s_fresh s_true check
  bin=$(bin_of "$sys")
  bucket=$D/$tag-bucket mnt=$D/$tag-mnt log=$OUT/$tag-mount.log endf=$D/$tag-end name=${sys:0:1}vol
  case ${ENGINE:-sqlite} in
    sqlite) meta=sqlite3://$D/$tag.db ;;
    redis)  vol=11; [ "$sys" = juicefs ] && vol=12
            meta=$REDIS/$vol; redis-cli -h "${hp%:*}" -p "${hp##*:}" -n "$vol" flushdb >/dev/null ;;
  esac
  "$bin" format "$meta" "$name" --storage file --bucket "$bucket/" --trash-days 0 >"$D/$tag-format.log" 2>&1 ||
    { cat "$D/$tag-format.log" >&2; exit 1; }
  mount_fs "$sys" "$meta" "$mnt" "$D/$tag-cache" "$log"
  say "$sys round $r: prefill ${FILE_MIB} MiB"
  prefill "$mnt/f" "$OUT/$tag-prefill.json"
  read -r pbytes _ < <(bucket_size "$bucket")
  say "$sys round $r: random overwrites for ${RUNTIME} s, then ${SETTLE} s of settling"
  t0=$(now_us)
  sampler "$sys" "$r" "$bucket" "$t0" "$endf" & SPID=$!
  overwrite "$mnt/f" "$OUT/$tag-overwrite.json" --fsync=16 --time_based --runtime="$RUNTIME" ||
    { fio_ok=0; say "$sys round $r: fio failed (see $OUT/$tag-overwrite.json and $log)"; }
  now_us >"$endf"
  wait "$SPID"; SPID=
  read -r mibps bytes < <(fio_write "$OUT/$tag-overwrite.json")

  say "$sys round $r: checking the file"
  s_live=$(sha256sum <"$mnt/f" | cut -d' ' -f1) || s_live=unreadable
  umount_fs "$sys" "$mnt"
  mount_fs "$sys" "$meta" "$mnt" "$D/$tag-cache2" "$log"
  s_fresh=$(sha256sum <"$mnt/f" | cut -d' ' -f1) || s_fresh=unreadable
  umount_fs "$sys" "$mnt"
  s_true=none
  if [ "$fio_ok" = 1 ] && [ "$bytes" -gt 0 ]; then
    prefill "$D/replay" /dev/null && overwrite "$D/replay" /dev/null --io_size="$bytes" &&
      s_true=$(sha256sum <"$D/replay" | cut -d' ' -f1)
    rm -f "$D/replay"
  fi
  if [ "$s_live" = "$s_true" ] && [ "$s_fresh" = "$s_true" ]; then check=ok
  elif [ "$s_true" = none ]; then check=no-truth
  else check=BAD; say "$sys round $r: WRONG CONTENTS: mount $s_live, fresh mount $s_fresh, truth $s_true"
  fi
  # errors and warnings of either log format, less JuiceFS's two at every start as root on a local bucket
  local errs; errs=$(grep -E 'level=(WARN|ERROR)|<(WARNING|ERROR|FATAL)>|panic' "$log" |
    grep -cvE 'CAP_SYS_RESOURCE is needed|Set storage tier: not supported' || true)
  [ "$errs" = 0 ] || say "$sys round $r: $errs error/warning lines in $log"
  echo "$sys $r $pbytes $mibps $bytes $check $errs" >>"$RUNS"
  rm -rf "$bucket" "$D/$tag-cache" "$D/$tag-cache2" "$D/$tag.db"* # room for the next system's bucket
}

say "output in $OUT (RUNTIME=$RUNTIME SETTLE=$SETTLE ROUNDS=$ROUNDS ENGINE=${ENGINE:-sqlite} FILE_MIB=$FILE_MIB)"
for r in $(seq 1 "$ROUNDS"); do
  for sys in $SYSTEMS; do run_one "$sys" "$r"; done
done

python3 - "$CSV" "$RUNS" "$FILE_MIB" "$SETTLE" <<'PY' | tee "$OUT/results.txt"
import csv, sys, statistics as st
samples, runs, mib = {}, [], float(sys.argv[3])
for row in csv.DictReader(open(sys.argv[1])):
    samples.setdefault((row["system"], row["round"]), []).append(row)
for line in open(sys.argv[2]):
    runs.append(line.split())
fig = {}
for s, r, pre, mibps, written, check, errs in runs:
    rows = samples.get((s, r), [])
    peak = max((int(x["bytes"]) for x in rows), default=0) / 2**20
    final = [int(x["bytes"]) for x in rows if x["phase"] == "final"]
    settled = final[-1] / 2**20 if final else float("nan")
    print("RESULT %s round=%s file_mib=%g prefill_mib=%.1f peak_mib=%.1f peak_x=%.2f settled_mib=%.1f settled_x=%.2f"
          " settle_s=%s write_mibps=%s written_mib=%.0f check=%s log_errors=%s"
          % (s, r, mib, int(pre) / 2**20, peak, peak / mib, settled, settled / mib, sys.argv[4], mibps,
             int(written) / 2**20, check, errs))
    for k, v in (("peak", peak), ("settled", settled), ("write", float(mibps))):
        fig.setdefault((s, k), []).append(v)
systems = []
for s, *_ in runs:
    if s not in systems: systems.append(s)
med = {k: st.median(v) for k, v in fig.items()}
print("\n%-22s" % "median of %d round(s)" % len(runs[::len(systems)]) + "".join("%18s" % s for s in systems)
      + ("%10s" % "ratio" if systems == ["sluice", "juicefs"] else ""))
for k, label in (("peak", "peak MiB"), ("settled", "settled MiB"), ("write", "write MiB/s")):
    cells = "".join(("%11.1f %5.2fx" % (med[(s, k)], med[(s, k)] / mib)) if k != "write" else "%18.1f" % med[(s, k)]
                    for s in systems)
    print("%-22s%s" % (label, cells), end="")
    if systems == ["sluice", "juicefs"]:
        sl, jf = med[("sluice", k)], med[("juicefs", k)]
        ratio = ((sl / jf) if k == "write" else (jf / sl)) if sl and jf else float("nan")
        med[("ratio", k)] = ratio
        print("%9.2fx" % ratio, end="")
    print()
if systems == ["sluice", "juicefs"]:
    print("RESULT ratio peak_juicefs/sluice=%.2f settled_juicefs/sluice=%.2f write_sluice/juicefs=%.2f"
          % (med[("ratio", "peak")], med[("ratio", "settled")], med[("ratio", "write")]))
PY
echo "samples: $CSV" >&2
