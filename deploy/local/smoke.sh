#!/usr/bin/env bash
# Checks a running deploy/local/replicas.sh (or any replicas behind a load balancer, given
# the same variables) through its load balancer, and exits non-zero on the first thing wrong:
#
#   1. /readyz answers 200 {"status":"ready"} on every replica, and through the load balancer;
#   2. requests through the load balancer reach every replica (its X-Skillhost-Upstream header);
#   3. an SSE stream (/api/activity) comes through the load balancer event by event;
#   4. state is shared: a skill's key written through the load balancer's /mcp (the `probe`
#      skill's state_set) is read back by every replica's own /mcp, and is a row in PostgreSQL;
#   5. kill -9 of the replica that held that MCP session: the load balancer keeps answering
#      (every probe 200), the dead replica's session is unknown (404, as for any client whose
#      replica went away), and a new session, now on a survivor, reads the same key.
#
#   deploy/local/smoke.sh --env RUN_DIR/recipe.env [--no-state]
#
# recipe.env (written by replicas.sh) sets LB_URL, TOKEN, REPLICA_PORTS, REPLICA_PIDS, and
# PG_BIN / PG_PORT for the database check. --no-state leaves out checks 4 and 5's reads (for
# a config without the probe skill), and says so. Needs curl and python3; kills a replica.
set -euo pipefail

ENV_FILE=""
STATE=1
while [ $# -gt 0 ]; do
  case "$1" in
    --env) ENV_FILE="${2:?}"; shift 2 ;;
    --no-state) STATE=0; shift ;;
    -h|--help) sed -n '2,18p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "smoke.sh: unknown argument: $1" >&2; exit 2 ;;
  esac
done
if [ -n "$ENV_FILE" ]; then
  # shellcheck disable=SC1090
  . "$ENV_FILE"
fi
: "${LB_URL:?set LB_URL (or --env recipe.env)}" "${TOKEN:?}" "${REPLICA_PORTS:?}" "${REPLICA_PIDS:?}"
read -r -a PORTS <<<"$REPLICA_PORTS"
read -r -a PIDS <<<"$REPLICA_PIDS"
N=${#PORTS[@]}

fail() { echo "smoke.sh: FAIL: $*" >&2; exit 1; }
ok() { echo "smoke.sh: ok: $*" >&2; }
[ "$N" -ge 2 ] || fail "needs at least 2 replicas to check spreading and a replica's death (got $N)"
command -v python3 >/dev/null || fail "needs python3 (to read JSON)"
TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT

# A JSON field (python3 expression over `d`) of the JSON on stdin.
json() { python3 -c "import json, sys; d = json.load(sys.stdin); print($1)"; }

# --- 1. readiness ------------------------------------------------------------------------------
for port in "${PORTS[@]}"; do
  body="$(curl -sS --max-time 5 -w ' %{http_code}' "http://127.0.0.1:$port/readyz")" \
    || fail "replica on port $port does not answer /readyz"
  [ "$body" = '{"status":"ready"} 200' ] || fail "replica on port $port: /readyz answered $body"
done
body="$(curl -sS --max-time 5 -w ' %{http_code}' "$LB_URL/readyz")" || fail "$LB_URL does not answer"
[ "$body" = '{"status":"ready"} 200' ] || fail "through the load balancer /readyz answered $body"
ok "/readyz 200 on all $N replicas and through $LB_URL"

# --- 2. spreading ------------------------------------------------------------------------------
# The upstream that answered each request ($upstream_addr: the last one is the one that did).
upstream() { curl -sS --max-time 5 -o /dev/null -D - "$@" | tr -d '\r' | awk -F': ' 'tolower($1) == "x-skillhost-upstream" { print $2 }' | awk -F', ' '{ print $NF }'; }
: >"$TMP/seen"
for _ in $(seq $((4 * N))); do upstream "$LB_URL/healthz" >>"$TMP/seen"; done
for port in "${PORTS[@]}"; do
  grep -qx "127.0.0.1:$port" "$TMP/seen" \
    || fail "no request reached the replica on port $port: $(sort "$TMP/seen" | uniq -c | tr '\n' ' ')"
done
ok "$((4 * N)) requests spread over the replicas: $(sort "$TMP/seen" | uniq -c | tr -s ' ' | tr '\n' ';')"

# --- 3. an SSE stream through the load balancer --------------------------------------------------
# /api/activity sends `changed` at once, then keep-alives: the first event must arrive while
# the stream stays open (a buffering proxy holds it back).
set +e
curl -sS -N --max-time 3 -H "Authorization: Bearer $TOKEN" -D "$TMP/sse.head" "$LB_URL/api/activity" >"$TMP/sse.body" 2>/dev/null
code=$?
set -e
[ "$code" = 28 ] || fail "the SSE stream ended (curl exit $code) instead of staying open: $(cat "$TMP/sse.head" "$TMP/sse.body")"
grep -qi '^content-type: text/event-stream' "$TMP/sse.head" || fail "SSE: $(cat "$TMP/sse.head")"
grep -q '^event: changed' "$TMP/sse.body" || fail "no event came through the open SSE stream: $(cat "$TMP/sse.body")"
ok "an SSE stream comes through the load balancer event by event"

if [ "$STATE" = 0 ]; then
  echo "smoke.sh: SKIPPED (--no-state): the shared-state checks through /mcp" >&2
fi

# --- 4. shared state through /mcp --------------------------------------------------------------
MCP_VERSION=2025-06-18
# mcp_open BASE: a new MCP session at BASE/mcp, in SID; the replica that holds it in UP.
mcp_open() {
  local base="$1" init code
  init='{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"'$MCP_VERSION'","capabilities":{},"clientInfo":{"name":"smoke","version":"1"}}}'
  curl -sS --max-time 10 -D "$TMP/init.head" -o "$TMP/init.body" "$base/mcp" \
    -H "Authorization: Bearer $TOKEN" -H 'Content-Type: application/json' \
    -H 'Accept: application/json, text/event-stream' -d "$init" || fail "MCP initialize at $base failed"
  SID="$(tr -d '\r' <"$TMP/init.head" | awk -F': ' 'tolower($1) == "mcp-session-id" { print $2 }')"
  UP="$(tr -d '\r' <"$TMP/init.head" | awk -F': ' 'tolower($1) == "x-skillhost-upstream" { print $2 }' | awk -F', ' '{ print $NF }')"
  [ -n "$SID" ] || fail "MCP initialize at $base gave no session: $(cat "$TMP/init.head" "$TMP/init.body")"
  code="$(curl -sS --max-time 10 -o /dev/null -w '%{http_code}' "$base/mcp" -H "Authorization: Bearer $TOKEN" \
    -H 'Content-Type: application/json' -H 'Accept: application/json, text/event-stream' \
    -H "Mcp-Session-Id: $SID" -H "MCP-Protocol-Version: $MCP_VERSION" \
    -d '{"jsonrpc":"2.0","method":"notifications/initialized"}')" || fail "MCP notifications/initialized at $base failed"
  [ "$code" = 202 ] || fail "MCP notifications/initialized at $base answered $code"
}
# mcp_call BASE SID TOOL ARGS: the HTTP status in CODE and, on 200, the tool's result text in
# RESULT (a tool error or a JSON-RPC error fails the check).
mcp_call() {
  local base="$1" sid="$2" tool="$3" args="$4"
  RESULT=""
  CODE="$(curl -sS --max-time 30 -o "$TMP/call.body" -w '%{http_code}' "$base/mcp" \
    -H "Authorization: Bearer $TOKEN" -H 'Content-Type: application/json' \
    -H 'Accept: application/json, text/event-stream' -H "Mcp-Session-Id: $sid" \
    -H "MCP-Protocol-Version: $MCP_VERSION" \
    -d '{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"'"$tool"'","arguments":'"$args"'}}')" \
    || fail "MCP tools/call $tool at $base failed"
  [ "$CODE" = 200 ] || return 0
  # The answer is an SSE stream (or plain JSON): the message with id 2.
  RESULT="$(python3 - "$TMP/call.body" "$tool" <<'PY'
import json, sys
text = open(sys.argv[1]).read()
lines = [l[5:].strip() for l in text.splitlines() if l.startswith("data:")] or [text]
for line in lines:
    try:
        message = json.loads(line)
    except ValueError:
        continue
    if message.get("id") == 2:
        if "error" in message:
            sys.exit(f"{sys.argv[2]}: {message['error']}")
        result = message["result"]
        if result.get("isError"):
            sys.exit(f"{sys.argv[2]} failed: {result}")
        print(result["content"][0]["text"])
        sys.exit(0)
sys.exit(f"no answer to the call in: {text!r}")
PY
  )" || fail "MCP tools/call $tool at $base: no usable result (above)"
}

KEY="smoke-$$-$RANDOM"
VALUE="written through the load balancer at $(date +%s)"
ARGS_SET="{\"key\":\"$KEY\",\"value\":\"$VALUE\"}"
ARGS_GET="{\"key\":\"$KEY\"}"
HOLDER=""
if [ "$STATE" = 1 ]; then
  mcp_open "$LB_URL"
  sid="$SID" HOLDER="${UP#127.0.0.1:}"
  tools="$(curl -sS --max-time 10 "$LB_URL/api/skills" -H "Authorization: Bearer $TOKEN")" || fail "GET /api/skills failed"
  json '" ".join(t["name"] for s in d["skills"] for t in s["tools"])' <<<"$tools" | grep -qw probe__state_set \
    || fail "the replicas serve no probe__state_set: the config must serve the probe test skill (replicas.sh --probe WASM; cargo test builds target/wasm-guests/wasm32-wasip2/release/probe.wasm), or pass --no-state"
  mcp_call "$LB_URL" "$sid" probe__state_set "$ARGS_SET"
  [ "$CODE" = 200 ] || fail "probe__state_set through the load balancer answered $CODE: $(cat "$TMP/call.body")"
  [ "$RESULT" = '{"ok":true}' ] || fail "probe__state_set: $RESULT"
  ok "probe__state_set through the load balancer's /mcp (session on replica $HOLDER)"
  for port in "${PORTS[@]}"; do
    mcp_open "http://127.0.0.1:$port"
    mcp_call "http://127.0.0.1:$port" "$SID" probe__state_get "$ARGS_GET"
    [ "$CODE" = 200 ] || fail "probe__state_get on replica $port answered $CODE"
    got="$(json 'd["value"]' <<<"$RESULT")" || fail "probe__state_get on replica $port: $RESULT"
    [ "$got" = "$VALUE" ] || fail "replica $port reads '$got', not what was written through the load balancer"
  done
  ok "every replica's own /mcp reads the key back"
  if [ -n "${PG_PORT:-}" ] && [ -n "${PG_BIN:-}" ]; then
    sql="SELECT convert_from(value, 'UTF8') FROM skillhost_state WHERE ns = 'skill-probe' AND key = convert_to('$KEY', 'UTF8')"
    if [ "$(id -u)" = 0 ]; then as=(runuser -u postgres --); else as=(); fi
    row="$("${as[@]}" "$PG_BIN/psql" -h 127.0.0.1 -p "$PG_PORT" -U postgres -d skillhost -qAt -c "$sql")" \
      || fail "cannot read the database"
    [ "$row" = "$VALUE" ] || fail "the database holds '$row' for $KEY"
    ok "the key is a row of skillhost_state in PostgreSQL"
  fi
fi

# --- 5. a replica dies -------------------------------------------------------------------------
victim=0
if [ -n "$HOLDER" ]; then
  for i in "${!PORTS[@]}"; do [ "${PORTS[$i]}" = "$HOLDER" ] && victim=$i; done
fi
vport="${PORTS[$victim]}" vpid="${PIDS[$victim]}"
kill -9 "$vpid" || fail "cannot kill replica pid $vpid"
for _ in $(seq 50); do kill -0 "$vpid" 2>/dev/null || break; sleep 0.1; done
kill -0 "$vpid" 2>/dev/null && fail "replica pid $vpid still runs after kill -9"
ok "killed replica $vport (pid $vpid) with kill -9"
: >"$TMP/after"
for _ in $(seq $((4 * N))); do
  status="$(curl -sS --max-time 5 -o /dev/null -w '%{http_code}' "$LB_URL/readyz")" || fail "the load balancer stopped answering"
  [ "$status" = 200 ] || fail "through the load balancer /readyz answered $status after a replica died"
  upstream "$LB_URL/readyz" >>"$TMP/after"
done
grep -qx "127.0.0.1:$vport" "$TMP/after" && fail "a request was answered by the dead replica $vport?"
for i in "${!PORTS[@]}"; do
  [ "$i" = "$victim" ] && continue
  curl -fsS -o /dev/null --max-time 5 "http://127.0.0.1:${PORTS[$i]}/readyz" || fail "replica ${PORTS[$i]} is not ready"
done
ok "$((8 * N)) requests after the death: every one 200, from the survivors"
if [ "$STATE" = 1 ]; then
  mcp_call "$LB_URL" "$sid" probe__state_get "$ARGS_GET"
  [ "$CODE" = 404 ] || fail "the dead replica's MCP session answered $CODE through the load balancer, not 404"
  mcp_open "$LB_URL"
  [ "${UP#127.0.0.1:}" != "$vport" ] || fail "a new MCP session went to the dead replica?"
  mcp_call "$LB_URL" "$SID" probe__state_get "$ARGS_GET"
  [ "$CODE" = 200 ] || fail "probe__state_get on a new session answered $CODE"
  [ "$(json 'd["value"]' <<<"$RESULT")" = "$VALUE" ] || fail "after the death the key reads $RESULT"
  ok "its MCP session is gone (404); a new session (on $UP) reads the key written before"
fi
echo "smoke.sh: all checks passed" >&2
