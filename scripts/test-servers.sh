#!/usr/bin/env bash
# Usage: scripts/test-servers.sh CMD [ARGS...]
#
# Starts throwaway test servers on loopback (Redis, a 3-master Redis Cluster,
# PostgreSQL, MariaDB, etcd, a 3-node etcd cluster and S3: MinIO when a
# minio binary is there, else versitygw), exports their URLs in the SLUICE_TEST_* variables that
# internal/testserver reads, runs CMD, stops every server it started (by PID,
# also on failure, Ctrl-C or SIGTERM) and exits with CMD's status. `make test`
# runs the test suite through it.
#
# Data and logs live in one fresh temporary directory, removed on exit.
#
# A server whose binary is missing is skipped with a loud SKIPPING line (its
# variable stays unset, and the Go tests that need it skip), except under
# CI=true, where every server is required and the script fails before
# running CMD. The S3 servers are looked up on PATH, then in
# $SLUICE_CI_CACHE/bin (default ~/.cache/sluice-ci/bin), $GOBIN and ~/go/bin. A server that is installed but fails to start always fails
# the script, with the tail of its log.
#
# Settings (environment):
#   SLUICE_TEST_SKIP="redis etcd-cluster ..."  servers not to start (names: redis
#       redis-cluster postgres mysql etcd etcd-cluster s3)
#   SLUICE_TEST_<X> already set                used as is; that server is not started
#   SLUICE_TEST_PORT_BASE=N                    first port to try (default: random 20000-22999)
#   SLUICE_TEST_STARTUP_TIMEOUT=S              seconds each server gets to become ready (30)
#   SLUICE_TEST_KEEP=1                         keep the temporary directory
#   SLUICE_TEST_PG_BIN=DIR                     PostgreSQL binaries (default /usr/lib/postgresql/15/bin)
#   SLUICE_TEST_S3_SERVER=minio|versitygw      which S3 server to start (default: minio if present)

# Functions run from traps and readiness polls look unreachable to shellcheck.
# shellcheck disable=SC2317

set -euo pipefail

prog=test-servers
log() { printf '%s: %s\n' "$prog" "$*" >&2; }

if [[ $# -eq 0 ]]; then
  echo "usage: $0 CMD [ARGS...]   (e.g. $0 go test ./...)" >&2
  exit 2
fi

CI_MODE=false
[[ ${CI:-} == true ]] && CI_MODE=true
TIMEOUT=${SLUICE_TEST_STARTUP_TIMEOUT:-30}
SKIP=" ${SLUICE_TEST_SKIP:-} "
SKIP=${SKIP//,/ }

PIDS=() PNAMES=() PSIGS=() PLOGS=()   # every server process started, in start order
WORK=""
EXTRA_DIRS=()

# ---------------------------------------------------------------- cleanup

alive() { # alive PID: the process exists and is not a zombie
  local s
  s=$(ps -o stat= -p "$1" 2>/dev/null) || return 1
  [[ $s != Z* ]]
}

stop_all() {
  local i pid left deadline
  ((${#PIDS[@]})) || return 0
  for i in "${!PIDS[@]}"; do
    if [[ -n ${RUNNING:-} ]] && ! alive "${PIDS[i]}"; then
      log "WARNING: ${PNAMES[i]} (pid ${PIDS[i]}) died while CMD ran; last lines of ${PLOGS[i]}:"
      tail -n 20 "${PLOGS[i]}" >&2 2>/dev/null || true
    fi
  done
  for ((i = ${#PIDS[@]} - 1; i >= 0; i--)); do
    kill -s "${PSIGS[i]}" "${PIDS[i]}" 2>/dev/null || true
  done
  deadline=$((SECONDS + 15))
  while ((SECONDS < deadline)); do
    left=0
    for pid in "${PIDS[@]}"; do
      if alive "$pid"; then left=1; fi
    done
    ((left)) || break
    sleep 0.2
  done
  for i in "${!PIDS[@]}"; do
    if alive "${PIDS[i]}"; then
      log "${PNAMES[i]} (pid ${PIDS[i]}) did not stop on SIG${PSIGS[i]}: killing it"
      kill -KILL "${PIDS[i]}" 2>/dev/null || true
    fi
  done
  for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
  log "stopped ${#PIDS[@]} server processes"
}

cleanup() {
  local status=$?
  trap - EXIT INT TERM
  set +e
  stop_all
  if [[ -n $WORK ]]; then
    if [[ ${SLUICE_TEST_KEEP:-} == 1 ]]; then
      log "kept data and logs in $WORK ${EXTRA_DIRS[*]}"
    else
      rm -rf "$WORK" "${EXTRA_DIRS[@]}"
    fi
  fi
  exit "$status"
}
CMD_PID=""
descendants() { # descendants PID: every process below PID
  local c
  for c in $(ps -o pid= --ppid "$1" 2>/dev/null); do
    echo "$c"
    descendants "$c"
  done
}

on_signal() { # on_signal SIGNAL STATUS: stop CMD (and the processes it started), then exit
  trap '' INT TERM
  if [[ -n $CMD_PID ]] && alive "$CMD_PID"; then
    local pids pid left deadline=$((SECONDS + 10))
    pids=$(descendants "$CMD_PID" | tr '\n' ' ')
    pids="$CMD_PID${pids:+ ${pids% }}"
    log "got SIG$1: stopping the command (pids $pids)"
    # shellcheck disable=SC2086
    kill -s "$1" $pids 2>/dev/null || true
    while ((SECONDS < deadline)); do
      left=""
      for pid in $pids; do
        if alive "$pid"; then left+=" $pid"; fi
      done
      [[ -n $left ]] || break
      sleep 0.2
    done
    # shellcheck disable=SC2086
    [[ -z $left ]] || kill -KILL $left 2>/dev/null || true
  fi
  exit "$2"
}

trap cleanup EXIT
trap 'on_signal INT 130' INT
trap 'on_signal TERM 143' TERM

# ---------------------------------------------------------------- helpers

find_bin() { # find_bin NAME: path of NAME on PATH or in the sbin directories
  local d
  if command -v "$1" 2>/dev/null; then return 0; fi
  for d in /usr/local/sbin /usr/sbin /sbin; do
    if [[ -x $d/$1 ]]; then echo "$d/$1"; return 0; fi
  done
  return 1
}

port_busy() { # port_busy PORT: something listens on PORT
  if command -v ss >/dev/null 2>&1; then
    [[ -n $(ss -Hltn "sport = :$1" 2>/dev/null) ]]
  else
    (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
  fi
}

NEXT_PORT=${SLUICE_TEST_PORT_BASE:-$((20000 + RANDOM % 3000))}
USED_PORTS=" "
free_port() { # free_port VAR [OFFSET]: sets VAR to a free port P (with P+OFFSET free too)
  local _off=${2:-0} _p # names that cannot shadow the caller's VAR
  for ((_p = NEXT_PORT; _p < NEXT_PORT + 2000 && _p + _off < 65536; _p++)); do
    [[ $USED_PORTS == *" $_p "* || $USED_PORTS == *" $((_p + _off)) "* ]] && continue
    port_busy "$_p" && continue
    if ((_off)) && port_busy "$((_p + _off))"; then continue; fi
    USED_PORTS+="$_p $((_p + _off)) "
    NEXT_PORT=$((_p + 1))
    printf -v "$1" '%s' "$_p"
    return 0
  done
  log "ERROR: no free port found from $NEXT_PORT"
  exit 1
}

track() { # track NAME SIGNAL LOGFILE PID: stop PID with SIGNAL on exit
  PNAMES+=("$1") PSIGS+=("$2") PLOGS+=("$3") PIDS+=("$4")
}

LAST_PID=""
spawn() { # spawn NAME SIGNAL LOGFILE CMD...: run CMD in the background, log to LOGFILE
  local name=$1 sig=$2 logf=$3
  shift 3
  "$@" </dev/null >>"$logf" 2>&1 &
  LAST_PID=$!
  disown "$LAST_PID" # stopped by stop_all; no "Killed" notices from the shell
  track "$name" "$sig" "$logf" "$LAST_PID"
}

fail_start() { # fail_start NAME LOGFILE WHY
  log "ERROR: $1 failed to start: $3"
  if [[ -s $2 ]]; then
    log "---- last lines of $2"
    tail -n 30 "$2" >&2 || true
    log "----"
  fi
  exit 1
}

wait_ready() { # wait_ready NAME LOGFILE "PIDS" CHECK...: poll CHECK until it succeeds (bounded)
  local name=$1 logf=$2 pids=$3 pid deadline=$((SECONDS + TIMEOUT + 1))
  shift 3
  until "$@" >/dev/null 2>&1; do
    for pid in $pids; do
      alive "$pid" || fail_start "$name" "$logf" "process $pid exited"
    done
    ((SECONDS < deadline)) || fail_start "$name" "$logf" "not ready after ${TIMEOUT}s"
    sleep 0.2
  done
}

wanted() { # wanted NAME VAR: whether to start server NAME for variable VAR
  if [[ $SKIP == *" $1 "* ]]; then
    log "SKIPPING $1: listed in SLUICE_TEST_SKIP ($2 stays unset)"
    return 1
  fi
  if [[ -n ${!2:-} ]]; then
    log "$(printf '%-13s %s (from the environment, not started here)' "$1" "${!2}")"
    return 1
  fi
  STEP_T=${EPOCHREALTIME:-}
  return 0
}

missing() { # missing NAME WHAT: NAME cannot run here because WHAT is not installed
  if $CI_MODE; then
    log "ERROR: $1 is required under CI=true, but $2 is not installed"
    exit 1
  fi
  log "SKIPPING $1: $2 not installed (tests that need it will skip)"
}

STEP_T=""
elapsed() { # seconds since STEP_T, as 1.2s
  [[ -n $STEP_T && -n ${EPOCHREALTIME:-} ]] || return 0
  local us=$(((${EPOCHREALTIME/./} - ${STEP_T/./}) / 100000))
  printf '%d.%ds' $((us / 10)) $((us % 10))
}

announce() { # announce NAME URL PIDS
  log "$(printf '%-13s %-64s pid %s (%s)' "$1" "$2" "$3" "$(elapsed)")"
}

# ---------------------------------------------------------------- servers

REDIS_CLI=""
redis_ping() { [[ $("$REDIS_CLI" -h 127.0.0.1 -p "$1" ping 2>/dev/null) == PONG ]]; }
redis_cluster_ok() {
  local p
  for p in "$@"; do
    "$REDIS_CLI" -h 127.0.0.1 -p "$p" cluster info 2>/dev/null | grep -q '^cluster_state:ok' || return 1
  done
}

redis_node() { # redis_node NAME DIR PORT [ARGS...]: start one redis-server
  local name=$1 dir=$2 port=$3
  shift 3
  mkdir -p "$dir"
  spawn "$name" TERM "$dir/redis.log" "$REDIS_SERVER" --bind 127.0.0.1 --port "$port" --dir "$dir" \
    --save '' --appendonly no --daemonize no "$@"
}

start_redis() {
  wanted redis SLUICE_TEST_REDIS || return 0
  local p dir=$WORK/redis
  free_port p
  redis_node redis "$dir" "$p"
  wait_ready redis "$dir/redis.log" "$LAST_PID" redis_ping "$p"
  export SLUICE_TEST_REDIS="redis://127.0.0.1:$p/1"
  announce redis "$SLUICE_TEST_REDIS" "$LAST_PID"
}

start_redis_cluster() {
  wanted redis-cluster SLUICE_TEST_REDIS_CLUSTER || return 0
  local i p ports=() pids=() addrs=() dir=$WORK/redis-cluster
  for i in 1 2 3; do
    free_port p 10000 # the cluster bus listens on port+10000
    redis_node "redis-cluster-$i" "$dir/$i" "$p" --cluster-enabled yes \
      --cluster-config-file nodes.conf --cluster-node-timeout 5000
    ports+=("$p") pids+=("$LAST_PID") addrs+=("127.0.0.1:$p")
  done
  for i in 0 1 2; do
    wait_ready redis-cluster "$dir/$((i + 1))/redis.log" "${pids[i]}" redis_ping "${ports[i]}"
  done
  if ! timeout 30 "$REDIS_CLI" --cluster create "${addrs[@]}" --cluster-replicas 0 --cluster-yes \
    </dev/null >"$dir/create.log" 2>&1; then
    fail_start redis-cluster "$dir/create.log" "redis-cli --cluster create failed"
  fi
  wait_ready redis-cluster "$dir/1/redis.log" "${pids[*]}" redis_cluster_ok "${ports[@]}"
  SLUICE_TEST_REDIS_CLUSTER="redis://$(IFS=,; echo "${addrs[*]}")/0"
  export SLUICE_TEST_REDIS_CLUSTER
  announce redis-cluster "$SLUICE_TEST_REDIS_CLUSTER" "${pids[*]}"
}

start_redises() {
  local need=false
  if [[ $SKIP != *" redis "* && -z ${SLUICE_TEST_REDIS:-} ]] ||
    [[ $SKIP != *" redis-cluster "* && -z ${SLUICE_TEST_REDIS_CLUSTER:-} ]]; then
    need=true
  fi
  if $need; then
    if ! REDIS_SERVER=$(find_bin redis-server) || ! REDIS_CLI=$(find_bin redis-cli); then
      missing redis "redis-server (apt redis-server)"
      missing redis-cluster "redis-server (apt redis-server)"
      return 0
    fi
  fi
  start_redis
  start_redis_cluster
}

pg_bindir() {
  local d
  local -a dirs=(/usr/lib/postgresql/*/bin)
  for d in ${SLUICE_TEST_PG_BIN:-} /usr/lib/postgresql/15/bin $(printf '%s\n' "${dirs[@]}" | sort -rV); do
    if [[ -x $d/initdb && -x $d/pg_ctl && -x $d/postgres ]]; then echo "$d"; return 0; fi
  done
  d=$(command -v pg_ctl 2>/dev/null) || return 1
  d=$(dirname "$d")
  [[ -x $d/initdb && -x $d/postgres ]] && echo "$d"
}

start_postgres() {
  wanted postgres SLUICE_TEST_POSTGRES || return 0
  local bin p dir pid psql as=()
  if ! bin=$(pg_bindir); then
    missing postgres "PostgreSQL (initdb/pg_ctl; apt postgresql)"
    return 0
  fi
  psql=$bin/psql
  [[ -x $psql ]] || psql=$(find_bin psql) || { missing postgres "psql (apt postgresql-client)"; return 0; }
  dir=$WORK/postgres
  mkdir -p "$dir"
  if ((EUID == 0)); then
    # initdb and postgres refuse to run as root.
    id postgres >/dev/null 2>&1 || fail_start postgres /dev/null "running as root, but there is no postgres user"
    local runuser
    runuser=$(find_bin runuser) || fail_start postgres /dev/null "running as root, but runuser is missing"
    as=("$runuser" -u postgres --)
    chown postgres: "$dir"
    if ! "${as[@]}" test -w "$dir"; then
      # A parent of $WORK is not traversable by postgres: use a directory in /tmp.
      dir=$(mktemp -d /tmp/sluice-pg.XXXXXX)
      EXTRA_DIRS+=("$dir")
      chmod 755 "$dir"
      chown postgres: "$dir"
    fi
  fi
  free_port p
  if ! "${as[@]}" "$bin/initdb" -D "$dir/data" -U postgres --auth-local=trust --auth-host=scram-sha-256 \
    --no-locale -E UTF8 --no-sync </dev/null >"$dir/initdb.log" 2>&1; then
    fail_start postgres "$dir/initdb.log" "initdb failed"
  fi
  local opts="-p $p -k $dir -c listen_addresses=127.0.0.1 -c fsync=off -c synchronous_commit=off"
  opts+=" -c full_page_writes=off -c max_connections=200"
  # pg_ctl daemonizes the postmaster; its PID is the first line of postmaster.pid.
  local rc=0
  "${as[@]}" "$bin/pg_ctl" -D "$dir/data" -l "$dir/postgres.log" -w -t "$TIMEOUT" -o "$opts" start \
    </dev/null >"$dir/pg_ctl.log" 2>&1 || rc=$?
  if [[ -s $dir/data/postmaster.pid ]]; then
    pid=$(head -n 1 "$dir/data/postmaster.pid")
    track postgres INT "$dir/postgres.log" "$pid" # SIGINT: fast shutdown
  fi
  if ((rc)) || [[ -z ${pid:-} ]]; then
    cat "$dir/pg_ctl.log" >&2 || true
    fail_start postgres "$dir/postgres.log" "pg_ctl start failed"
  fi
  if ! "${as[@]}" "$psql" -X -q -h "$dir" -p "$p" -U postgres -d postgres -v ON_ERROR_STOP=1 \
    -c "CREATE ROLE sluice LOGIN PASSWORD 'sluice' CREATEDB" \
    -c "CREATE DATABASE sluice OWNER sluice" </dev/null >"$dir/setup.log" 2>&1; then
    fail_start postgres "$dir/setup.log" "creating user and database sluice failed"
  fi
  local url="postgres://sluice:sluice@127.0.0.1:$p/sluice?sslmode=disable"
  wait_ready postgres "$dir/postgres.log" "$pid" "$psql" -X -q "$url" -c 'select 1'
  export SLUICE_TEST_POSTGRES=$url
  announce postgres "$url" "$pid"
}

start_mysql() {
  wanted mysql SLUICE_TEST_MYSQL || return 0
  local inst srv cli adm p dir=$WORK/mysql user
  if ! inst=$(find_bin mariadb-install-db) || ! srv=$(find_bin mariadbd); then
    missing mysql "MariaDB (mariadb-install-db/mariadbd; apt mariadb-server)"
    return 0
  fi
  if ! cli=$(find_bin mariadb) || ! adm=$(find_bin mariadb-admin); then
    missing mysql "the MariaDB client (apt mariadb-client)"
    return 0
  fi
  user=$(id -un)
  mkdir -p "$dir"
  free_port p
  if ! "$inst" --no-defaults --datadir="$dir/data" --user="$user" --auth-root-authentication-method=normal \
    --skip-test-db </dev/null >"$dir/install.log" 2>&1; then
    fail_start mysql "$dir/install.log" "mariadb-install-db failed"
  fi
  local sock=$dir/mysqld.sock
  # Debian's packaged server defaults to utf8mb4; --no-defaults would give latin1.
  spawn mysql TERM "$dir/mariadbd.log" "$srv" --no-defaults --datadir="$dir/data" --user="$user" \
    --bind-address=127.0.0.1 --port="$p" --socket="$sock" --pid-file="$dir/mariadbd.pid" \
    --skip-name-resolve --max-connections=500 --character-set-server=utf8mb4 \
    --collation-server=utf8mb4_general_ci --innodb-flush-log-at-trx-commit=0 --innodb-doublewrite=0
  local pid=$LAST_PID
  wait_ready mysql "$dir/mariadbd.log" "$pid" "$adm" --no-defaults --socket="$sock" -uroot ping
  if ! "$cli" --no-defaults --socket="$sock" -uroot >"$dir/setup.log" 2>&1 <<'SQL'; then
CREATE USER 'sluice'@'%' IDENTIFIED BY 'sluice';
CREATE USER 'sluice'@'localhost' IDENTIFIED BY 'sluice';
GRANT ALL PRIVILEGES ON *.* TO 'sluice'@'%';
GRANT ALL PRIVILEGES ON *.* TO 'sluice'@'localhost';
CREATE DATABASE sluice;
SQL
    fail_start mysql "$dir/setup.log" "creating user and database sluice failed"
  fi
  wait_ready mysql "$dir/mariadbd.log" "$pid" \
    "$cli" --no-defaults -h127.0.0.1 -P"$p" -usluice -psluice sluice -e 'select 1'
  export SLUICE_TEST_MYSQL="mysql://sluice:sluice@(127.0.0.1:$p)/sluice"
  announce mysql "$SLUICE_TEST_MYSQL" "$pid"
}

ETCD="" ETCDCTL=""
etcd_healthy() { # etcd_healthy ENDPOINTS: every endpoint is healthy (one try blocks 5 s at most)
  ETCDCTL_API=3 timeout 5 "$ETCDCTL" --endpoints="$1" --dial-timeout=2s --command-timeout=3s endpoint health
}

start_etcd_set() { # start_etcd_set NAME VAR N: an N-member etcd cluster
  local name=$1 var=$2 n=$3 i c pp dir=$WORK/$1
  wanted "$name" "$var" || return 0
  if [[ -z $ETCD || -z $ETCDCTL ]]; then
    missing "$name" "etcd/etcdctl (apt etcd-server etcd-client)"
    return 0
  fi
  local clients=() peers=() members="" pids=() eps=() data=$dir
  mkdir -p "$dir"
  # etcd 3.4 cannot skip fsync, and on disk every write waits for one (tens of
  # ms): keep its data in memory when /dev/shm is there. Logs stay in $dir.
  if [[ -d /dev/shm && -w /dev/shm ]] && data=$(mktemp -d "/dev/shm/sluice-$name.XXXXXX"); then
    EXTRA_DIRS+=("$data")
  else
    data=$dir
  fi
  for ((i = 1; i <= n; i++)); do
    free_port c
    free_port pp
    clients+=("$c") peers+=("$pp")
    members+="${members:+,}n$i=http://127.0.0.1:$pp"
  done
  # Members of a cluster stopped together with SIGTERM each wait seconds for
  # the others (leader transfer); their data is thrown away, so SIGKILL them.
  local sig=TERM
  ((n == 1)) || sig=KILL
  for ((i = 1; i <= n; i++)); do
    c=${clients[i - 1]} pp=${peers[i - 1]}
    spawn "$name-$i" "$sig" "$dir/n$i.log" "$ETCD" --name "n$i" --data-dir "$data/n$i" \
      --listen-client-urls "http://127.0.0.1:$c" --advertise-client-urls "http://127.0.0.1:$c" \
      --listen-peer-urls "http://127.0.0.1:$pp" --initial-advertise-peer-urls "http://127.0.0.1:$pp" \
      --initial-cluster "$members" --initial-cluster-state new --initial-cluster-token "sluice-$name-$$" \
      --max-txn-ops 10000 --max-request-bytes 10485760 --logger zap --log-outputs stderr
    pids+=("$LAST_PID") eps+=("127.0.0.1:$c")
  done
  local endpoints
  endpoints=$(IFS=,; echo "${eps[*]}")
  wait_ready "$name" "$dir/n1.log" "${pids[*]}" etcd_healthy "$endpoints"
  printf -v "$var" 'etcd://%s' "$endpoints"
  export "${var?}"
  announce "$name" "${!var}" "${pids[*]}"
}

start_etcds() {
  ETCD=$(find_bin etcd) || ETCD=""
  ETCDCTL=$(find_bin etcdctl) || ETCDCTL=""
  start_etcd_set etcd SLUICE_TEST_ETCD 1
  start_etcd_set etcd-cluster SLUICE_TEST_ETCD_CLUSTER 3
}

S3_DIRS=("${SLUICE_CI_CACHE:-$HOME/.cache/sluice-ci}/bin" "${GOBIN:-}" "$HOME/go/bin")
s3_bin() { # s3_bin NAME: path of the S3 server NAME on PATH or in a cache directory
  local d
  if command -v "$1" 2>/dev/null; then return 0; fi
  for d in "${S3_DIRS[@]}"; do
    if [[ -n $d && -x $d/$1 ]]; then echo "$d/$1"; return 0; fi
  done
  return 1
}

s3_server() { # s3_server: "minio PATH" or "versitygw PATH" (MinIO preferred), or nothing
  local b want=${SLUICE_TEST_S3_SERVER:-}
  if [[ -z $want || $want == minio ]] && b=$(s3_bin minio); then echo "minio $b"; return 0; fi
  if [[ -z $want || $want == versitygw ]] && b=$(s3_bin versitygw); then echo "versitygw $b"; return 0; fi
  return 1
}

start_s3() {
  wanted s3 SLUICE_TEST_S3 || return 0
  local kind bin
  if ! find_bin curl >/dev/null; then
    missing s3 "curl (apt curl)"
    return 0
  fi
  if ! read -r kind bin < <(s3_server); then
    missing s3 "an S3 server (versitygw: go install github.com/versity/versitygw/cmd/versitygw@v1.8.0; or minio)"
    return 0
  fi
  local p dir=$WORK/s3 bucket=sluice-test ak sk pid domain=localhost
  ak=sluice$(od -An -tx1 -N6 /dev/urandom | tr -d ' \n')
  sk=$(od -An -tx1 -N16 /dev/urandom | tr -d ' \n')
  mkdir -p "$dir/root"
  free_port p
  local -a sig=(--aws-sigv4 "aws:amz:us-east-1:s3" --user "$ak:$sk" -H "x-amz-content-sha256: UNSIGNED-PAYLOAD")
  # Both serve path-style requests on 127.0.0.1 and virtual-host style ones
  # for BUCKET.localhost (SLUICE_TEST_S3_VIRTUAL_DOMAIN).
  if [[ $kind == minio ]]; then
    local cp
    free_port cp
    spawn s3 TERM "$dir/minio.log" env MINIO_ROOT_USER="$ak" MINIO_ROOT_PASSWORD="$sk" MINIO_DOMAIN="$domain" \
      MINIO_BROWSER=off MINIO_UPDATE=off "$bin" server "$dir/root" --quiet \
      --address "127.0.0.1:$p" --console-address "127.0.0.1:$cp"
    pid=$LAST_PID
    wait_ready s3 "$dir/minio.log" "$pid" curl -sf -o /dev/null --max-time 3 "http://127.0.0.1:$p/minio/health/ready"
  else
    spawn s3 TERM "$dir/versitygw.log" env ROOT_ACCESS_KEY="$ak" ROOT_SECRET_KEY="$sk" \
      "$bin" --port "127.0.0.1:$p" --virtual-domain "$domain" --quiet posix "$dir/root"
    pid=$LAST_PID
    wait_ready s3 "$dir/versitygw.log" "$pid" curl -s -o /dev/null --max-time 3 "http://127.0.0.1:$p/"
  fi
  # Create the bucket through the API, so it gets the owner and ACL the server keeps.
  if ! curl -sS -f --max-time 10 -X PUT "${sig[@]}" "http://127.0.0.1:$p/$bucket" >"$dir/create.log" 2>&1; then
    fail_start s3 "$dir/create.log" "creating bucket $bucket failed"
  fi
  wait_ready s3 "$dir/create.log" "$pid" curl -sf -o /dev/null --max-time 3 "${sig[@]}" \
    "http://127.0.0.1:$p/$bucket?list-type=2"
  export SLUICE_TEST_S3="http://$ak:$sk@127.0.0.1:$p/$bucket"
  export SLUICE_TEST_S3_VIRTUAL_DOMAIN=$domain
  announce s3 "$SLUICE_TEST_S3 ($kind)" "$pid"
}

preflight() { # under CI=true, name every missing binary at once, before starting anything
  local gone=() b
  command -v ps >/dev/null 2>&1 || { log "ERROR: ps is not installed (apt procps)"; exit 1; }
  $CI_MODE || return 0
  if [[ $SKIP != *" redis "* && -z ${SLUICE_TEST_REDIS:-} ]] ||
    [[ $SKIP != *" redis-cluster "* && -z ${SLUICE_TEST_REDIS_CLUSTER:-} ]]; then
    for b in redis-server redis-cli; do find_bin "$b" >/dev/null || gone+=("$b (apt redis-server)"); done
  fi
  if [[ $SKIP != *" postgres "* && -z ${SLUICE_TEST_POSTGRES:-} ]]; then
    pg_bindir >/dev/null || gone+=("PostgreSQL initdb/pg_ctl (apt postgresql)")
  fi
  if [[ $SKIP != *" mysql "* && -z ${SLUICE_TEST_MYSQL:-} ]]; then
    for b in mariadb-install-db mariadbd; do find_bin "$b" >/dev/null || gone+=("$b (apt mariadb-server)"); done
    for b in mariadb mariadb-admin; do find_bin "$b" >/dev/null || gone+=("$b (apt mariadb-client)"); done
  fi
  if [[ $SKIP != *" etcd "* && -z ${SLUICE_TEST_ETCD:-} ]] ||
    [[ $SKIP != *" etcd-cluster "* && -z ${SLUICE_TEST_ETCD_CLUSTER:-} ]]; then
    find_bin etcd >/dev/null || gone+=("etcd (apt etcd-server)")
    find_bin etcdctl >/dev/null || gone+=("etcdctl (apt etcd-client)")
  fi
  if [[ $SKIP != *" s3 "* && -z ${SLUICE_TEST_S3:-} ]]; then
    s3_server >/dev/null || gone+=("an S3 server: versitygw (go install github.com/versity/versitygw/cmd/versitygw@v1.8.0) or minio")
    find_bin curl >/dev/null || gone+=("curl (apt curl)")
  fi
  ((${#gone[@]})) || return 0
  log "ERROR: CI=true requires every test server, but these are not installed:"
  for b in "${gone[@]}"; do log "  - $b"; done
  exit 1
}

# ---------------------------------------------------------------- main

preflight

WORK=$(mktemp -d "${TMPDIR:-/tmp}/sluice-test-servers.XXXXXX")
chmod 755 "$WORK" # servers running as another user (postgres) need to reach their directories
t0=$SECONDS
log "starting test servers in $WORK$($CI_MODE && echo ' (CI=true: all required)')"
start_redises
start_postgres
start_mysql
start_etcds
start_s3
log "servers ready in $((SECONDS - t0))s; running: $*"

# CMD runs in the background, with this script's standard input, so that
# SIGINT/SIGTERM reach the traps at once (not when CMD ends) and are passed on.
# `trap -` undoes the SIGINT/SIGQUIT ignoring bash gives background commands.
RUNNING=1
if [[ -e /dev/fd/0 ]]; then exec 3<&0; else exec 3</dev/null; fi # stdin may be closed
(
  trap - INT QUIT
  exec "$@"
) <&3 3<&- &
CMD_PID=$!
status=0
wait "$CMD_PID" || status=$?
CMD_PID=""
log "$1 exited with status $status"
exit "$status"
