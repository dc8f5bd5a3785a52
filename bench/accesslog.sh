#!/usr/bin/env bash
# Access log overhead: what .accesslog costs a mount's metadata calls when nobody reads it, and
# while a reader (`cat .accesslog > /dev/null`) is attached.
#
#   bench/accesslog.sh [N]        (as root, from anywhere in the repository)
#
# Formats a SQLite volume on a local-directory bucket and mounts it with the kernel's attribute and
# entry caches off (--attr-cache 0 --entry-cache 0 --dir-entry-cache 0), so that every call reaches
# the mount. Each round runs, once without a reader and once with one (in alternating order), N
# stat(2) calls of MNT/files/sI cycling over 1,000 files (5 requests each: GETATTR of the root,
# LOOKUP and GETATTR of files and of sI) and N creates (open O_CREAT|O_EXCL plus close of a new
# empty file: 8 requests, CREATE, FLUSH and RELEASE among them), timed by a Python loop like
# bench/smallcalls.py; the files created are removed untimed. With a reader, the lines it got are
# counted, to show that the log was written.
#
# Prints a RESULT line per round and mode (µs per call), then the median over rounds per mode and
# the ratio reader/none.
#
# Environment:
#   ROUNDS       rounds (default 3)
#   SLUICE       a sluice binary (default: built from ./cmd/sluice)
#   TMPDIR       where the volume goes (default /tmp; removed at the end)
set -euo pipefail
cd "$(dirname "$0")/.."
N=${1:-20000}
ROUNDS=${ROUNDS:-3}
[ "$(id -u)" = 0 ] || { echo "run as root (FUSE mounts)" >&2; exit 1; }
command -v python3 >/dev/null || { echo "python3 is not installed" >&2; exit 1; }
work=$(mktemp -d "${TMPDIR:-/tmp}/sluice-accesslog.XXXXXX")
chmod 755 "$work"
mnt=$work/mnt
mkdir -p "$mnt"
bin=${SLUICE:-}
if [ -z "$bin" ]; then
  go build -o bin/sluice ./cmd/sluice
  bin=bin/sluice
fi
trap 'touch "$work/stop"; wait; grep -qs " $mnt " /proc/mounts && "$bin" umount --force "$mnt"; rm -rf "$work"' EXIT
url="sqlite3://$work/meta.db"
"$bin" format "$url" accesslog --bucket "$work/bucket" --trash-days 0 >/dev/null
"$bin" mount -d "$url" "$mnt" --log "$work/mount.log" --cache-dir "$work/cache" \
  --attr-cache 0 --entry-cache 0 --dir-entry-cache 0 >/dev/null

# calls.py DIR N ROUND: µs per stat and per create, one RESULT line each.
cat > "$work/calls.py" <<'EOF'
import os, sys, time

d, n, r = sys.argv[1], int(sys.argv[2]), sys.argv[3]
files = os.path.join(d, "files")
os.makedirs(files, exist_ok=True)
names = [os.path.join(files, "s%d" % i) for i in range(1000)]
for p in names:
    if not os.path.exists(p):
        os.close(os.open(p, os.O_CREAT | os.O_WRONLY, 0o644))
t = time.perf_counter_ns()
for i in range(n):
    os.stat(names[i % len(names)])
stat = (time.perf_counter_ns() - t) / n / 1000
new = os.path.join(d, "new.%s" % r)
os.mkdir(new)
t = time.perf_counter_ns()
for i in range(n):
    os.close(os.open(os.path.join(new, "f%d" % i), os.O_CREAT | os.O_WRONLY | os.O_EXCL, 0o644))
create = (time.perf_counter_ns() - t) / n / 1000
for i in range(n):
    os.unlink(os.path.join(new, "f%d" % i))
os.rmdir(new)
print("stat %.2f" % stat)
print("create %.2f" % create)
EOF

# run ROUND MODE: one measurement, MODE "none" or "reader".
run() {
  local round=$1 mode=$2 pid="" lines=-
  rm -f "$work/stop"
  if [ "$mode" = reader ]; then
    # cat ends after a quiet second; open the log again until told to stop.
    (while [ ! -e "$work/stop" ]; do cat "$mnt/.accesslog"; done) > "$work/log" &
    pid=$!
    # The reader is attached once the log is active: its own open shows as nothing, so wait for a
    # line of a probe.
    until stat "$mnt/probe-$round" >/dev/null 2>&1 || grep -qs "probe-$round" "$work/log"; do :; done
  fi
  out=$(python3 "$work/calls.py" "$mnt" "$N" "$round-$mode")
  if [ -n "$pid" ]; then
    touch "$work/stop"
    wait "$pid"
    lines=$(wc -l < "$work/log")
  fi
  echo "$out" | while read -r what us; do
    echo "RESULT round=$round mode=$mode call=$what us=$us log_lines=$lines"
  done
}

for round in $(seq "$ROUNDS"); do
  if [ $((round % 2)) = 1 ]; then modes="none reader"; else modes="reader none"; fi
  for mode in $modes; do run "$round" "$mode"; done
done | tee "$work/results"

python3 - "$work/results" <<'EOF'
import statistics, sys
res = {}
for line in open(sys.argv[1]):
    f = dict(kv.split("=") for kv in line.split()[1:])
    res.setdefault((f["call"], f["mode"]), []).append(float(f["us"]))
for call in ("stat", "create"):
    none, reader = statistics.median(res[(call, "none")]), statistics.median(res[(call, "reader")])
    print("MEDIAN call=%s none_us=%.2f reader_us=%.2f reader/none=%.3f" % (call, none, reader, reader / none))
EOF
