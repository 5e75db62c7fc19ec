#!/usr/bin/env bash
# `make test`: the stages in turn (make lint, pytest, ts-test, e2e), stopping at the first that
# fails as make would, then each stage's time and the total: the suite has a budget (20 minutes on
# the 2-core CI machine) and this is where its spending shows.
set -uo pipefail
cd "$(dirname "$0")/.."

started=$SECONDS
rc=0
times=()
for stage in "$@"; do
  began=$SECONDS
  make --no-print-directory "$stage"
  status=$?
  verdict=ok
  [[ $status == 0 ]] || verdict="FAILED (exit $status)"
  times+=("$(printf '%-8s %5ss  %s' "$stage" $((SECONDS - began)) "$verdict")")
  if [[ $status != 0 ]]; then
    rc=$status
    break
  fi
done
echo "make test: time per stage"
printf '  %s\n' "${times[@]}"
printf '  %-8s %5ss\n' total $((SECONDS - started))
exit $rc
