#!/bin/bash
# Wall times of a CI run of `compile-lens check` over examples/ (BENCHMARKS.md, "A CI run"):
# with the recompile sweep, breaks only, and each re-run from the warm result cache.
# BEFORE=path/to/an/older/checkout/server adds the same command run by that code.
set -u
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
t() {
  local label=$1; shift
  local s e rc; s=$(date +%s.%N); "$@" >/dev/null 2>&1; rc=$?; e=$(date +%s.%N)
  printf "%-58s rc=%s %6.1f s\n" "$label" "$rc" "$(echo "$e - $s" | bc)"
}
if [ -n "${BEFORE:-}" ]; then
  t "before: check examples/ --no-benchmark" env COMPILE_LENS_CACHE_DIR="$(mktemp -d)" PYTHONSAFEPATH=1 \
    PYTHONPATH="$BEFORE" "$PY" -c "import sys; from compile_lens.cli.main import main; sys.exit(main(['check', 'examples/', '--no-benchmark', '-q']))"
fi
c=$(mktemp -d)
t "check examples/ --no-benchmark (empty cache)" env COMPILE_LENS_CACHE_DIR="$c" "$PY" -m compile_lens.cli check examples/ --no-benchmark -q
t "the same again (cached re-run)" env COMPILE_LENS_CACHE_DIR="$c" "$PY" -m compile_lens.cli check examples/ --no-benchmark -q
c=$(mktemp -d)
t "--no-benchmark --no-recompiles (empty cache)" env COMPILE_LENS_CACHE_DIR="$c" "$PY" -m compile_lens.cli check examples/ --no-benchmark --no-recompiles -q
t "--no-benchmark --no-recompiles (cached re-run)" env COMPILE_LENS_CACHE_DIR="$c" "$PY" -m compile_lens.cli check examples/ --no-benchmark --no-recompiles -q
