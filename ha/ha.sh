#!/usr/bin/env bash
# The high-availability deployment of docs/operations.md "High availability", on one machine:
# three PostgreSQL 15 nodes under Patroni, a three-member etcd, HAProxy (writes to the node
# whose Patroni answers /primary; the instances' HTTP front), PgBouncer, two instances.
#
#   ha/ha.sh up            start it all; the last line printed is the service's URL
#   ha/ha.sh kill-primary  SIGKILL the current primary's postgres; prints the node's name
#   ha/ha.sh down          stop it all and remove its state
#   ha/ha.sh status        each node's name, role, state and PostgreSQL port, as Patroni sees them
#   ha/ha.sh kill-node N | kill-patroni N | start-node N   (the failover test's faults)
#
# Everything listens on 127.0.0.1, on ports HA_PORT_BASE (15400) to HA_PORT_BASE + 50, and keeps
# its data, logs and pids under HA_STATE_DIR (the temp folder's planning-ha). As root, missing
# packages are installed with apt-get, and PostgreSQL, Patroni, etcd and PgBouncer run as the
# `postgres` user. The instances get the caller's environment (RATE_LIMIT_PER_MINUTE, ...).
set -euo pipefail
cd "$(dirname "$0")/.."

STATE=${HA_STATE_DIR:-${TMPDIR:-/tmp}/planning-ha}
BASE=${HA_PORT_BASE:-15400}
NODES=(node1 node2 node3)
etcd_client() { echo $((BASE + $1)); }        # 15400-15402
etcd_peer() { echo $((BASE + 3 + $1)); }      # 15403-15405
pg_port() { echo $((BASE + 10 + $1)); }       # 15410-15412
rest_port() { echo $((BASE + 20 + $1)); }     # 15420-15422
PRIMARY_PORT=$((BASE + 30))                   # HAProxy: the primary, whichever node it is
BOUNCER_PORT=$((BASE + 31))                   # PgBouncer, in front of that
INSTANCE_PORTS=($((BASE + 40)) $((BASE + 41)))
HTTP_PORT=$((BASE + 50))                      # HAProxy: the instances
PG_BIN=/usr/lib/postgresql/15/bin

log() { echo "ha: $*" >&2; }

# The user the database side runs as: root may not run PostgreSQL (nor PgBouncer).
if [ "$(id -u)" = 0 ]; then as_db() { setpriv --reuid=postgres --regid=postgres --init-groups -- "$@"; }; else as_db() { "$@"; }; fi

install_packages() {
  local packages=()
  [ -x "$PG_BIN/postgres" ] || packages+=(postgresql-15)
  [ -x /usr/sbin/pgbouncer ] || packages+=(pgbouncer)
  [ -x /usr/sbin/haproxy ] || packages+=(haproxy)
  command -v patroni >/dev/null || packages+=(patroni)
  command -v etcd >/dev/null || packages+=(etcd-server)
  command -v etcdctl >/dev/null || packages+=(etcd-client)
  [ "${#packages[@]}" -eq 0 ] && return
  if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then
    log "missing ${packages[*]}: install them with apt-get install ${packages[*]} (as root)"
    exit 1
  fi
  log "installing ${packages[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${packages[@]}" >/dev/null
  # Debian's packages start their own daemons on their default ports: not ours.
  for unit in etcd patroni; do systemctl disable --now "$unit" >/dev/null 2>&1 || true; done
}

# Starts a daemon in a session of its own, its output in logs/<name>.log, its pid in pids/<name>.
start() {
  local name=$1 runner=$2
  shift 2
  local as=()
  if [ "$runner" = db ] && [ "$(id -u)" = 0 ]; then as=(setpriv --reuid=postgres --regid=postgres --init-groups -- env HOME="$STATE"); fi
  setsid "${as[@]}" "$@" >"$STATE/logs/$name.log" 2>&1 </dev/null &
  echo $! >"$STATE/pids/$name"
}

# The python3 Patroni runs on (Debian's), else the first on PATH. A version manager's shim
# earlier on PATH (pyenv's) costs about a second of CPU per call on a small machine, and
# `status` and the waits below call it several times a second.
if [ -x /usr/bin/python3 ]; then PYTHON=/usr/bin/python3; else PYTHON=python3; fi

http_status() { # url -> HTTP status, 000 when nothing answers
  "$PYTHON" - "$1" <<'EOF'
import sys, urllib.request, urllib.error
try:
    print(urllib.request.urlopen(sys.argv[1], timeout=2).status)
except urllib.error.HTTPError as e:
    print(e.code)
except Exception:
    print('000')
EOF
}

answers_200() { [ "$(http_status "$1")" = 200 ]; }

cluster() { # Patroni's view of the cluster, from any node that answers: "name role state port" lines
  local i
  for i in 0 1 2; do
    "$PYTHON" - "http://127.0.0.1:$(rest_port $i)/cluster" 2>/dev/null <<'EOF' && return 0
import json, sys, urllib.request
members = json.load(urllib.request.urlopen(sys.argv[1], timeout=2))['members']
for m in members:
    print(m['name'], m['role'], m['state'], m.get('port', ''))
EOF
  done
  return 1
}

wait_for() { # seconds, description, command...
  local seconds=$1 what=$2
  shift 2
  local deadline=$((SECONDS + seconds))
  until "$@" >/dev/null 2>&1; do
    if [ $SECONDS -ge $deadline ]; then log "timed out waiting for $what (logs in $STATE/logs)"; exit 1; fi
    sleep 0.2
  done
}

write_patroni_config() { # index
  local i=$1 name=${NODES[$1]}
  local dir="$STATE/$name"
  mkdir -p "$dir"
  cat >"$dir/patroni.yml" <<EOF
scope: planning
name: $name
restapi:
  listen: 127.0.0.1:$(rest_port $i)
  connect_address: 127.0.0.1:$(rest_port $i)
etcd3:
  hosts: 127.0.0.1:$(etcd_client 0),127.0.0.1:$(etcd_client 1),127.0.0.1:$(etcd_client 2)
bootstrap:
  dcs:
    # A dead primary's leader key expires after ttl; each node looks every loop_wait; a DCS or
    # PostgreSQL call is retried for retry_timeout. loop_wait + 2 x retry_timeout <= ttl.
    ttl: 6
    loop_wait: 1
    retry_timeout: 2
    # A primary whose postgres died is not restarted (crash recovery, then waiting for its
    # standby): its synchronous standby, which has every acknowledged commit, is promoted.
    primary_start_timeout: 0
    maximum_lag_on_failover: 1048576
    # A commit is acknowledged once a standby has it; only that standby may be promoted, and
    # with no standby commits wait (strict) instead of going on alone.
    synchronous_mode: true
    synchronous_mode_strict: true
    postgresql:
      use_pg_rewind: true
      use_slots: true
      parameters:
        max_connections: 50
        shared_buffers: 16MB
        wal_level: replica
        hot_standby: 'on'
        wal_log_hints: 'on'
        max_wal_senders: 8
        max_replication_slots: 8
        wal_keep_size: 64MB
  initdb:
    - encoding: UTF8
    - locale: C
  # The service's database, made once by the node that bootstraps the cluster, before any standby.
  post_bootstrap: $STATE/create-database.sh
  pg_hba:
    - local all all trust
    - host replication postgres 127.0.0.1/32 trust
    - host all all 127.0.0.1/32 trust
postgresql:
  listen: 127.0.0.1:$(pg_port $i)
  connect_address: 127.0.0.1:$(pg_port $i)
  data_dir: $dir/data
  bin_dir: $PG_BIN
  pgpass: $dir/pgpass
  authentication:
    superuser: {username: postgres}
    replication: {username: postgres}
    rewind: {username: postgres}
  parameters:
    unix_socket_directories: '$dir'
  # A standby's base backup starts at once, not after a checkpoint spread over minutes.
  basebackup:
    - checkpoint: fast
tags:
  nofailover: false
  noloadbalance: false
EOF
}

write_haproxy_config() {
  cat >"$STATE/haproxy.cfg" <<EOF
global
    maxconn 1000

defaults
    timeout connect 2s
    timeout check 2s
    timeout client 60s
    timeout server 60s

# PostgreSQL: only the node whose Patroni answers /primary with 200 and whose postgres says it
# is the primary (not still in recovery) is up. Patroni answers 200 as soon as it holds the
# leader key, while its postgres, promoted a moment later, may still be replaying what it had:
# its data then lags behind what was acknowledged. When a node stops being the primary (or its
# Patroni stops answering), its sessions are cut at once.
listen postgres_primary
    mode tcp
    bind 127.0.0.1:$PRIMARY_PORT
    timeout client 30m
    timeout server 30m
    timeout connect 1s
    retries 0
    option httpchk GET /primary
    http-check expect status 200
    http-check expect rstring '"role": "(master|primary)"'
    default-server inter 1s fall 2 rise 1 on-marked-down shutdown-sessions
    server node1 127.0.0.1:$(pg_port 0) check port $(rest_port 0)
    server node2 127.0.0.1:$(pg_port 1) check port $(rest_port 1)
    server node3 127.0.0.1:$(pg_port 2) check port $(rest_port 2)

# The instances, as in "Several instances behind HAProxy".
frontend planning
    mode http
    bind 127.0.0.1:$HTTP_PORT
    timeout http-request 10s
    option forwardfor
    default_backend instances

backend instances
    mode http
    balance leastconn
    retries 3
    retry-on conn-failure
    option redispatch 1
    errorfile 502 $STATE/planning-503.http
    errorfile 503 $STATE/planning-503.http
    errorfile 504 $STATE/planning-503.http
    option httpchk GET /readyz
    http-check expect status 200
    default-server check inter 1s fall 2 rise 1
    server app1 127.0.0.1:${INSTANCE_PORTS[0]}
    server app2 127.0.0.1:${INSTANCE_PORTS[1]}
EOF
  printf '%s\r\n' 'HTTP/1.1 503 Service Unavailable' 'Content-Type: application/json' 'Cache-Control: no-store' 'Retry-After: 1' 'Connection: close' '' >"$STATE/planning-503.http"
  printf '%s\n' '{"errors":[{"status":"503","code":"unavailable","title":"Service unavailable","detail":"No instance could answer this request; try again shortly, with the same Idempotency-Key for a write."}]}' >>"$STATE/planning-503.http"
}

write_bouncer_config() {
  printf '"postgres" ""\n' >"$STATE/userlist.txt"
  cat >"$STATE/pgbouncer.ini" <<EOF
[databases]
planning = host=127.0.0.1 port=$PRIMARY_PORT dbname=planning

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = $BOUNCER_PORT
unix_socket_dir =
auth_type = trust
auth_file = $STATE/userlist.txt
pool_mode = transaction
max_client_conn = 200
default_pool_size = 10
reserve_pool_size = 2
query_wait_timeout = 0.5
server_login_retry = 1
server_connect_timeout = 1
EOF
}

up() {
  if [ -d "$STATE/pids" ] && ls "$STATE/pids"/* >/dev/null 2>&1; then log "already up in $STATE (ha/ha.sh down first)"; exit 1; fi
  install_packages
  mkdir -p "$STATE/logs" "$STATE/pids"
  chmod 755 "$STATE"
  local i cluster_line="" peers=()
  for i in 0 1 2; do peers+=("e$((i + 1))=http://127.0.0.1:$(etcd_peer $i)"); done
  cluster_line=$(IFS=,; echo "${peers[*]}")
  for i in 0 1 2; do write_patroni_config "$i"; done
  printf '#!/bin/sh\n# Patroni runs it with the new cluster'"'"'s URL.\nexec psql "$1" -X -q -c "create database planning"\n' >"$STATE/create-database.sh"
  chmod 755 "$STATE/create-database.sh"
  write_haproxy_config
  write_bouncer_config
  [ "$(id -u)" = 0 ] && chown -R postgres:postgres "$STATE"

  for i in 0 1 2; do
    start "etcd$((i + 1))" db etcd --name "e$((i + 1))" --data-dir "$STATE/etcd$((i + 1))" \
      --listen-client-urls "http://127.0.0.1:$(etcd_client $i)" --advertise-client-urls "http://127.0.0.1:$(etcd_client $i)" \
      --listen-peer-urls "http://127.0.0.1:$(etcd_peer $i)" --initial-advertise-peer-urls "http://127.0.0.1:$(etcd_peer $i)" \
      --initial-cluster "$cluster_line" --initial-cluster-state new --initial-cluster-token planning-ha \
      --heartbeat-interval 100 --election-timeout 1000
  done
  wait_for 30 "etcd" etcdctl --endpoints="127.0.0.1:$(etcd_client 0)" endpoint health
  for i in 0 1 2; do start "patroni-${NODES[$i]}" db patroni "$STATE/${NODES[$i]}/patroni.yml"; done
  wait_for 60 "a primary" primary_name
  start haproxy root haproxy -db -f "$STATE/haproxy.cfg"
  # HAProxy takes every server as up until its checks say otherwise (fall 2: 2 s).
  wait_for 30 "the primary alone behind HAProxy" only_primary_behind_haproxy
  # The standbys' base backups go on meanwhile: until one of them is the synchronous standby,
  # commits wait (synchronous_mode_strict), and so do the instances' migrations.
  start pgbouncer db /usr/sbin/pgbouncer "$STATE/pgbouncer.ini"
  # The service: a built entry (HA_SERVICE_ENTRY, such as dist/src/main.js after npm run
  # build), else the sources through tsx. Both start at once: one migrates under the migration
  # lock, the other waits for it and finds nothing left.
  local entry=(--import tsx src/main.ts)
  [ -n "${HA_SERVICE_ENTRY:-}" ] && entry=("$HA_SERVICE_ENTRY")
  for i in 0 1; do
    DATABASE_URL="postgresql://postgres@127.0.0.1:$BOUNCER_PORT/planning" \
    DATABASE_DIRECT_URL="postgresql://postgres@127.0.0.1:$PRIMARY_PORT/planning" \
    DATABASE_POOL_SIZE=${DATABASE_POOL_SIZE:-8} TRUST_PROXY=loopback HOST=127.0.0.1 PORT=${INSTANCE_PORTS[$i]} \
      start "instance$((i + 1))" root node "${entry[@]}"
  done
  wait_for 60 "a synchronous standby" has_sync_standby
  for i in 0 1; do wait_for 120 "instance $((i + 1))" answers_200 "http://127.0.0.1:${INSTANCE_PORTS[$i]}/readyz"; done
  wait_for 30 "HAProxy's front" answers_200 "http://127.0.0.1:$HTTP_PORT/readyz"
  log "up: $(primary_name) is the primary; state and logs in $STATE"
  echo "http://127.0.0.1:$HTTP_PORT"
}

only_primary_behind_haproxy() { # six connections in a row reach a primary
  local n
  for n in 1 2 3 4 5 6; do
    [ "$(as_db psql -X -qAt -h 127.0.0.1 -p "$PRIMARY_PORT" -U postgres -d postgres -c 'select pg_is_in_recovery()')" = f ] || return 1
  done
}

primary_name() { cluster | awk '$2 == "leader" && $3 == "running" { print $1; found = 1 } END { exit !found }'; }
has_sync_standby() { cluster | awk '$2 == "sync_standby" && ($3 == "running" || $3 == "streaming") { found = 1 } END { exit !found }'; }

postmaster_pid() { # node name -> its postmaster's pid, when it runs (postmaster.pid outlives a killed one)
  local pid
  pid=$(head -n 1 "$STATE/$1/data/postmaster.pid" 2>/dev/null || true)
  [ -n "$pid" ] && alive "$pid" && tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -qF "$STATE/$1/data" && echo "$pid"
  return 0
}

kill_primary() {
  local name pid
  name=$(primary_name) || { log "no primary now"; exit 1; }
  pid=$(postmaster_pid "$name")
  [ -n "$pid" ] || { log "no postmaster.pid for $name"; exit 1; }
  kill -KILL "$pid"
  echo "$name"
}

kill_node() { # node name: SIGKILL its Patroni and its postgres, as a machine lost would
  local name=$1 pid
  pid=$(cat "$STATE/pids/patroni-$name" 2>/dev/null || true)
  [ -n "$pid" ] && kill -KILL "$pid" 2>/dev/null || true
  pid=$(postmaster_pid "$name")
  [ -n "$pid" ] && kill -KILL "$pid" 2>/dev/null || true
  rm -f "$STATE/pids/patroni-$name"
}

kill_patroni() { # node name: SIGKILL its Patroni only; its postgres runs on, without it
  local pid
  pid=$(cat "$STATE/pids/patroni-$1")
  kill -KILL "$pid"
  rm -f "$STATE/pids/patroni-$1"
}

start_node() { # node name: start its Patroni (again); it rejoins as a standby, or leads
  [ -f "$STATE/pids/patroni-$1" ] && alive "$(cat "$STATE/pids/patroni-$1")" && { log "$1's Patroni runs"; return 0; }
  start "patroni-$1" db patroni "$STATE/$1/patroni.yml"
}

# Whether a pid is a live process: a zombie (exited, not yet reaped by its new parent, which
# may take seconds in a container) counts as gone.
alive() { [ -r "/proc/$1/stat" ] && [ "$(sed 's/.*) //' "/proc/$1/stat" 2>/dev/null | cut -d' ' -f1)" != Z ]; }

stop_pid() { # pidfile signal
  local file=$1 signal=$2 pid
  [ -f "$file" ] || return 0
  pid=$(cat "$file")
  kill "-$signal" "$pid" 2>/dev/null || true
  for _ in $(seq 1 100); do alive "$pid" || break; sleep 0.1; done
  kill -KILL "$pid" 2>/dev/null || true
  rm -f "$file"
}

stop_all() { # signal name...: stops the daemons named side by side, and waits for each
  local signal=$1 name
  shift
  for name in "$@"; do stop_pid "$STATE/pids/$name" "$signal" & done
  wait
}

# The pids of the processes whose command line names the state folder (postmasters, with -D;
# pg_basebackup, pg_rewind and psql that Patroni started), read from /proc: a fixed string,
# whatever characters the folder's path holds.
state_pids() {
  local pattern
  # The pattern from a file, so that grep's own command line does not name the folder.
  pattern=$(mktemp)
  printf '%s/\n' "$STATE" >"$pattern"
  { grep -lsaF -f "$pattern" /proc/[0-9]*/cmdline 2>/dev/null || true; } | sed -n 's|^/proc/\([0-9]*\)/cmdline$|\1|p'
  rm -f "$pattern"
}

down() {
  [ -d "$STATE" ] || { log "nothing in $STATE"; return 0; }
  local pids left _
  # Everything goes with the state folder, so nothing needs a clean stop but PostgreSQL's own
  # processes (an immediate shutdown: they exit and give back their shared memory). Patroni is
  # killed, so that it starts nothing more; etcd's store needs no goodbye.
  stop_all KILL patroni-node1 patroni-node2 patroni-node3 &
  stop_all TERM instance1 instance2 haproxy pgbouncer &
  stop_all KILL etcd1 etcd2 etcd3 &
  wait
  # Whatever still names the folder (a postmaster, also one a Patroni was starting as it died;
  # a base backup or a rewind under way): SIGQUIT, then SIGKILL after 5 s.
  for _ in $(seq 1 50); do
    pids=$(state_pids)
    [ -z "$pids" ] && break
    # shellcheck disable=SC2086
    kill -QUIT $pids 2>/dev/null || true
    sleep 0.1
  done
  left=$(state_pids)
  if [ -n "$left" ]; then
    # shellcheck disable=SC2086
    kill -KILL $left 2>/dev/null || true
    log "killed what did not stop: $(echo $left)"
  fi
  rm -rf "$STATE"
  log "down"
}

case "${1:-}" in
  up) up ;;
  kill-primary) kill_primary ;;
  down) down ;;
  status) cluster ;;
  kill-node) kill_node "$2" ;;
  kill-patroni) kill_patroni "$2" ;;
  start-node) start_node "$2" ;;
  *) echo "usage: $0 up|kill-primary|down|status|kill-node NAME|kill-patroni NAME|start-node NAME" >&2; exit 2 ;;
esac
