#!/usr/bin/env bash
# Memory and start-up of the in-memory metadata server holding N small
# files (directories of 1,000 files of one slice each, as issue 13 asks):
# loads a generated dump into a fresh `sluice meta-server`, stops it
# (SIGTERM: final checkpoint), starts it again and reports the time to
# load the checkpoint, the process's resident memory and Go heap once
# loaded, and both per file; then waits for the server to compress the
# pages nobody uses (--compress-idle, here 2 s) and reports the memory
# again with its parts.
#
#   bench/metaserver.sh [N]          (default 1000000)
#
# STREAM=1 pipes the generated dump into the load instead of writing it to
# a file first (100 M files make 28 GB of JSON); the load's time then
# includes generating it. GOMEMLIMIT, if set, reaches the server.
set -euo pipefail
cd "$(dirname "$0")/.."
n=${1:-1000000}
work=$(mktemp -d /tmp/sluice-metaserver.XXXXXX)
pid=
cleanup() { [[ -n $pid ]] && kill "$pid" 2>/dev/null; wait 2>/dev/null; rm -rf "$work"; }
trap cleanup EXIT
bin=$work/sluice
go build -o "$bin" ./cmd/sluice
port=$((20000 + RANDOM % 10000))
url=sluice://127.0.0.1:$port/bench
metrics=127.0.0.1:$((port + 1))
start() {
  "$bin" meta-server --dir "$work/data" --listen 127.0.0.1:$port --metrics "$metrics" --log "$work/server.log" --compress-idle 2s &
  pid=$!
  for _ in $(seq 1 6000); do
    curl -sf "http://$metrics/metrics" >/dev/null && return
    sleep 0.1
  done
  echo "server did not start"; cat "$work/server.log"; exit 1
}
stop() { kill -TERM "$pid"; wait "$pid" || true; pid=; }
metric() { curl -sf "http://$metrics/metrics" | awk -v m="$1" '$1 == m {printf "%.0f", $2}'; }

go build -o "$work/dumpgen" ./bench/dumpgen
if [[ ${STREAM:-} == 1 ]]; then
  echo "files: $n (dump streamed into the load)"
  start
  t0=$(date +%s.%N)
  "$work/dumpgen" -files "$n" -links 0 | "$bin" load "$url" - >/dev/null
else
  "$work/dumpgen" -files "$n" -links 0 >"$work/gen.json"
  echo "files: $n ($(du -h "$work/gen.json" | cut -f1) of dump)"
  start
  t0=$(date +%s.%N)
  "$bin" load "$url" "$work/gen.json" >/dev/null
fi
t1=$(date +%s.%N)
printf 'load through the server: %.1f s\n' "$(echo "$t1 - $t0" | bc)"
hwm=$(awk '/VmHWM/ {printf "%.0f", $2 * 1024}' /proc/$pid/status)
echo "peak resident while loading: $((hwm / 1048576)) MiB = $(echo "$hwm / $n" | bc) B/file"
stop
start
took=$(grep 'loaded checkpoint' "$work/server.log" | tail -1 | sed 's/.*took=\([^ ]*\).*/\1/')
keys=$(metric sluice_metaserver_keys)
rss=$(awk '/VmRSS/ {printf "%.0f", $2 * 1024}' /proc/$pid/status)
heap=$(metric go_memstats_heap_alloc_bytes)
ckpt=$(metric sluice_metaserver_checkpoint_bytes)
echo "start-up (checkpoint load): $took"
echo "records: $keys ($(echo "scale=2; $keys / $n" | bc) per file); checkpoint $((ckpt / 1048576)) MiB ($(echo "$ckpt / $n" | bc) B/file)"
echo "resident: $((rss / 1048576)) MiB = $(echo "$rss / $n" | bc) B/file; Go heap: $((heap / 1048576)) MiB = $(echo "$heap / $n" | bc) B/file"
t0=$(date +%s.%N)
for _ in $(seq 1 6000); do
  pages=$(metric sluice_metaserver_pages)
  [[ $(metric sluice_metaserver_pages_compressed) -ge $((pages * 99 / 100)) ]] && break
  sleep 0.1
done
t1=$(date +%s.%N)
sleep 2 # the pass's end gives the memory back
rss=$(awk '/VmRSS/ {printf "%.0f", $2 * 1024}' /proc/$pid/status)
heap=$(metric go_memstats_heap_alloc_bytes)
pb=$(metric sluice_metaserver_page_bytes)
zb=$(metric sluice_metaserver_page_compressed_bytes)
printf 'compressed %s of %s pages in %.1f s (2 s of them idle)\n' "$(metric sluice_metaserver_pages_compressed)" "$pages" "$(echo "$t1 - $t0" | bc)"
echo "records in pages: $((pb / 1048576)) MiB = $(echo "scale=1; $pb / $n" | bc) B/file (compressed pages: $(echo "scale=1; $zb / $n" | bc) B/file)"
echo "index, dedupe and the rest of the Go heap: $(echo "scale=1; ($heap - $pb) / $n" | bc) B/file"
echo "resident: $((rss / 1048576)) MiB = $(echo "$rss / $n" | bc) B/file; Go heap: $((heap / 1048576)) MiB = $(echo "$heap / $n" | bc) B/file"
stop
