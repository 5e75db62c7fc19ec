#!/usr/bin/env bash
# Copies the latest `make e2e` screenshots (build/e2e/, or $E2E_OUT) over the ones the README and
# the docs show (docs/images/), so the pictures are of the extension as it is. Run after `make e2e`;
# a shot the run did not take (an E2E_ONLY run, a failed step) is said and left as it was.
set -euo pipefail
cd "$(dirname "$0")/../.."
out="${E2E_OUT:-build/e2e}"
# e2e shot (scenario-label.png) -> the picture it becomes
shots=(
  "trusted-3-hover.png:docs/images/compile-lens-hover.png"
  "trusted-hover-card.png:docs/images/compile-lens-measured.png"
  "report.png:docs/images/compile-lens-report.png"
  "trusted-captured-graph.png:docs/images/compile-lens-graphs.png"
  "trusted-kernels.png:docs/images/compile-lens-kernels.png"
)
missing=0
for pair in "${shots[@]}"; do
  from="$out/${pair%%:*}" to="${pair#*:}"
  if [[ -f "$from" ]]; then
    cp "$from" "$to" && echo "screenshots: $from -> $to"
  else
    echo "screenshots: no $from (run make e2e first); $to left as it was" >&2
    missing=1
  fi
done
exit $missing
