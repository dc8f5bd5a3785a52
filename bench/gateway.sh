#!/usr/bin/env bash
# The S3 gateway against a FUSE mount of the same volume: 1 MiB objects PUT and GET through `sluice gateway`
# beside 1 MiB files written and read through `sluice mount`, and small objects beside small files, in
# interleaved rounds (bench/s3gw). Prints a Markdown table: medians, and the ratio gateway/mount.
#
#   bench/gateway.sh             (as root, from anywhere in the repository)
#
# One volume on SQLite with a local bucket and --trash-days 0; the mount and the gateway run with default
# options, each with a cache directory of its own.
#
# With JUICEFS=PATH (a juicefs binary, e.g. built by ../shared/bench/vs-juicefs.sh), the same run then
# does the same with `juicefs format`, `juicefs mount` and `juicefs gateway` on a volume of their own
# (SQLite, local bucket, --trash-days 0, default options), and prints its table after Sluice's.
#
# Environment:
#   N, SMALL, C, ROUNDS    1 MiB objects per round (256), small ones (2000), concurrency (4), rounds (3)
#   SLUICE                 binary (default: built from ./cmd/sluice)
#   TMPDIR                 where the volume, bucket and caches go (default /tmp; removed at the end)
set -euo pipefail
cd "$(dirname "$0")/.."
[ "$(id -u)" = 0 ] || { echo "run as root (FUSE mount)" >&2; exit 1; }
D=$(mktemp -d "${TMPDIR:-/tmp}/sluice-gw.XXXXXX"); chmod 755 "$D"
GW_PID= JGW_PID=
cleanup() {
  [ -n "$GW_PID" ] && kill -INT "$GW_PID" 2>/dev/null && wait "$GW_PID" 2>/dev/null || true
  [ -n "$JGW_PID" ] && kill -INT "$JGW_PID" 2>/dev/null && wait "$JGW_PID" 2>/dev/null || true
  for m in "$D/mnt" "$D/jmnt"; do umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || true; done
  rm -rf "$D"
}
trap cleanup EXIT
if [ -z "${SLUICE:-}" ]; then SLUICE=$D/sluice; go build -o "$SLUICE" ./cmd/sluice; fi
go build -o "$D/s3gw" ./bench/s3gw
META=sqlite3://$D/meta.db
"$SLUICE" format "$META" gwbench --bucket "$D/data" --trash-days 0 >/dev/null
mkdir -p "$D/mnt"
"$SLUICE" mount -d "$META" "$D/mnt" --cache-dir "$D/cache-mount" >/dev/null
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
export MINIO_ROOT_USER=bench MINIO_ROOT_PASSWORD=bench-secret
"$SLUICE" gateway "$META" "127.0.0.1:$PORT" --cache-dir "$D/cache-gateway" >"$D/gateway.log" 2>&1 &
GW_PID=$!
for _ in $(seq 100); do grep -q "served over S3" "$D/gateway.log" && break; sleep 0.1; done
grep -q "served over S3" "$D/gateway.log" || { cat "$D/gateway.log" >&2; exit 1; }
echo "build $(git rev-parse --short HEAD), $(date -u +%Y-%m-%d)"
"$D/s3gw" -endpoint "127.0.0.1:$PORT" -bucket s3side -mount "$D/mnt/fuseside" \
  -n "${N:-256}" -small "${SMALL:-2000}" -c "${C:-4}" -rounds "${ROUNDS:-3}"

[ -n "${JUICEFS:-}" ] || exit 0
# The reference: JuiceFS's gateway and mount, the same way (its gateway serves the volume as one
# bucket, named after the volume).
JMETA=sqlite3://$D/jmeta.db
"$JUICEFS" format "$JMETA" jgwbench --bucket "$D/jdata" --trash-days 0 >/dev/null 2>&1
mkdir -p "$D/jmnt"
"$JUICEFS" mount -d "$JMETA" "$D/jmnt" --cache-dir "$D/jcache-mount" --log "$D/jmount.log" >/dev/null 2>&1
JPORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
"$JUICEFS" gateway "$JMETA" "127.0.0.1:$JPORT" --cache-dir "$D/jcache-gateway" >"$D/jgateway.log" 2>&1 &
JGW_PID=$!
for _ in $(seq 100); do curl -s -o /dev/null "http://127.0.0.1:$JPORT/" && break; sleep 0.1; done
echo "reference: $("$JUICEFS" version 2>/dev/null | head -1)"
"$D/s3gw" -endpoint "127.0.0.1:$JPORT" -bucket jgwbench -mount "$D/jmnt/fuseside" \
  -n "${N:-256}" -small "${SMALL:-2000}" -c "${C:-4}" -rounds "${ROUNDS:-3}"
