# shared-volume.sh, sourced by shared-sqlite.sh and shared-git.sh: formats one
# volume and mounts it MOUNTS times under $D/m1 ... $D/mN, each mount its own
# process with its own cache; unmounts and removes $D on exit.
# FS=sluice (default; SLUICE a binary, else built from ./cmd/sluice) or
# juicefs (JUICEFS a binary, else bench/juicefs/build.sh).
# ENGINE=sqlite (default) or redis (REDIS_URL, database 13 is flushed).
# OPTS: extra mount flags; FORMAT_OPTS: extra format flags (defaults otherwise).
# Needs HERE (the bench directory), D (a fresh directory) and MOUNTS.
cleanup() { for i in $(seq 1 "$MOUNTS"); do umount "$D/m$i" 2>/dev/null || umount -l "$D/m$i" 2>/dev/null || true; done; rm -rf "$D"; }
trap cleanup EXIT
case ${FS:-sluice} in
  sluice) if [ -z "${SLUICE:-}" ]; then SLUICE=$D/sluice; go build -o "$SLUICE" ./cmd/sluice; fi; BIN=$SLUICE ;;
  juicefs) BIN=${JUICEFS:-$("$HERE/juicefs/build.sh")} ;;
  *) echo "FS must be sluice or juicefs" >&2; exit 2 ;;
esac
case ${ENGINE:-sqlite} in
  sqlite) URL="sqlite3://$D/meta.db" ;;
  redis) base=${REDIS_URL:-redis://127.0.0.1:6379}; URL=$base/13
         hp=${base#redis://}; redis-cli -h "${hp%:*}" -p "${hp##*:}" -n 13 flushdb >/dev/null ;;
  *) echo "ENGINE must be sqlite or redis" >&2; exit 2 ;;
esac
# shellcheck disable=SC2086
"$BIN" format "$URL" vol --bucket "$D/bucket" ${FORMAT_OPTS:-} >"$D/format.log" 2>&1 || { cat "$D/format.log"; exit 1; }
for i in $(seq 1 "$MOUNTS"); do
  mkdir -p "$D/m$i"
  # shellcheck disable=SC2086
  "$BIN" mount -d "$URL" "$D/m$i" --cache-dir "$D/c$i" --log "$D/m$i.log" ${OPTS:-} >/dev/null 2>&1
done
