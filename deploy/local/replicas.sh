#!/usr/bin/env bash
# N `skillhost run --adapter api` replicas on one throwaway PostgreSQL, behind nginx, on this
# machine, with Debian's packages only (no docker): the local equivalent of
# deploy/compose.yaml (docs/deployment.md). Everything it starts lives in one run directory
# and is stopped when the script exits (Ctrl-C in its terminal, SIGTERM, an error, or the end
# of --check).
#
#   deploy/local/replicas.sh [--replicas N] [--config FILE] [--skillhost BIN] [--port PORT]
#                            [--probe WASM] [--run-dir DIR] [--check] [--keep]
#
#   --replicas N     replicas to start (default 2; env REPLICAS)
#   --config FILE    one config for every replica (env CONFIG). It must say
#                    `state: {backend: postgres}` without a `url`: the script points the
#                    replicas at its cluster through PGHOST, PGPORT, PGUSER, PGDATABASE and
#                    PGSSLMODE, and gives each replica its port and the API token through
#                    SKILLHOST_UI_PORT / SKILLHOST_UI_TOKEN. Default: a config written into the
#                    run directory (the test guest `probe` when found, no built-in skill).
#   --skillhost BIN  the binary (env SKILLHOST; default target/debug/skillhost, else `skillhost`
#                    on PATH)
#   --port PORT      the load balancer's port on 127.0.0.1 (env LB_PORT; default: a free one)
#   --probe WASM     the `probe` test guest to serve as a skill (env PROBE_WASM; default
#                    target/wasm-guests/wasm32-wasip2/release/probe.wasm, which `cargo test`
#                    builds): its `state_set` / `state_get` tools are what the smoke check
#                    uses to see that state is shared. Ignored with --config.
#   --run-dir DIR    where everything goes (default: a new temporary directory, removed at exit)
#   --check          run deploy/local/smoke.sh against it, then stop everything: exits with
#                    the smoke check's status
#   --keep           leave the run directory (logs, data) in place at exit
#
# Needs: PostgreSQL 15's server programs (/usr/lib/postgresql/15/bin: `apt-get install
# postgresql`), nginx (`apt-get install nginx`; this script uses its binary only, never the
# system service), curl. As root, PostgreSQL runs as user `postgres` through `runuser`.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$HERE/../.." && pwd)"
PG_BIN="${PG_BIN:-/usr/lib/postgresql/15/bin}"
REPLICAS="${REPLICAS:-2}"
CONFIG="${CONFIG:-}"
SKILLHOST="${SKILLHOST:-}"
LB_PORT="${LB_PORT:-}"
PROBE_WASM="${PROBE_WASM:-}"
RUN_DIR=""
CHECK=0
KEEP=0
# Bounds: a replica with a cold compile cache compiles every skill before /readyz says 200.
READY_TIMEOUT="${READY_TIMEOUT:-180}"

usage() { sed -n '2,32p' "$0" | sed 's/^# \{0,1\}//'; }
die() { echo "replicas.sh: $*" >&2; exit 1; }
say() { echo "replicas.sh: $*" >&2; }

while [ $# -gt 0 ]; do
  case "$1" in
    --replicas) REPLICAS="${2:?}"; shift 2 ;;
    --config) CONFIG="${2:?}"; shift 2 ;;
    --skillhost) SKILLHOST="${2:?}"; shift 2 ;;
    --port) LB_PORT="${2:?}"; shift 2 ;;
    --probe) PROBE_WASM="${2:?}"; shift 2 ;;
    --run-dir) RUN_DIR="${2:?}"; shift 2 ;;
    --check) CHECK=1; shift ;;
    --keep) KEEP=1; shift ;;
    -h|--help) usage; exit 0 ;;
    *) usage >&2; die "unknown argument: $1" ;;
  esac
done

case "$REPLICAS" in ''|*[!0-9]*) die "--replicas wants a number, got '$REPLICAS'" ;; esac
[ "$REPLICAS" -ge 1 ] || die "--replicas must be at least 1"
if [ -z "$SKILLHOST" ]; then
  if [ -x "$REPO/target/debug/skillhost" ]; then SKILLHOST="$REPO/target/debug/skillhost"
  else SKILLHOST="$(command -v skillhost || true)"; fi
fi
[ -n "$SKILLHOST" ] && [ -x "$SKILLHOST" ] || die "no skillhost binary (--skillhost BIN, or cargo build)"
SKILLHOST="$(cd "$(dirname "$SKILLHOST")" && pwd)/$(basename "$SKILLHOST")"
[ -x "$PG_BIN/initdb" ] || die "no PostgreSQL 15 in $PG_BIN: apt-get install postgresql"
NGINX="$(command -v nginx || true)"
[ -n "$NGINX" ] || NGINX=/usr/sbin/nginx
[ -x "$NGINX" ] || die "no nginx: apt-get install nginx (.ci/run installs it for the tests)"
command -v curl >/dev/null || die "no curl: apt-get install curl"
if [ -n "$CONFIG" ]; then
  [ -f "$CONFIG" ] || die "no config file $CONFIG"
  CONFIG="$(cd "$(dirname "$CONFIG")" && pwd)/$(basename "$CONFIG")"
fi

# --- the run directory and the clean-up ----------------------------------------------------
OWN_RUN_DIR=0
if [ -z "$RUN_DIR" ]; then
  RUN_DIR="$(mktemp -d "${TMPDIR:-/tmp}/skillhost-replicas.XXXXXX")"
  OWN_RUN_DIR=1
fi
mkdir -p "$RUN_DIR"
RUN_DIR="$(cd "$RUN_DIR" && pwd)"
# PostgreSQL runs as another user when we are root: it must reach its directory below.
chmod 755 "$RUN_DIR"
PG_DIR="$RUN_DIR/pg"
PIDS=()
NGINX_PID=""

as_pg() {
  if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

cleanup() {
  local status=$?
  trap - EXIT INT TERM
  for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
  [ -n "$NGINX_PID" ] && kill "$NGINX_PID" 2>/dev/null || true
  # Replicas get a moment to close their database connections, then are killed.
  for _ in $(seq 50); do
    local alive=0
    for pid in "${PIDS[@]}" $NGINX_PID; do kill -0 "$pid" 2>/dev/null && alive=1; done
    [ "$alive" = 0 ] && break
    sleep 0.1
  done
  for pid in "${PIDS[@]}" $NGINX_PID; do kill -9 "$pid" 2>/dev/null || true; done
  if [ -f "$PG_DIR/data/postmaster.pid" ]; then
    as_pg "$PG_BIN/pg_ctl" -D "$PG_DIR/data" -m fast -w -t 30 stop >/dev/null 2>&1 \
      || as_pg "$PG_BIN/pg_ctl" -D "$PG_DIR/data" -m immediate -w stop >/dev/null 2>&1 || true
  fi
  if [ "$KEEP" = 1 ]; then
    say "kept $RUN_DIR"
  elif [ "$OWN_RUN_DIR" = 1 ]; then
    rm -rf "$RUN_DIR"
  fi
  say "stopped"
  exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

free_port() {
  # The kernel's choice for a socket bound to port 0, free as this returns.
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])' 2>/dev/null && return
  local port
  for _ in $(seq 100); do
    port=$((20000 + RANDOM % 30000))
    (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null || { echo "$port"; return; }
  done
  die "no free port found"
}

# --- PostgreSQL ------------------------------------------------------------------------------
PG_PORT="$(free_port)"
mkdir -p "$PG_DIR"
[ "$(id -u)" = 0 ] && chown postgres:postgres "$PG_DIR"
say "PostgreSQL: a throwaway cluster in $PG_DIR/data on 127.0.0.1:$PG_PORT"
as_pg "$PG_BIN/initdb" -D "$PG_DIR/data" -A trust -U postgres --no-sync >"$PG_DIR/initdb.log" 2>&1 \
  || { cat "$PG_DIR/initdb.log" >&2; die "initdb failed"; }
# max_connections: each replica's pool (state.postgres.pool_size, 16 by default) plus its
# listener for decisions, one per elected role it holds (schedules, a Telegram bot); see docs/deployment.md.
as_pg "$PG_BIN/pg_ctl" -D "$PG_DIR/data" -l "$PG_DIR/postgres.log" -w -t 60 \
  -o "-p $PG_PORT -c listen_addresses=127.0.0.1 -c unix_socket_directories=$PG_DIR -c max_connections=200" \
  start >/dev/null || { cat "$PG_DIR/postgres.log" >&2; die "PostgreSQL did not start"; }
psql_admin() {
  as_pg "$PG_BIN/psql" -h 127.0.0.1 -p "$PG_PORT" -U postgres -d postgres -v ON_ERROR_STOP=1 -qAt -c "$1"
}
# The role the replicas use owns its database and is nothing more: the binary creates and
# migrates its tables itself, which needs no superuser.
psql_admin "CREATE ROLE skillhost LOGIN" >/dev/null
psql_admin "CREATE DATABASE skillhost OWNER skillhost" >/dev/null

# --- the config ------------------------------------------------------------------------------
if [ -z "$CONFIG" ]; then
  CONFIG="$RUN_DIR/config.yaml"
  SKILL_PATHS="[]"
  if [ -z "$PROBE_WASM" ] && [ -f "$REPO/target/wasm-guests/wasm32-wasip2/release/probe.wasm" ]; then
    PROBE_WASM="$REPO/target/wasm-guests/wasm32-wasip2/release/probe.wasm"
  fi
  if [ -n "$PROBE_WASM" ]; then
    [ -f "$PROBE_WASM" ] || die "no file $PROBE_WASM (--probe)"
    mkdir -p "$RUN_DIR/skills/probe"
    cp "$PROBE_WASM" "$RUN_DIR/skills/probe/skill.wasm"
    echo "The probe test skill: its state_set and state_get tools use the skill's key-value state." \
      >"$RUN_DIR/skills/probe/prompt.md"
    # The skill's own namespace, shared by every session (the default is one per conversation).
    printf '[capabilities]\nstate = "skill"\n' >"$RUN_DIR/skills/probe/skill.toml"
    SKILL_PATHS="[$RUN_DIR/skills]"
  else
    say "warning: no probe.wasm (cargo test builds it; or --probe WASM): no skill with state is served"
  fi
  cat >"$CONFIG" <<EOF
# Written by deploy/local/replicas.sh: one config for every replica.
llm:
  provider: anthropic
  model: claude-sonnet-4-6
  anthropic:
    api_key: \${ANTHROPIC_API_KEY}
skills:
  paths: $SKILL_PATHS
  builtins: []
state:
  backend: postgres   # where: PGHOST, PGPORT, PGUSER, PGDATABASE, PGSSLMODE (set by the script)
  postgres:
    pool_size: 8
    connect_timeout_seconds: 5
EOF
fi
if [ -z "${ANTHROPIC_API_KEY:-}" ]; then
  # `run` needs a provider configured; nothing here calls the model (the smoke check needs none).
  export ANTHROPIC_API_KEY="not-set-runs-that-reach-the-model-fail"
fi

# --- the replicas ------------------------------------------------------------------------------
TOKEN="$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')"
PORTS=()
for i in $(seq "$REPLICAS"); do
  dir="$RUN_DIR/replica-$i"
  mkdir -p "$dir"
  port="$(free_port)"
  # Each replica: its own working directory and compile cache, its own port; the same config,
  # the same database, the same token.
  ( cd "$dir" && exec env \
      SKILLHOST_UI_PORT="$port" SKILLHOST_UI_TOKEN="$TOKEN" SKILLHOST_CACHE_DIR="$dir/cache" \
      PGHOST=127.0.0.1 PGPORT="$PG_PORT" PGUSER=skillhost PGDATABASE=skillhost PGSSLMODE=disable \
      RUST_LOG="${RUST_LOG:-skillhost=info}" \
      "$SKILLHOST" --config "$CONFIG" run --adapter api ) >"$dir/skillhost.log" 2>&1 </dev/null &
  PIDS+=("$!")
  PORTS+=("$port")
  say "replica $i: pid $!, http://127.0.0.1:$port, log $dir/skillhost.log"
done

ready() { curl -fsS -o /dev/null --max-time 3 "http://127.0.0.1:$1/readyz" 2>/dev/null; }
started=$SECONDS
for i in $(seq "$REPLICAS"); do
  port="${PORTS[$((i - 1))]}" pid="${PIDS[$((i - 1))]}"
  until ready "$port"; do
    if ! kill -0 "$pid" 2>/dev/null; then
      tail -n 30 "$RUN_DIR/replica-$i/skillhost.log" >&2 || true
      die "replica $i exited before it was ready"
    fi
    if [ $((SECONDS - started)) -ge "$READY_TIMEOUT" ]; then
      tail -n 30 "$RUN_DIR/replica-$i/skillhost.log" >&2 || true
      die "replica $i not ready after ${READY_TIMEOUT}s (/readyz: $(curl -s --max-time 3 "http://127.0.0.1:$port/readyz" || true))"
    fi
    sleep 0.2
  done
done
say "every replica is ready ($((SECONDS - started))s)"

# --- nginx -----------------------------------------------------------------------------------
[ -n "$LB_PORT" ] || LB_PORT="$(free_port)"
NGX="$RUN_DIR/nginx"
mkdir -p "$NGX/temp"
servers=""
for port in "${PORTS[@]}"; do
  servers+="    server 127.0.0.1:$port max_fails=1 fail_timeout=10s;"$'\n'
done
cat >"$NGX/nginx.conf" <<EOF
# Written by deploy/local/replicas.sh; the same settings as docs/deployment.md's.
worker_processes 1;
pid $NGX/nginx.pid;
error_log $NGX/error.log warn;
events { worker_connections 1024; }

http {
  client_body_temp_path $NGX/temp/body;
  proxy_temp_path $NGX/temp/proxy;
  fastcgi_temp_path $NGX/temp/fastcgi;
  uwsgi_temp_path $NGX/temp/uwsgi;
  scgi_temp_path $NGX/temp/scgi;
  log_format upstream '\$remote_addr "\$request" \$status upstream=\$upstream_addr time=\$request_time';
  access_log $NGX/access.log upstream;

  # Runs, decisions, answers, probes: any replica serves them (the decision routes go through
  # the shared database). least_conn: long approval-v1 streams count where they are open.
  upstream skillhost {
    least_conn;
$servers    keepalive 32;
  }
  # What a replica keeps in its own memory: /mcp sessions, and the console's lists of runs
  # and pending entries. Pinned by client address, so one client keeps meeting one replica.
  upstream skillhost_pinned {
    hash \$remote_addr consistent;
$servers    keepalive 32;
  }

  server {
    listen 127.0.0.1:$LB_PORT;
    client_max_body_size 4m;

    proxy_http_version 1.1;            # keep-alive to the replicas; chunked streams
    proxy_set_header Connection "";
    proxy_set_header Host \$host;       # /mcp answers loopback names and ui.allowed_hosts
    proxy_set_header X-Forwarded-For \$proxy_add_x_forwarded_for;
    proxy_set_header X-Forwarded-Proto \$scheme;
    proxy_buffering off;               # SSE and NDJSON go out event by event
    proxy_request_buffering off;
    proxy_cache off;
    proxy_read_timeout 3600s;          # a wait=true run is silent until it ends
    proxy_send_timeout 3600s;
    proxy_connect_timeout 2s;
    proxy_next_upstream error timeout; # a dead replica: the next one (never a 503 again)
    add_header X-Skillhost-Upstream \$upstream_addr always;   # which replica answered

    location / { proxy_pass http://skillhost; }
    location /mcp { proxy_pass http://skillhost_pinned; }
    location = / { proxy_pass http://skillhost_pinned; }
    location = /console.js { proxy_pass http://skillhost_pinned; }
    location = /console.css { proxy_pass http://skillhost_pinned; }
    location /api/runs { proxy_pass http://skillhost_pinned; }
    location = /api/activity { proxy_pass http://skillhost_pinned; }
    location = /api/approvals { proxy_pass http://skillhost_pinned; }
    location = /api/questions { proxy_pass http://skillhost_pinned; }
  }
}
EOF
"$NGINX" -t -q -p "$NGX" -c "$NGX/nginx.conf" -e "$NGX/error.log" \
  || { cat "$NGX/error.log" >&2 || true; die "nginx refused its config"; }
"$NGINX" -p "$NGX" -c "$NGX/nginx.conf" -e "$NGX/error.log" -g 'daemon off;' </dev/null &
NGINX_PID=$!
LB="http://127.0.0.1:$LB_PORT"
for _ in $(seq 100); do
  curl -fsS -o /dev/null --max-time 2 "$LB/healthz" 2>/dev/null && break
  kill -0 "$NGINX_PID" 2>/dev/null || { cat "$NGX/error.log" >&2 || true; die "nginx exited"; }
  sleep 0.1
done
curl -fsS -o /dev/null --max-time 2 "$LB/healthz" || die "nginx does not answer on $LB"

# What smoke.sh (and a person) needs to reach all of it.
cat >"$RUN_DIR/recipe.env" <<EOF
LB_URL=$LB
TOKEN=$TOKEN
REPLICA_PORTS="${PORTS[*]}"
REPLICA_PIDS="${PIDS[*]}"
PG_BIN=$PG_BIN
PG_PORT=$PG_PORT
PG_DIR=$PG_DIR
RUN_DIR=$RUN_DIR
EOF

say "load balancer: $LB (nginx pid $NGINX_PID, access log $NGX/access.log)"
say "API token: $TOKEN"
say "database: postgres://skillhost@127.0.0.1:$PG_PORT/skillhost"
echo "$LB"

if [ "$CHECK" = 1 ]; then
  status=0
  "$HERE/smoke.sh" --env "$RUN_DIR/recipe.env" || status=$?
  exit "$status"
fi
say "serving; Ctrl-C stops everything (smoke check: $HERE/smoke.sh --env $RUN_DIR/recipe.env)"
while kill -0 "$NGINX_PID" 2>/dev/null; do sleep 1; done
die "nginx exited (see $NGX/error.log)"
