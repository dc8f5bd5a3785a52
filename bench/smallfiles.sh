#!/usr/bin/env bash
# Small files: unpack, measure, copy and remove a source tree on Sluice and on JuiceFS 1.4.1 side by side in
# one run (same engine, local-directory buckets, --trash-days 0, default mount options), rounds interleaved,
# then per-call costs from a Python loop (bench/smallcalls.py) on each mount, each loop after the floor of
# the buckets' file system at that moment (bucket_create: a plain create + write + close, not a figure of
# either system).
#
#   bench/smallfiles.sh            (as root, from anywhere in the repository)
#
# Each round, on each system: `tar -xf` the archive into the mount, `du -s` the tree, `cp -a` it inside the
# mount, `rm -rf` both trees. Prints a RESULT line per step, system and round, the mount's peak resident
# memory (VmHWM) at the end, then medians and the ratio JuiceFS/Sluice (so above 1 means Sluice is faster).
#
# Environment:
#   SRC          a directory to archive (default: the Go toolchain's source tree, $(go env GOROOT)/src,
#                about 11,000 files and 160 MB); or ARCHIVE, a tar file to unpack as it is
#   ROUNDS       rounds (default 2)
#   CALLS        per-call loop iterations for smallcalls.py (default 2000; 0 skips it); the loops run
#                CALL_ROUNDS times per system (default 2), alternating, each once both mounts are idle
#   ENGINE       sqlite (default) or redis (REDIS_URL, default redis://127.0.0.1:6379; databases 11 and 12
#                are flushed and used)
#   SLUICE / JUICEFS             binaries (default: built from ./cmd/sluice / scripts/build-juicefs.sh)
#   SLUICE_OPTS / JUICEFS_OPTS   extra mount flags for each
#   SYSTEMS      which systems to run (default "sluice juicefs")
#   TMPDIR       where volumes, buckets and caches go (default /tmp; removed at the end)
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${ROUNDS:-2} CALLS=${CALLS:-2000} SYSTEMS=${SYSTEMS:-sluice juicefs}
[ "$(id -u)" = 0 ] || { echo "run as root (FUSE mounts)" >&2; exit 1; }
D=$(mktemp -d "${TMPDIR:-/tmp}/sluice-small.XXXXXX"); chmod 755 "$D"
cleanup() {
  for m in "$D"/*-mnt; do [ -d "$m" ] && { umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || true; }; done
  rm -rf "$D"
}
trap cleanup EXIT
say() { echo "smallfiles.sh: $*" >&2; }

if [ -z "${SLUICE:-}" ]; then SLUICE=$D/sluice; go build -o "$SLUICE" ./cmd/sluice; fi
case " $SYSTEMS " in *" juicefs "*) JUICEFS=${JUICEFS:-$(scripts/build-juicefs.sh)} ;; esac
if [ -z "${ARCHIVE:-}" ]; then
  SRC=${SRC:-$(go env GOROOT)/src}
  ARCHIVE=$D/tree.tar
  tar -C "$(dirname "$SRC")" -cf "$ARCHIVE" "$(basename "$SRC")"
fi
files=$(tar -tf "$ARCHIVE" | wc -l)
top=$(tar -tf "$ARCHIVE" | awk -F/ 'NR == 1 { print $1 }')
say "archive $ARCHIVE: $files entries, $(du -m "$ARCHIVE" | cut -f1) MiB"

case ${ENGINE:-sqlite} in
  sqlite) url() { echo "sqlite3://$D/$1.db"; } ;;
  redis)  base=${REDIS_URL:-redis://127.0.0.1:6379}; hp=${base#redis://}
          url() { if [ "$1" = sluice ]; then echo "$base/11"; else echo "$base/12"; fi; }
          for n in 11 12; do redis-cli -h "${hp%:*}" -p "${hp##*:}" -n $n flushdb >/dev/null; done ;;
  *) echo "ENGINE must be sqlite or redis" >&2; exit 2 ;;
esac
declare -A PID
for s in $SYSTEMS; do
  m=$D/$s-mnt; mkdir -p "$m"
  if [ "$s" = sluice ]; then
    "$SLUICE" format "$(url sluice)" svol --storage file --bucket "$D/sluice-bucket" --trash-days 0 >"$D/sf.log" 2>&1 ||
      { cat "$D/sf.log"; exit 1; }
    # shellcheck disable=SC2086
    "$SLUICE" mount -d "$(url sluice)" "$m" --cache-dir "$D/sluice-cache" --log "$D/sluice.log" ${SLUICE_OPTS:-} >/dev/null
  else
    "$JUICEFS" format "$(url juicefs)" jvol --storage file --bucket "$D/juicefs-bucket/" --trash-days 0 >"$D/jf.log" 2>&1 ||
      { cat "$D/jf.log"; exit 1; }
    # shellcheck disable=SC2086
    "$JUICEFS" mount -d "$(url juicefs)" "$m" --cache-dir "$D/juicefs-cache" --log "$D/juicefs.log" ${JUICEFS_OPTS:-} >/dev/null 2>&1
  fi
  for _ in $(seq 50); do mountpoint -q "$m" && break; sleep 0.1; done
  mountpoint -q "$m" || { echo "$s did not mount" >&2; exit 1; }
  PID[$s]=$(fuser -m "$m" 2>/dev/null | tr -s ' ' '\n' | grep -v '^$' | head -1 || true)
  [ -n "${PID[$s]}" ] || PID[$s]=$(pgrep -f -n "$(basename "$([ "$s" = sluice ] && echo "$SLUICE" || echo "$JUICEFS")") mount" || true)
done

step() { # step SYSTEM ROUND NAME CMD...: time CMD, print a RESULT line
  local s=$1 r=$2 n=$3; shift 3
  sync; echo 3 >/proc/sys/vm/drop_caches
  local t0 t1; t0=$(date +%s.%N); "$@"; t1=$(date +%s.%N)
  echo "RESULT $s round=$r $n s=$(echo "$t1 - $t0" | bc)" | tee -a "$D/res" >&2
}
for r in $(seq 1 "$ROUNDS"); do
  for s in $SYSTEMS; do
    m=$D/$s-mnt
    step "$s" "$r" tar tar -C "$m" -xf "$ARCHIVE"
    step "$s" "$r" du du -s "$m" >/dev/null
    step "$s" "$r" cp cp -a "$m/$top" "$m/$top.copy"
    step "$s" "$r" rm rm -rf "$m/$top" "$m/$top.copy"
  done
done
ticks() { # ticks PID...: CPU clock ticks the processes used so far
  local t=0 p
  for p in "$@"; do [ -n "$p" ] && t=$((t + $(awk '{ print $14 + $15 }' "/proc/$p/stat" 2>/dev/null || echo 0))); done
  echo "$t"
}
quiet() { # wait (up to 120 s) until the mounts are idle: the trees' deletions run in the background
  local i a b
  for i in $(seq 120); do
    a=$(ticks "${PID[@]}"); sleep 1; b=$(ticks "${PID[@]}")
    [ $((b - a)) -le 2 ] && return
  done
  echo "smallfiles.sh: the mounts were still busy after 120 s" >&2
}
bucket_create() { # bucket_create DIR: median µs of creating + writing 10,000 bytes + closing 500 files in DIR
  # The floor under a small file's store on the buckets' file system at this moment (bench/cwcfloor.py's
  # loop): ext4 without a journal (this machine kind) skips inodes freed in the last 60-300 s, so creates
  # slow down for minutes after mass deletions (docs/benchmarks.md). The files stay until the end, so that
  # measuring adds no deletions.
  mkdir -p "$1"
  python3 -c 'import sys; sys.path.insert(0, "bench"); import cwcfloor
print("RESULT bucket_create us=%.1f" % cwcfloor.loop(sys.argv[1], 500, keep=True))' "$1"
}
if [ "$CALLS" -gt 0 ]; then
  # The calls alternate between the systems, CALL_ROUNDS times, each on idle mounts.
  for r in $(seq 1 "${CALL_ROUNDS:-2}"); do
    for s in $SYSTEMS; do
      quiet
      bucket_create "$D/floor-$s-$r" | sed "s/^RESULT /RESULT $s round=$r /" | tee -a "$D/res"
      python3 bench/smallcalls.py "$D/$s-mnt" "$CALLS" | sed "s/^RESULT /RESULT $s round=$r /" | tee -a "$D/res"
    done
  done
fi
for s in $SYSTEMS; do
  p=${PID[$s]}
  [ -n "$p" ] && echo "RESULT $s round=1 peak_rss_mib=$(awk '/VmHWM/ { print int($2 / 1024) }' "/proc/$p/status")" | tee -a "$D/res"
done
python3 - "$D/res" <<'PY'
import re, statistics as st, sys
vals = {}
for line in open(sys.argv[1]):
    p = line.split()
    m = re.search(r"\b(s|us|peak_rss_mib)=([\d.]+)", line)
    if not m: continue
    name = p[3] if m.group(1) in ("s", "us") else "peak_rss_mib"
    vals.setdefault((p[1], name, m.group(1)), []).append(float(m.group(2)))
names = sorted({(n, u) for _, n, u in vals}, key=lambda x: x[0])
print("%-22s %12s %12s %8s" % ("figure (median)", "sluice", "juicefs", "jfs/sluice"))
for n, u in names:
    s = st.median(vals.get(("sluice", n, u), [0])); j = st.median(vals.get(("juicefs", n, u), [0]))
    print("%-22s %12.3f %12.3f %7.2fx" % (n + " (" + u + ")", s, j, j / s if s and j else float("nan")))
PY
