#!/usr/bin/env bash
# Times dump and load of a synthetic volume of N small files (directories
# of 1,000 entries, some hard links) and reports each one's wall time and
# peak RSS (from /usr/bin/time -v). META_URL names an empty namespace of
# the engine to measure (default: SQLite in a temp dir); it is loaded
# once from the generated dump, dumped (consistent, then --fast), and the
# dump loaded again into META_URL2 (default: a second SQLite file). With
# JUICEFS naming a JuiceFS binary (bench/juicefs/build.sh builds
# one), the same loads and dumps run with it too, into META_URL3 and
# META_URL4 (default: SQLite files), for a side-by-side figure.
#
#   bench/dumpload.sh [N]
#   META_URL=redis://127.0.0.1:6379/3 META_URL2=redis://127.0.0.1:6379/4 bench/dumpload.sh 1100000
set -euo pipefail
cd "$(dirname "$0")/.."
n=${1:-100000}
work=$(mktemp -d /tmp/sluice-dumpload.XXXXXX)
trap 'rm -rf "$work"' EXIT
meta=${META_URL:-sqlite3://$work/a.db}
meta2=${META_URL2:-sqlite3://$work/b.db}
meta3=${META_URL3:-sqlite3://$work/c.db}
meta4=${META_URL4:-sqlite3://$work/d.db}
bin=$work/sluice
go build -o "$bin" ./cmd/sluice
go run ./bench/dumpgen -files "$n" >"$work/gen.json"
echo "synthetic dump: $n files, $(du -h "$work/gen.json" | cut -f1)"
measure() { # label, command...
  local label=$1; shift
  /usr/bin/time -v "$@" 2>"$work/time" >/dev/null || { cat "$work/time"; exit 1; }
  local wall rss
  wall=$(awk -F': ' '/Elapsed \(wall clock\)/ {print $2}' "$work/time")
  rss=$(awk -F': ' '/Maximum resident set size/ {printf "%.0f", $2/1024}' "$work/time")
  printf '%-28s wall %8s   peak RSS %5s MiB\n' "$label" "$wall" "$rss"
}
measure "load (generated)" "$bin" load "$meta" "$work/gen.json"
measure "dump" "$bin" dump "$meta" "$work/dump.json"
measure "dump --fast" "$bin" dump --fast "$meta" "$work/fast.json"
measure "dump to .gz" "$bin" dump "$meta" "$work/dump.json.gz"
measure "load (its dump)" "$bin" load "$meta2" "$work/dump.json"
echo "dump size: $(du -h "$work/dump.json" | cut -f1) ($(du -h "$work/dump.json.gz" | cut -f1) gzipped)"
if [[ -n ${JUICEFS:-} ]]; then
  measure "juicefs load (generated)" "$JUICEFS" load "$meta3" "$work/gen.json"
  measure "juicefs dump" "$JUICEFS" dump "$meta3" "$work/jdump.json"
  measure "juicefs dump --fast" "$JUICEFS" dump --fast "$meta3" "$work/jfast.json"
  measure "juicefs load (its dump)" "$JUICEFS" load "$meta4" "$work/jdump.json"
fi
