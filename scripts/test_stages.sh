#!/usr/bin/env bash
# `make test`: the stages in turn (make lint, pytest, ts-test, e2e …), stopping at the first that
# fails as make would, then each stage's time and the total: the suite has a budget (20 minutes on
# the 2-core CI machine) and this is where its spending shows.
#
# A stage written `a,b` runs a and b side by side: the first in the foreground (its output live),
# the others into build/stage-NAME.log, printed when the first ends. `pytest,e2e`: the e2e test
# waits mostly on a browser and a language server, so it costs pytest's workers less CPU than its
# own three minutes would cost the total run one after the other.
set -uo pipefail
cd "$(dirname "$0")/.."

started=$SECONDS
rc=0
times=()
pids=()
trap 'for p in "${pids[@]}"; do kill -- "-$p" 2>/dev/null; done; exit 130' INT TERM

record() {  # name, began, status
  local verdict=ok
  [[ $3 == 0 ]] || verdict="FAILED (exit $3)"
  times+=("$(printf '%-8s %5ss  %s' "$1" $((SECONDS - $2)) "$verdict")")
}

for stage in "$@"; do
  IFS=, read -r -a group <<< "$stage"
  first=${group[0]}
  pids=() logs=() names=()
  mkdir -p build
  for name in "${group[@]:1}"; do
    log="build/stage-$name.log"
    rm -f "$log.status"  # a stage that dies before writing its own must not read an earlier run's
    echo "make test: $name runs beside $first (its output: $log, printed after)"
    # its own process group, so that an interrupt stops it with everything it started
    setsid bash -c 'make --no-print-directory "$1" > "$2" 2>&1; echo "$? $SECONDS" > "$2.status"' _ "$name" "$log" &
    pids+=($!) logs+=("$log") names+=("$name")
  done
  began=$SECONDS
  make --no-print-directory "$first"
  status=$?
  record "$first" "$began" "$status"
  [[ $status == 0 ]] || rc=$status
  for i in "${!pids[@]}"; do
    wait "${pids[$i]}"
    echo "===== ${names[$i]} (beside $first) ====="
    cat "${logs[$i]}"
    read -r s took < "${logs[$i]}.status"
    verdict=ok
    [[ $s == 0 ]] || { verdict="FAILED (exit $s)"; [[ $rc != 0 ]] || rc=$s; }
    times+=("$(printf '%-8s %5ss  %s (beside %s)' "${names[$i]}" "$took" "$verdict" "$first")")
  done
  [[ $rc == 0 ]] || break
done
echo "make test: time per stage"
printf '  %s\n' "${times[@]}"
printf '  %-8s %5ss\n' total $((SECONDS - started))
exit $rc
