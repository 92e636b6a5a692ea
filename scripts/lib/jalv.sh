# Shared by scripts/bench-jack-peer and scripts/bench-watch: LV2 plugins as JACK clients of
# their own (jalv, one instance each), the way a user's session runs them. Source it, then
# call jalv_init once; jalv_stop_all on exit. Needs BIN (the xrunlab binary) and OUT.

# jalv's console quits at the end of its standard input: every client reads a FIFO that the
# calling script holds open and never writes.
jalv_init() {
  JALV_FIFO=$(mktemp -u "${TMPDIR:-/tmp}/xrl-jalv-$$.XXXX"); mkfifo "$JALV_FIFO"
  exec 3<>"$JALV_FIFO"
  JALVS=()
}

# jalv_start NAME URI: one client, unpinned, in its own session (jalv signals its process
# group when it quits).
jalv_start() {
  setsid jalv -n "$1" "$2" <"$JALV_FIFO" >>"$OUT/jalv.log" 2>&1 &
  JALVS+=($!)
}

# jalv quits on SIGTERM only after its next line of input, which never comes: SIGKILL (the
# server drops a dead client by itself).
jalv_stop_all() {
  [ ${#JALVS[@]} -gt 0 ] || return 0 # a bare `wait` would wait for jackd too
  # `|| true`: a killed client's status is not an error, also under `set -e` in a trap.
  kill -KILL "${JALVS[@]}" 2>/dev/null || true
  wait "${JALVS[@]}" 2>/dev/null || true
  JALVS=()
}

jalv_cleanup() {
  jalv_stop_all
  exec 3>&-; rm -f "$JALV_FIFO" || true
}

# plugin_cost URI FRAMES: the plugin's median cost per period in ns, one instance, silence
# in (as jalv's unconnected inputs get), from `xrunlab plugins bench`.
plugin_cost() {
  "$BIN" plugins bench --signal silence --buffer "$2" --duration 2s "lv2:$1" -q -o "$OUT/bench.json" \
    >>"$OUT/log.txt" 2>&1 || return 1
  python3 - "$OUT/bench.json" "$2" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))['results'][0]
print(int(float(r['ns_per_frame']) * int(sys.argv[2])))
PY
}

# instances_for LOAD PERIOD_NS COST_NS: how many instances make LOAD % of a period (≥ 2).
instances_for() {
  python3 -c "import sys; print(max(2, round($1 / 100 * $2 / $3)))"
}
