#!/bin/sh
# gpumon nvidia-smi textfile sidecar: runs nvidia-smi every interval and writes its readings as
# node_exporter textfile-collector metrics, so GPUs whose DCGM fields are empty (the field guide's
# "N/A" temperature case) keep a reading. Read by gpumon's source preset `nvidia-smi-textfile`.
# POSIX sh (dash, busybox ash, bash --posix) plus awk, timeout,
# setsid, mv, sed, tr, head, tail, wc, date: all busybox applets; no bash-isms.
#
# What breaks such scripts in the field, and what this one does instead:
# * "[N/A]", "[Not Supported]", "[Unknown Error]", "ERR!" in a column: a textfile with a
#   non-number makes node_exporter drop the whole file (microsoft/pai#949, "expected float as
#   value, got N/A"), so that sample is left out and counted in
#   gpumon_nvidia_smi_unavailable_samples{field,reason}. So is a number Prometheus would not
#   parse (NaN and Inf words, hundreds of digits: out of a float's range).
# * nvidia-smi hangs under load (microsoft/pai#842) or is slow (utkuozdemir/nvidia_gpu_exporter#68):
#   it runs under `timeout` in a process group of its own, and whatever is left of that group
#   when the query ends is killed (busybox `timeout` signals only the command itself, not a child
#   it forked). A run that times out writes no readings, gpumon_nvidia_smi_up 0 and the time of
#   the last success, never the previous readings (microsoft/pai#889).
# * a field this driver does not know: nvidia-smi exits non-zero with
#   'Field "temperature.memory" is not a valid field to query.' (congard/nvidia-system-monitor-qt#20,
#   CoHDI/composable-resource-operator#37); the field is dropped for the life of the process,
#   reported as gpumon_nvidia_smi_field_unknown{field}, and the query runs again without it.
# * a GPU missing from one run: every run rewrites the whole file, so its series go absent (no
#   stale values) and gpumon_nvidia_smi_gpus drops.
# * garbage instead of rows: the output is parsed in one awk pass (time linear in its size); at
#   most MAX_OUTPUT bytes are read, a line longer than MAX_LINE is skipped and counted in
#   gpumon_nvidia_smi_skipped_rows, as is a row cut short (no final newline) or a repeated GPU.
# * a full disk: a textfile cut short fails to parse and node_exporter drops every reading of the
#   node. The file is written to a temporary name in the same folder, ends in a marker line giving
#   its line count, and is checked (marker, final newline, the text format's line shapes, one block
#   per metric, no repeated series) before it is renamed over the old one, so node_exporter never
#   reads half a file (its textfile collector reads only *.prom). A file that fails the check is
#   removed, the old one stays, and the script exits 2: the pod restarts (visible as restarts or
#   CrashLoopBackOff) and the old file's gpumon_nvidia_smi_last_run_timestamp_seconds ages, which
#   the rendered rules treat as a dead sidecar.
#
# Environment: GPUMON_TEXTFILE_DIR (folder node_exporter's --collector.textfile.directory reads),
# GPUMON_INTERVAL and GPUMON_TIMEOUT (whole seconds), NODE_NAME (downward API spec.nodeName; the
# Hostname label, as dcgm-exporter sets it), GPUMON_NVIDIA_SMI (the command, default nvidia-smi).
# Argument --once: one run, exit status 0 when nvidia-smi succeeded, 1 when it did not, 2 when
# the file could not be written.
# Units follow nvidia-smi --help-query-gpu: temperatures in degrees C, power.draw in W,
# utilization.* in percent (written as a 0-1 ratio), memory.* in MiB (written as bytes), clocks in
# MHz (written as hertz).

set -u
set -f   # no globbing: nvidia-smi output and help texts are data
LC_ALL=C  # awk counts and matches bytes: nvidia-smi output is data, not text in the pod's locale
export LC_ALL

DIR=${GPUMON_TEXTFILE_DIR:-/var/lib/node_exporter/textfile_collector}
INTERVAL=${GPUMON_INTERVAL:-15}
TIMEOUT=${GPUMON_TIMEOUT:-10}
SMI=${GPUMON_NVIDIA_SMI:-nvidia-smi}
OUT=$DIR/gpumon-nvidia-smi.prom
TMP=$DIR/.gpumon-nvidia-smi.prom.$$
CSV=$DIR/.gpumon-nvidia-smi.csv.$$
ERRF=$DIR/.gpumon-nvidia-smi.err.$$
MAX_LINE=4096        # bytes of one output line read (a GPU row of these fields is about 150)
MAX_OUTPUT=65536     # bytes of nvidia-smi output read per run (400 such rows; a node has up to 16 GPUs)
MARKER="# gpumon-textfile-end lines="

# the fields asked for, in column order after uuid,index; a field the driver rejects is removed
FIELDS="temperature.gpu temperature.memory power.draw utilization.gpu utilization.memory memory.used memory.free clocks.current.sm clocks.current.memory"
UNKNOWN=""
LAST_SUCCESS=0
GROUP=""
SETSID=""
command -v setsid >/dev/null 2>&1 && SETSID=setsid

# printable ASCII only (Kubernetes node names are DNS names), "\" and '"' escaped for a label value
NODE=$(printf '%s' "${NODE_NAME:-$(uname -n)}" | tr -cd ' -~' | head -c 253 | sed 's/[\\"]/\\&/g')

log() { printf 'gpumon-nvidia-smi: %s\n' "$*" >&2; }

# field -> "metric conversion help"; conversion: none, ratio (percent), bytes (MiB), hertz (MHz)
describe() {
  case $1 in
    temperature.gpu) echo "gpumon_nvidia_smi_temperature_gpu_celsius none GPU core temperature (nvidia-smi temperature.gpu, degrees C)." ;;
    temperature.memory) echo "gpumon_nvidia_smi_temperature_memory_celsius none HBM memory temperature (nvidia-smi temperature.memory, degrees C)." ;;
    power.draw) echo "gpumon_nvidia_smi_power_draw_watts none Board power draw (nvidia-smi power.draw, W)." ;;
    utilization.gpu) echo "gpumon_nvidia_smi_utilization_gpu_ratio ratio Share of the sample period a kernel ran (nvidia-smi utilization.gpu, percent / 100)." ;;
    utilization.memory) echo "gpumon_nvidia_smi_utilization_memory_ratio ratio Share of the sample period device memory was read or written (nvidia-smi utilization.memory, percent / 100)." ;;
    memory.used) echo "gpumon_nvidia_smi_memory_used_bytes bytes Memory allocated by active contexts (nvidia-smi memory.used, MiB x 1048576)." ;;
    memory.free) echo "gpumon_nvidia_smi_memory_free_bytes bytes Free memory (nvidia-smi memory.free, MiB x 1048576)." ;;
    clocks.current.sm) echo "gpumon_nvidia_smi_clocks_current_sm_hertz hertz SM clock (nvidia-smi clocks.current.sm, MHz x 1e6)." ;;
    clocks.current.memory) echo "gpumon_nvidia_smi_clocks_current_memory_hertz hertz Memory clock (nvidia-smi clocks.current.memory, MHz x 1e6)." ;;
    *) return 1 ;;
  esac
}

sweep() {  # kills what is left of the query's process group (busybox timeout spares nvidia-smi's children)
  # "kill -KILL -pgid": the one form dash, bash and busybox all take
  if [ -n "$GROUP" ] && [ -n "$SETSID" ]; then kill -KILL "-$GROUP" 2>/dev/null; fi
  GROUP=""
}

run_smi() {  # nvidia-smi --query-gpu=$1 under timeout in a new process group -> $CSV, $ERRF, RC
  if [ -n "$SETSID" ]; then
    setsid timeout -k 2 "$TIMEOUT" "$SMI" --query-gpu="$1" --format=csv,noheader,nounits >"$CSV" 2>"$ERRF" &
  else
    timeout -k 2 "$TIMEOUT" "$SMI" --query-gpu="$1" --format=csv,noheader,nounits >"$CSV" 2>"$ERRF" &
  fi
  GROUP=$!   # a background job of a non-interactive shell is no group leader, so setsid does not fork
  wait "$GROUP"
  RC=$?
  sweep
}

unknown_field() {  # the field named by 'Field "x" is not a valid field to query', if any
  cat "$CSV" "$ERRF" | head -c "$MAX_OUTPUT" | awk -v max="$MAX_LINE" '
    length($0) <= max && match($0, /Field "[A-Za-z0-9._]+" is not a valid field to query/) {
      s = substr($0, RSTART + 7, RLENGTH); sub(/".*/, "", s); print s; exit
    }'
}

query() {  # runs nvidia-smi into $CSV/$ERRF, dropping fields it rejects; sets RC
  while :; do
    list=uuid,index
    for f in $FIELDS; do list=$list,$f; done
    run_smi "$list"
    [ "$RC" -eq 0 ] && return 0
    bad=$(unknown_field)
    [ -n "$bad" ] || return 0
    kept=""
    found=no
    for f in $FIELDS; do
      if [ "$f" = "$bad" ]; then found=yes; else kept="$kept $f"; fi
    done
    [ "$found" = yes ] || return 0          # uuid or index rejected, or a field not asked for
    log "nvidia-smi does not know field $bad; querying without it"
    FIELDS=${kept# }
    UNKNOWN="$UNKNOWN $bad"
    [ -n "$FIELDS" ] || return 0
  done
}

timed_out() {  # exit status $1 of timeout: 124 (GNU coreutils), 143 (busybox: TERM), 137 (KILL after -k)
  case $1 in 124|137|143) return 0 ;; esac
  return 1
}

# The whole file from nvidia-smi's output on stdin, in one pass: readings per field, the status
# series, then the marker line with the count of lines before it. Environment: GPUMON_DESC
# (describe lines joined by "|"), GPUMON_NODE (escaped), GPUMON_UNKNOWN; -v: up rc now last
# partial (1: the last line has no newline, it was cut short) max marker.
PRODUCE='
function trim(s,   i, j) {
  i = 1; j = length(s)
  while (i <= j && substr(s, i, 1) == " ") i++
  while (j >= i && substr(s, j, 1) == " ") j--
  return substr(s, i, j - i + 1)
}
function number(s) {  # a float Prometheus parses: 24 characters at most, an exponent of 2 digits
  return length(s) <= 24 && s ~ /^-?([0-9]+[.]?[0-9]*|[.][0-9]+)([eE][-+]?[0-9][0-9]?)?$/
}
function reason(s) {
  if (s == "[N/A]" || s == "N/A") return "not_available"
  if (s == "[Not Supported]" || s == "Not Supported") return "not_supported"
  if (s == "[Unknown Error]" || s == "Unknown Error") return "unknown_error"
  if (s == "ERR!") return "err"
  return "invalid"
}
function convert(s, conv,   z) {  # reading s -> V in the written unit, else 0 and the reason in R
  if (!number(s)) { R = reason(s); return 0 }
  if (conv == "none") { V = s; return 1 }
  R = "invalid"
  if (s !~ /^[0-9]+$/) return 0            # the rest are whole numbers
  z = s; sub(/^0+/, "", z); if (z == "") z = "0"
  if (conv == "ratio") {
    if (length(z) > 3 || z + 0 > 100) return 0
    V = z == "100" ? "1" : (length(z) == 1 ? "0.0" z : "0." z)
  } else if (conv == "bytes") {
    if (length(z) > 12) return 0
    V = sprintf("%.0f", z * 1048576)
  } else if (conv == "hertz") {
    if (length(z) > 9) return 0
    V = sprintf("%.0f", z * 1000000)
  } else return 0
  return 1
}
function row(line,   n, c, i, u, x) {  # one output line: a GPU row is kept, anything else counted
  if (length(line) > max) { long++; skipped++; return }
  sub(/\r$/, "", line)
  if (line == "") return
  n = split(line, c, ",")
  u = trim(c[1]); x = trim(c[2])
  if (n != ncol || u !~ /^[A-Za-z0-9-]+$/ || length(u) > 128 || x !~ /^[0-9]+$/ || length(x) > 9 || ((u, x) in seen)) {
    skipped++; return
  }
  seen[u, x] = 1; gpus++; U[gpus] = u; X[gpus] = x
  for (i = 1; i <= nf; i++) C[gpus, i] = trim(c[i + 2])
}
function emit(s) { print s; lines++ }
function gauge(name, help) { emit("# HELP " name " " help); emit("# TYPE " name " gauge") }
function status(name, help, value) { gauge(name, help); emit(name "{Hostname=\"" node "\"} " value) }
BEGIN {
  nf = split(ENVIRON["GPUMON_DESC"], d, "|")
  for (i = 1; i <= nf; i++) {
    split(d[i], w, " "); fld[i] = w[1]; met[i] = w[2]; cv[i] = w[3]
    hlp[i] = substr(d[i], length(w[1] w[2] w[3]) + 4)
  }
  ncol = nf + 2; node = ENVIRON["GPUMON_NODE"]; held = 0; gpus = 0; skipped = 0; long = 0; lines = 0
  split("not_available not_supported unknown_error err invalid", reasons, " ")
}
{ if (held) row(prev); prev = $0; held = 1 }
END {
  if (held) { if (partial) skipped++; else row(prev) }
  for (i = 1; i <= nf; i++) {
    gauge(met[i], hlp[i])
    for (r = 1; r <= gpus; r++) {
      if (convert(C[r, i], cv[i])) emit(met[i] "{UUID=\"" U[r] "\",gpu=\"" X[r] "\",Hostname=\"" node "\"} " V)
      else count[i, R]++
    }
  }
  status("gpumon_nvidia_smi_up", "1 when the last nvidia-smi query exited 0 within the timeout, else 0.", up)
  status("gpumon_nvidia_smi_exit_code", "Exit status of the last nvidia-smi query (124 or 143: timed out, 137: killed after the timeout).", rc)
  status("gpumon_nvidia_smi_last_run_timestamp_seconds", "When the last query started (Unix time).", now)
  status("gpumon_nvidia_smi_last_success_timestamp_seconds", "When the last successful query started (Unix time; 0: none since the sidecar started).", last)
  status("gpumon_nvidia_smi_gpus", "GPU rows with a valid UUID and index in the last query.", gpus)
  status("gpumon_nvidia_smi_skipped_rows", "Output lines of the last query that were not a GPU row (error text, truncated, overlong or repeated rows).", skipped)
  first = 1
  for (i = 1; i <= nf; i++) for (k = 1; k <= 5; k++) if (count[i, reasons[k]] > 0) {
    if (first) gauge("gpumon_nvidia_smi_unavailable_samples", "Samples of the last query left out because nvidia-smi printed no number ([N/A], [Not Supported], [Unknown Error], ERR!) or one Prometheus cannot take (invalid).")
    first = 0
    emit("gpumon_nvidia_smi_unavailable_samples{Hostname=\"" node "\",field=\"" fld[i] "\",reason=\"" reasons[k] "\"} " count[i, reasons[k]])
  }
  k = split(ENVIRON["GPUMON_UNKNOWN"], unknown, " ")
  if (k) gauge("gpumon_nvidia_smi_field_unknown", "1 for a field this driver'"'"'s nvidia-smi rejects (not a valid field to query); it is no longer asked for.")
  for (i = 1; i <= k; i++) emit("gpumon_nvidia_smi_field_unknown{Hostname=\"" node "\",field=\"" unknown[i] "\"} 1")
  if (long) printf "gpumon-nvidia-smi: skipped %d output lines longer than %d bytes\n", long, max > "/dev/stderr"
  print marker lines
}'

# Checks the written file before it replaces the old one; prints what is wrong. The text
# exposition format's rules that hold for this script's output: HELP, TYPE or comment lines and
# samples `name{label="value",...} value`; a metric family in one block after its TYPE; no
# series twice; values Prometheus parses; the marker last, naming the count of lines before it.
CHECK='
function bad(why) { if (!err) printf "line %d: %s\n", NR, why; err = 1; exit 1 }
function name(s) { return s ~ /^[a-zA-Z_:][a-zA-Z0-9_:]*$/ }
index($0, marker) == 1 { if (ended) bad("second end marker"); ended = NR; count = substr($0, length(marker) + 1); next }
ended { bad("text after the end marker") }
/^# HELP / {
  if (!name($3) || ($3 in family)) bad("HELP of an invalid or repeated metric family")
  if (substr($0, length($3) + 9) !~ /^([^\\]|\\[\\n])*$/) bad("HELP text with an invalid escape")
  family[$3] = 1; current = $3; next
}
/^# TYPE / {
  if (NF != 4 || !name($3) || ($3 in typed) || ($3 != current && ($3 in family))) bad("TYPE line out of place")
  if ($4 !~ /^(gauge|counter|untyped)$/) bad("unknown TYPE")
  typed[$3] = 1; family[$3] = 1; current = $3; next
}
/^#/ { next }
{
  if (!match($0, / [^ ]+$/)) bad("no value")
  series = substr($0, 1, RSTART - 1); value = substr($0, RSTART + 1)
  if (!match(series, /^[a-zA-Z_:][a-zA-Z0-9_:]*/)) bad("no metric name")
  labels = substr(series, RLENGTH + 1)
  if (substr(series, 1, RLENGTH) != current || !(current in typed)) bad("sample outside its metric family")
  if (labels != "" && labels !~ /^[{][a-zA-Z_][a-zA-Z0-9_]*="([^"\\]|\\[\\"n])*"(,[a-zA-Z_][a-zA-Z0-9_]*="([^"\\]|\\[\\"n])*")*[}]$/) bad("malformed labels")
  if (length(value) > 24 || value !~ /^-?([0-9]+[.]?[0-9]*|[.][0-9]+)([eE][-+]?[0-9][0-9]?)?$/) bad("value out of range")
  if (series in seen) bad("repeated series")
  seen[series] = 1
}
END {
  if (err) exit 1
  if (!ended) { print "no end marker: the file was cut short"; exit 1 }
  if (ended != NR || count != NR - 1) { print "end marker does not match the line count: the file was cut short"; exit 1 }
}'

check() {  # $TMP is complete and well formed; else prints why
  [ -s "$TMP" ] || { echo "empty"; return 1; }
  [ -z "$(tail -c 1 "$TMP")" ] || { echo "no final newline: the file was cut short"; return 1; }
  awk -v marker="$MARKER" "$CHECK" "$TMP"
}

produce() {  # the whole file for this run -> $TMP; non-zero when awk could not write it
  desc=""
  for f in $FIELDS; do desc="$desc${desc:+|}$f $(describe "$f")"; done
  partial=0
  if [ -s "$CSV" ]; then
    [ -z "$(tail -c 1 "$CSV")" ] || partial=1
    if [ "$(wc -c <"$CSV" | tr -d " ")" -gt "$MAX_OUTPUT" ]; then
      log "nvidia-smi printed more than $MAX_OUTPUT bytes; reading the first $MAX_OUTPUT"
      partial=1
    fi
  fi
  GPUMON_DESC=$desc GPUMON_NODE=$NODE GPUMON_UNKNOWN=$UNKNOWN \
    awk -v up="$1" -v rc="$RC" -v now="$2" -v last="$LAST_SUCCESS" -v partial="$partial" \
      -v max="$MAX_LINE" -v marker="$MARKER" "$PRODUCE" >"$TMP"
}

run_once() {
  now=$(date +%s)
  query
  up=0
  if [ "$RC" -eq 0 ]; then up=1; LAST_SUCCESS=$now; fi
  if timed_out "$RC"; then
    log "nvidia-smi did not answer within ${TIMEOUT}s (exit $RC)"
    : >"$CSV"   # a run that timed out writes no readings
  elif [ "$RC" -ne 0 ]; then
    log "nvidia-smi failed (exit $RC): $(cat "$ERRF" "$CSV" 2>/dev/null | head -c 4096 | awk 'NR <= 3 { printf "%s ", substr($0, 1, 200) }')"
  fi
  [ -n "$FIELDS" ] || : >"$CSV"
  # a failed run's rows are written where they parse: fresh readings of the GPUs that answered
  head -c "$MAX_OUTPUT" "$CSV" | produce "$up" "$now"
  wrote=$?
  rm -f "$CSV" "$ERRF"
  why=$(check) || [ -n "$why" ] || why="the check of the file failed"
  if [ "$wrote" -ne 0 ] || [ -n "$why" ]; then
    log "cannot write $OUT (${why:-awk could not write it}; full disk?): keeping the previous file"
    rm -f "$TMP"
    return 2
  fi
  mv -f "$TMP" "$OUT" || { log "cannot write $OUT"; rm -f "$TMP"; return 2; }
  [ "$up" -eq 1 ]
}

cleanup() { sweep; rm -f "$TMP" "$CSV" "$ERRF"; }

if [ "${1:-}" = "--once" ]; then
  run_once
  exit $?
fi
trap 'cleanup; exit 0' TERM INT
log "writing $OUT every ${INTERVAL}s (nvidia-smi timeout ${TIMEOUT}s, node $NODE)"
while :; do
  run_once
  [ $? -eq 2 ] && exit 2   # the file could not be written: restart (the pod's restarts show it)
  sleep "$INTERVAL" &
  wait $!
done
