#!/usr/bin/env bash
# `make e2e`: the packaged extension in a real VS Code workbench (code-server), driven in a
# headless browser. Installs what it needs on first use (scripts/e2e/setup.sh; cache outside the
# repository, ${COMPILE_LENS_E2E_CACHE:-~/.cache/compile-lens-e2e}), builds the .vsix
# (scripts/e2e/vsix.sh), then runs scripts/e2e/e2e.mjs. Screenshots and logs: build/e2e/.
#
# Knobs (environment): E2E_FILE (file in examples/ with a graph break), E2E_MEASURE_FILE (a small
# model to measure, default tiny_measure.py), E2E_ONLY (scenario names, comma-separated:
# trusted,restricted,gpu-busy), E2E_ANALYSIS_TIMEOUT_S, E2E_MEASURE_TIMEOUT_S, E2E_TIMEOUT_S.
# The workbench opens a copy of examples/, so steps that edit a file leave the repository alone.
set -euo pipefail
cd "$(dirname "$0")/../.."

started=$SECONDS
tools=$(bash scripts/e2e/setup.sh)
eval "$tools"
echo "e2e: tools ready ($((SECONDS - started))s)"

vsix_log=$(mktemp)
vsix=$(bash scripts/e2e/vsix.sh 2>"$vsix_log" | tail -1) || { cat "$vsix_log" >&2; rm -f "$vsix_log"; exit 1; }
rm -f "$vsix_log"
echo "e2e: built $vsix ($((SECONDS - started))s)"

[[ -x .venv/bin/python ]] || echo "e2e: warning: .venv/bin/python is missing (run make setup)" >&2

export E2E_NODE24 E2E_CODE_SERVER E2E_PLAYWRIGHT_DIR
export E2E_VSIX="$vsix"

# The driver stops everything it starts by PID; this trap covers the driver itself.
driver=""
cleanup() { [[ -n "$driver" ]] && kill "$driver" 2>/dev/null || true; }
trap cleanup EXIT
trap 'cleanup; exit 130' INT TERM
node scripts/e2e/e2e.mjs &
driver=$!
set +e
wait "$driver"
rc=$?
set -e
driver=""
echo "e2e: total $((SECONDS - started))s"
exit "$rc"
