#!/usr/bin/env bash
# Every performance figure of issue 11 in one table, each ratio measured in the same run
# (see docs/benchmarks.md for how to read it).
#
#   scripts/bench.sh                  # every bench
#   scripts/bench.sh sandbox start    # some of them
#
# Benches: sandbox (targets 1, 2, 6: host/benches/sandbox.rs), start (target 5:
# host/benches/start.rs), mcp_roundtrip (target 3: host/benches/mcp_roundtrip.rs) and
# api_load (target 4: host/benches/api_load.rs); replicas (issue 29: host/benches/replicas.rs,
# SQLite against PostgreSQL and two replicas; starts a throwaway PostgreSQL 15). Lines a bench prints as table rows
# (`| ... |`) join the table; anything else it prints follows under its name. A bench's
# stderr goes to target/bench-logs/<bench>.log.
set -euo pipefail
cd "$(dirname "$0")/.."
export SKILLHOST_OFFLINE="${SKILLHOST_OFFLINE:-1}"

if [ $# -gt 0 ]; then benches=("$@"); else benches=(sandbox start mcp_roundtrip api_load replicas); fi
# BENCH_CARGO_PROFILE=dev measures with the dev profile's optimised dependencies instead of a
# release build (where one does not fit the time; say so next to the figures).
profile=()
[ -n "${BENCH_CARGO_PROFILE:-}" ] && profile=(--profile "$BENCH_CARGO_PROFILE")

# Build everything first, so no compiler shares the cores with a measurement.
for bench in "${benches[@]}"; do
  cargo bench -q "${profile[@]}" -p skillhost --bench "$bench" --no-run
done

mkdir -p target/bench-logs
rows=""
details=""
for bench in "${benches[@]}"; do
  echo "running $bench..." >&2
  log="target/bench-logs/$bench.log"
  if ! out=$(BENCH_NO_HEADER=1 cargo bench -q "${profile[@]}" -p skillhost --bench "$bench" 2>"$log"); then
    echo "$bench failed (see $log):" >&2
    tail -20 "$log" >&2
    exit 1
  fi
  rows+=$(grep '^| ' <<<"$out" || true)$'\n'
  rest=$(grep -v '^| ' <<<"$out" | sed '/^$/d' || true)
  [ -n "$rest" ] && details+=$'\n'"### $bench"$'\n\n```\n'"$rest"$'\n```\n'
done

cpu=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)
echo "skillhost benchmarks: $(nproc) cores ($cpu), $(uname -sr), $(date -u +%Y-%m-%d), profile ${BENCH_CARGO_PROFILE:-bench}"
echo
echo "| # | figure | p50 | p99 | ratio (same run) | goal |"
echo "|---|---|---:|---:|---:|---|"
printf '%s' "$rows" | sed '/^$/d'
printf '%s' "$details"
