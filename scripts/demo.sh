#!/usr/bin/env bash
# The main job at this stage: build the example skills from source, then call
# http_checker__check_url through the sandbox against a server on 127.0.0.1.
set -euo pipefail
cd "$(dirname "$0")/.."

cargo build -p skillhost
skillhost=target/debug/skillhost
# The JavaScript example (skills/unit_convert) builds with componentize-js, pinned in sdk-js/.
[ -f sdk-js/node_modules/@bytecodealliance/preview2-shim/package.json ] \
  || npm ci --prefix sdk-js --no-audit --no-fund --silent
export SKILLHOST_COMPONENTIZE_JS="${SKILLHOST_COMPONENTIZE_JS:-$PWD/sdk-js}"

# Every skill folder: the ones with a prompt (skills/target/ is the Rust examples' Cargo
# target directory, made by the first build).
skill_dirs=()
for dir in skills/*/; do
  if [ -f "$dir/prompt.md" ] || [ -f "$dir/SKILL.md" ]; then skill_dirs+=("$dir"); fi
done
# The example config names these; the demo makes no LLM request and serves no API, so they
# may be empty (set, so that loading the config does not warn that they are unset).
export ANTHROPIC_API_KEY="${ANTHROPIC_API_KEY-}" SKILLHOST_UI_TOKEN="${SKILLHOST_UI_TOKEN-}"
# Built and validated under the example config, whose grants the skills' manifests ask for.
"$skillhost" --config config.example.yaml skill build "${skill_dirs[@]}"
"$skillhost" --config config.example.yaml skill list

python3 -m http.server 8765 --bind 127.0.0.1 --directory docs >/dev/null 2>&1 &
server=$!
trap 'kill $server 2>/dev/null' EXIT
for _ in $(seq 50); do (exec 3<>/dev/tcp/127.0.0.1/8765) 2>/dev/null && break; sleep 0.1; done

"$skillhost" --config config.example.yaml call http_checker__check_url '{"url": "http://127.0.0.1:8765/"}'
