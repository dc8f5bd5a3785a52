#!/usr/bin/env bash
# bench/juicefs/vs.sh WORKLOAD [ROUNDS]: Sluice and the reference JuiceFS
# 1.4.1 side by side, on one machine, in one run.
#
# Formats a Sluice and a JuiceFS volume on the same engine with the same kind
# of bucket (--trash-days 0 on both), mounts both with default options, runs
# ROUNDS rounds (default 3) of the workload on each, alternating which system
# goes first, and prints a Markdown table of the medians: Sluice, JuiceFS and
# the ratio, Sluice/JuiceFS for rates and JuiceFS/Sluice for times, so that
# above 1 always means Sluice is better. The table's header names the build
# of each system, the date and the setup, ready to paste.
#
# WORKLOAD
#   meta  create, stat, readdir, delete of N empty files in DIRS directories,
#         the kernel's caches dropped before each phase (meta.py)
#   seq   1 MiB sequential writes (with a final fsync), then reads after the
#         page cache is dropped, per job count in JOBS (seq.sh)
#   rand  4 KiB random reads of a cached SIZE file, through the page cache and
#         with O_DIRECT (rand.sh)
#   git   cp -a of a C source tree with its .git, warm `git status`, make,
#         rm -rf (git.sh). SRC names the tree; without SRC one is assembled
#         once with bench/ctree.sh (Lua and zstd sources from crates.io,
#         through cargo) and kept in the cache directory below; without
#         cargo, SRC is required.
#   all   every table above, one after the other
#
# Environment (defaults in brackets)
#   ENGINE        sqlite or redis [sqlite]; redis uses databases 11 and 12 of
#                 REDIS_URL [redis://127.0.0.1:6379] and flushes them first
#   STORAGE       file (local directory), mem (blocks in the mount's memory:
#                 the client without the disk) or s3 (S3_ENDPOINT=http://HOST:PORT
#                 of a running server, ACCESS_KEY/SECRET_KEY; two new buckets) [file]
#   TMPDIR        where the volumes, buckets and caches go [/tmp]
#   SLUICE        a sluice binary [built from this checkout]
#   JUICEFS       a juicefs binary [bench/juicefs/build.sh: built once, cached]
#   SLUICE_OPTS, JUICEFS_OPTS   extra mount flags for each system
#   CEILING       also run each round on a ceiling, a third column of the
#                 table: local (a plain directory in TMPDIR, on the disk
#                 that holds the buckets) or nullfs (bench/nullfs, the FUSE
#                 transport alone; it has no fsync, and its writes slow
#                 down with the file's size: use it for meta, or rand with
#                 a small SIZE), or auto (nullfs for meta, local for the
#                 others) []
#   meta: N [10000] DIRS [100] THREADS [1]
#   seq:  SIZE per job [1g] JOBS [1 4]
#   rand: SIZE [1g] RUNTIME seconds per variant [10] VARIANTS [page_cache direct]
#   git:  SRC [assembled] STATUS_RUNS [5] MAKE_JOBS [2] MAKE_ARGS [] NO_MAKE=1
#
# Run as root (FUSE mounts, dropping the page cache) with Go, Python 3, fio
# and git. On a shared machine absolute figures move 30-50 % between runs:
# compare the ratios of one run.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
usage() { awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; }

workload=${1:-}
rounds=${2:-3}
case $workload in
  -h | --help) usage; exit 0 ;;
  meta | seq | rand | git | all) ;;
  *) usage >&2; exit 2 ;;
esac
[[ $rounds =~ ^[1-9][0-9]*$ ]] || { echo "vs.sh: ROUNDS must be a positive number, not $rounds" >&2; exit 2; }
[[ $(id -u) == 0 ]] || { echo "vs.sh: run as root (FUSE mounts, drop_caches)" >&2; exit 1; }
cache=${XDG_CACHE_HOME:-$HOME/.cache}/sluice-bench

# git_tree: print the C source tree for the git workload, assembling it once.
git_tree() {
  if [[ -n ${SRC:-} ]]; then echo "$SRC"; return; fi
  local tree=$cache/ctree
  if [[ ! -d $tree/.git ]]; then
    command -v cargo >/dev/null || { echo "vs.sh: git needs SRC=<C source tree with .git and a Makefile> (or cargo, to assemble one)" >&2; return 1; }
    mkdir -p "$cache"
    rm -rf "$tree.tmp"
    echo "vs.sh: assembling a C source tree in $tree (once)..." >&2
    "$root/bench/ctree.sh" "$tree.tmp" >/dev/null
    mv "$tree.tmp" "$tree"
  fi
  echo "$tree"
}

if [[ $workload == all ]]; then
  # One build of each system for every table.
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  if [[ -z ${SLUICE:-} ]]; then
    SLUICE_BUILD=$(git -C "$root" describe --always --dirty)
    (cd "$root" && go build -ldflags "-X github.com/sluicefs/sluice/internal/cli.Version=$SLUICE_BUILD" -o "$tmp/sluice" ./cmd/sluice)
    SLUICE=$tmp/sluice
  fi
  JUICEFS=$("$here/build.sh")
  export SLUICE JUICEFS SLUICE_BUILD
  status=0
  for w in meta seq rand git; do
    if [[ $w == git ]] && ! git_tree >/dev/null; then
      echo "vs.sh: git skipped" >&2
      continue
    fi
    "$0" "$w" "$rounds" || { status=1; echo "vs.sh: $w failed" >&2; }
    echo
  done
  exit $status
fi

case $workload in
  seq | rand) command -v fio >/dev/null || { echo "vs.sh: $workload needs fio (apt-get install fio)" >&2; exit 1; } ;;
  git)
    [[ -n ${SRC:-} ]] || SRC_DEFAULT=1
    SRC=$(git_tree) ;;
esac

D=$(mktemp -d "${TMPDIR:-/tmp}/sluice-vs.XXXXXX")
chmod 755 "$D"
mnt_s=$D/mnt-sluice mnt_j=$D/mnt-juicefs mnt_c=$D/ceiling
nullfs_pid=
cleanup() {
  for m in "$mnt_s" "$mnt_j" "$mnt_c"; do
    if mountpoint -q "$m"; then umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || true; fi
  done
  if [[ -n $nullfs_pid ]]; then kill "$nullfs_pid" 2>/dev/null || true; wait "$nullfs_pid" 2>/dev/null || true; fi
  rm -rf "$D"
}
trap cleanup EXIT

if [[ -z ${SLUICE:-} ]]; then
  SLUICE_BUILD=$(git -C "$root" describe --always --dirty)
  (cd "$root" && go build -ldflags "-X github.com/sluicefs/sluice/internal/cli.Version=$SLUICE_BUILD" -o "$D/sluice" ./cmd/sluice)
  SLUICE=$D/sluice
fi
sluice_build=${SLUICE_BUILD:-$("$SLUICE" version | awk '{ print $3 }')}
JUICEFS=$("$here/build.sh")
juicefs_build=$("$JUICEFS" version | awk '{ print $3 }')

engine=${ENGINE:-sqlite}
case $engine in
  sqlite) url_s=sqlite3://$D/sluice.db url_j=sqlite3://$D/juicefs.db ;;
  redis)
    base=${REDIS_URL:-redis://127.0.0.1:6379}
    base=${base%/}
    url_s=$base/11 url_j=$base/12
    hostport=${base#redis://}
    hostport=${hostport##*@}
    for db in 11 12; do
      redis-cli -h "${hostport%:*}" -p "${hostport##*:}" -n "$db" flushdb >/dev/null
    done ;;
  *) echo "vs.sh: ENGINE must be sqlite or redis" >&2; exit 2 ;;
esac
storage=${STORAGE:-file}
case $storage in
  file) bucket_s=$D/bucket-sluice/ bucket_j=$D/bucket-juicefs/ ;;
  mem) bucket_s=svol bucket_j=jvol ;;
  s3)
    tag=$(date +%s)-$$
    bucket_s=${S3_ENDPOINT:?vs.sh: STORAGE=s3 needs S3_ENDPOINT}/vs-sluice-$tag
    bucket_j=$S3_ENDPOINT/vs-juicefs-$tag
    # JuiceFS does not create its bucket on every S3 server; a throwaway
    # Sluice volume does.
    "$SLUICE" format "sqlite3://$D/mkbucket.db" mkbucket --storage s3 --bucket "$bucket_j" >/dev/null 2>&1 || true ;;
  *) echo "vs.sh: STORAGE must be file, mem or s3" >&2; exit 2 ;;
esac

"$SLUICE" format "$url_s" svol --storage "$storage" --bucket "$bucket_s" --trash-days 0 >"$D/format-sluice.log" 2>&1 ||
  { cat "$D/format-sluice.log" >&2; exit 1; }
"$JUICEFS" format "$url_j" jvol --storage "$storage" --bucket "$bucket_j" --trash-days 0 >"$D/format-juicefs.log" 2>&1 ||
  { cat "$D/format-juicefs.log" >&2; exit 1; }
mkdir -p "$mnt_s" "$mnt_j"
# shellcheck disable=SC2086 # the extra options are lists of words
"$SLUICE" mount -d "$url_s" "$mnt_s" --cache-dir "$D/cache-sluice" --log "$D/sluice.log" ${SLUICE_OPTS:-} >/dev/null
# shellcheck disable=SC2086
"$JUICEFS" mount -d "$url_j" "$mnt_j" --cache-dir "$D/cache-juicefs" --log "$D/juicefs.log" ${JUICEFS_OPTS:-} >/dev/null 2>&1
systems=(sluice juicefs)
mounts=("$mnt_s" "$mnt_j")
if [[ ${CEILING:-} == auto ]]; then
  CEILING=local
  [[ $workload == meta ]] && CEILING=nullfs
fi
case ${CEILING:-} in
  "") ;;
  local) mkdir -p "$mnt_c" ;;
  nullfs)
    (cd "$root" && go build -o "$D/nullfs" ./bench/nullfs)
    mkdir -p "$mnt_c"
    "$D/nullfs" "$mnt_c" >"$D/nullfs.log" 2>&1 &
    nullfs_pid=$!
    mounts+=("$mnt_c") ;;
  *) echo "vs.sh: CEILING must be local or nullfs" >&2; exit 2 ;;
esac
for m in "${mounts[@]}"; do
  for _ in $(seq 100); do mountpoint -q "$m" && break; sleep 0.1; done
  mountpoint -q "$m" || { echo "vs.sh: $m did not mount" >&2; exit 1; }
done
[[ -n ${CEILING:-} ]] && systems+=("$CEILING")

# one SYSTEM MOUNT: one round of the workload; its FIGURE lines on stdout.
one() {
  case $workload in
    meta) python3 "$here/meta.py" "$2" --files "${N:-10000}" --dirs "${DIRS:-100}" --threads "${THREADS:-1}" ;;
    seq) "$here/seq.sh" "$2" ;;
    rand) "$here/rand.sh" "$2" ;;
    git) "$here/git.sh" "$2" "$SRC" ;;
  esac
}

case $workload in
  meta) knobs="N=${N:-10000} DIRS=${DIRS:-100} THREADS=${THREADS:-1}" ;;
  seq) knobs="SIZE=${SIZE:-1g} JOBS=\"${JOBS:-1 4}\"" ;;
  rand) knobs="SIZE=${SIZE:-1g} RUNTIME=${RUNTIME:-10} VARIANTS=\"${VARIANTS:-page_cache direct}\"" ;;
  git) knobs="SRC=$SRC ($(git -C "$SRC" ls-files | wc -l) files) STATUS_RUNS=${STATUS_RUNS:-5} MAKE_JOBS=${MAKE_JOBS:-2}" ;;
esac

: >"$D/figures"
for r in $(seq "$rounds"); do
  # Odd rounds run the systems in order, even rounds the other way round.
  order=()
  for ((i = 0; i < ${#systems[@]}; i++)); do
    if ((r % 2)); then order+=("${systems[i]}"); else order=("${systems[i]}" "${order[@]}"); fi
  done
  for sys in "${order[@]}"; do
    case $sys in
      sluice) m=$mnt_s ;;
      juicefs) m=$mnt_j ;;
      *) m=$mnt_c ;;
    esac
    if ! one "$sys" "$m" >"$D/round.out" 2>"$D/round.err"; then
      cat "$D/round.err" >&2
      echo "vs.sh: round $r of $workload failed on $sys" >&2
      exit 1
    fi
    echo "round $r/$rounds $sys: $(grep '^FIGURE' "$D/round.out" | awk '{ printf "%s %s %s  ", $2, $3, $4 }')" >&2
    grep '^FIGURE' "$D/round.out" | sed "s/^FIGURE/$sys/" >>"$D/figures"
  done
done

# The command that reproduces the table: the knobs set, then the script.
command=
for v in ENGINE STORAGE CEILING N DIRS THREADS SIZE JOBS RUNTIME VARIANTS SRC STATUS_RUNS MAKE_JOBS MAKE_ARGS NO_MAKE SLUICE_OPTS JUICEFS_OPTS; do
  [[ -n ${!v:-} && ! ($v == SRC && -n ${SRC_DEFAULT:-}) ]] || continue
  val=${!v}
  [[ $val =~ [[:space:]] ]] && val=\"$val\"
  command+="$v=$val "
done
command+="bench/juicefs/vs.sh $workload $rounds"

extra=
[[ -n ${SLUICE_OPTS:-} ]] && extra+=", Sluice mounted with $SLUICE_OPTS"
[[ -n ${JUICEFS_OPTS:-} ]] && extra+=", JuiceFS mounted with $JUICEFS_OPTS"
cat <<HEAD
### $workload: Sluice and JuiceFS side by side

- build: Sluice $sluice_build, JuiceFS $juicefs_build
- date: $(date -u '+%Y-%m-%d %H:%M UTC')
- machine: $(nproc) CPUs, $(awk '/MemTotal/ { printf "%.0f GiB", $2 / 1048576 }' /proc/meminfo), Linux $(uname -r)
- setup: engine $engine, storage $storage, $knobs$extra; medians of $rounds interleaved rounds
- command: $command

HEAD
python3 - "$D/figures" "$workload" "${CEILING:-}" <<'PY'
import statistics
import sys

order, values, units, better = [], {}, {}, {}
for line in open(sys.argv[1]):
    system, name, value, unit, how = line.split()
    if name not in units:
        order.append(name)
    units[name], better[name] = unit, how
    values.setdefault((system, name), []).append(float(value))


def show(v):
    if v >= 1000:
        return "{:,.0f}".format(v)
    if v >= 100:
        return "%.0f" % v
    if v >= 10:
        return "%.1f" % v
    return "%.3g" % v


ceiling = sys.argv[3]
title = {"local": "local disk", "nullfs": "nullfs"}.get(ceiling)
print("| %s | Sluice | JuiceFS | ratio |%s" % (sys.argv[2], " %s |" % title if title else ""))
print("| --- | ---: | ---: | ---: |%s" % (" ---: |" if title else ""))
for name in order:
    s = statistics.median(values.get(("sluice", name), [0]))
    j = statistics.median(values.get(("juicefs", name), [0]))
    ratio = "n/a"
    if s > 0 and j > 0:
        ratio = "%.2fx" % (s / j if better[name] == "higher" else j / s)
    row = "| %s (%s) | %s | %s | %s |" % (name.replace("_", " "), units[name], show(s), show(j), ratio)
    if title:
        row += " %s |" % show(statistics.median(values.get((ceiling, name), [0])))
    print(row)
print()
print("Ratio: Sluice/JuiceFS for rates, JuiceFS/Sluice for times; above 1, Sluice is better.")
if title:
    print("The %s column: the same workload in the same rounds, a ceiling." % title)
PY
