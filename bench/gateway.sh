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
# Environment:
#   N, SMALL, C, ROUNDS    1 MiB objects per round (256), small ones (2000), concurrency (4), rounds (3)
#   SLUICE                 binary (default: built from ./cmd/sluice)
#   TMPDIR                 where the volume, bucket and caches go (default /tmp; removed at the end)
set -euo pipefail
cd "$(dirname "$0")/.."
[ "$(id -u)" = 0 ] || { echo "run as root (FUSE mount)" >&2; exit 1; }
D=$(mktemp -d "${TMPDIR:-/tmp}/sluice-gw.XXXXXX"); chmod 755 "$D"
GW_PID=
cleanup() {
  [ -n "$GW_PID" ] && kill -INT "$GW_PID" 2>/dev/null && wait "$GW_PID" 2>/dev/null || true
  umount "$D/mnt" 2>/dev/null || umount -l "$D/mnt" 2>/dev/null || true
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
