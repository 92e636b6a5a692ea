#!/bin/sh
# The steps of xrunlab-suite.yaml: measure (`xrunlab suite`), write LAVA result lines
# (`--export lava=…`), send each as `lava-test-case`. Outside LAVA (no lava-test-case on PATH)
# the calls are printed instead, one per line, so the same steps can be checked anywhere.
#
#   xrunlab-suite.sh [-a SUITE_ARGS] [-r EXISTING_SUITE_DIR] [-o OUTPUT]
set -eu
args="--quick"
results=""
output="./output"
while getopts "a:r:o:" opt; do
  case "$opt" in
    a) args="$OPTARG" ;;
    r) results="$OPTARG" ;;
    o) output="$OPTARG" ;;
    *) echo "usage: $0 [-a SUITE_ARGS] [-r SUITE_DIR] [-o OUTPUT]" >&2; exit 2 ;;
  esac
done
xrunlab="${XRUNLAB:-xrunlab}"
mkdir -p "$output"
result_file="$output/result.txt"
if [ -n "$results" ]; then
  "$xrunlab" export --format lava "$results" -o "$result_file" -q
else
  # A failing stage or verdict is a result to report (exit 1), not a broken test run; only
  # usage errors (2) and runs that could not measure (3) stop here.
  # shellcheck disable=SC2086 # SUITE_ARGS is a list of options
  rc=0
  "$xrunlab" suite $args -q -o "$output/suite" --export "lava=$result_file" || rc=$?
  if [ "$rc" -ge 2 ]; then
    echo "xrunlab suite failed (exit $rc)" >&2
    exit "$rc"
  fi
fi
send() {
  if command -v lava-test-case >/dev/null 2>&1; then
    lava-test-case "$@"
  else
    echo "lava-test-case $*"
  fi
}
while read -r case result measurement units; do
  [ -n "$case" ] || continue
  if [ -n "${measurement:-}" ]; then
    send "$case" --result "$result" --measurement "$measurement" --units "$units"
  else
    send "$case" --result "$result"
  fi
done < "$result_file"
