#!/bin/sh
# The steps of xrunlab.yaml: one `xrunlab run` per buffer size (with BACKGROUND_CMD running
# beside them when given), their results as LAVA result lines (output/result.txt, through
# `xrunlab export --format lava`), each line sent as `lava-test-case`. Outside LAVA (no
# lava-test-case on PATH) the calls are printed instead, so the steps can be checked anywhere.
#
#   xrunlab.sh [-d DURATION] [-b "BUFFERS"] [-s STRESS] [-w BACKGROUND_CMD] [-D DRIVER] [-o OUTPUT]
set -eu
duration="60s"
buffers="64 128 256"
stress="none"
background=""
driver="virtual"
output="./output"
usage() {
  echo "usage: $0 [-d DURATION] [-b BUFFERS] [-s STRESS] [-w BACKGROUND_CMD] [-D DRIVER] [-o OUTPUT]" >&2
  exit 2
}
while getopts "d:b:s:w:D:o:" opt; do
  case "$opt" in
    d) duration="$OPTARG" ;;
    b) buffers="$OPTARG" ;;
    s) stress="$OPTARG" ;;
    w) background="$OPTARG" ;;
    D) driver="$OPTARG" ;;
    o) output="$OPTARG" ;;
    *) usage ;;
  esac
done
[ -n "$buffers" ] || usage
xrunlab="${XRUNLAB:-xrunlab}"
mkdir -p "$output/runs"
result_file="$output/result.txt"

bg_pid=""
stop_background() {
  if [ -n "$bg_pid" ]; then
    # Its own process group (setsid below), so the command's children stop with it.
    kill -TERM "-$bg_pid" 2>/dev/null || kill "$bg_pid" 2>/dev/null || true
    wait "$bg_pid" 2>/dev/null || true
    bg_pid=""
  fi
}
trap stop_background EXIT INT TERM
if [ -n "$background" ]; then
  # shellcheck disable=SC2086 # BACKGROUND_CMD is a command line
  setsid sh -c "$background" >"$output/background.log" 2>&1 &
  bg_pid=$!
fi

for b in $buffers; do
  # An xrun is a result to report (exit 1), not a broken test run; usage errors (2) and
  # runs that could not measure (3) stop here.
  rc=0
  "$xrunlab" run --driver "$driver" --buffer "$b" --duration "$duration" --stress "$stress" \
    -q -o "$output/runs/run-$b.json" || rc=$?
  if [ "$rc" -ge 2 ]; then
    echo "xrunlab run --buffer $b failed (exit $rc)" >&2
    exit "$rc"
  fi
done
stop_background
"$xrunlab" export --format lava "$output/runs" -o "$result_file" -q

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
