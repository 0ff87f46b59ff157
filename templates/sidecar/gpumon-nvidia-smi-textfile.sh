#!/bin/sh
# gpumon nvidia-smi textfile sidecar (gpumon issue 13): runs nvidia-smi every interval and writes
# its readings as node_exporter textfile-collector metrics, so GPUs whose DCGM fields are empty
# (the field guide's "N/A" temperature case) keep a reading. Read by gpumon's preset
# `nvidia-smi-textfile` (generator/sourcepresets.py). POSIX sh (dash, busybox ash, bash) plus
# timeout, mv, sed, date; no awk, no bash-isms.
#
# What breaks such scripts in the field, and what this one does instead:
# * "[N/A]", "[Not Supported]", "[Unknown Error]", "ERR!" in a column: a textfile with a
#   non-number makes node_exporter drop the whole file (microsoft/pai#949, "expected float as
#   value, got N/A"), so that sample is left out and counted in
#   gpumon_nvidia_smi_unavailable_samples{field,reason}.
# * nvidia-smi hangs under load (microsoft/pai#842) or is slow (utkuozdemir/nvidia_gpu_exporter#68):
#   it runs under `timeout`; a run that times out writes no readings, gpumon_nvidia_smi_up 0 and
#   the time of the last success, never the previous readings (microsoft/pai#889).
# * a field this driver does not know: nvidia-smi exits non-zero with
#   'Field "temperature.memory" is not a valid field to query.' (congard/nvidia-system-monitor-qt#20,
#   CoHDI/composable-resource-operator#37); the field is dropped for the life of the process,
#   reported as gpumon_nvidia_smi_field_unknown{field}, and the query runs again without it.
# * a GPU missing from one run: every run rewrites the whole file, so its series go absent (no
#   stale values) and gpumon_nvidia_smi_gpus drops.
# The file is written to a temporary name in the same folder and renamed over the old one, so
# node_exporter never reads half a file (its textfile collector reads only *.prom).
#
# Environment: GPUMON_TEXTFILE_DIR (folder node_exporter's --collector.textfile.directory reads),
# GPUMON_INTERVAL and GPUMON_TIMEOUT (whole seconds), NODE_NAME (downward API spec.nodeName; the
# Hostname label, as dcgm-exporter sets it), GPUMON_NVIDIA_SMI (the command, default nvidia-smi).
# Argument --once: one run, exit status 0 when nvidia-smi succeeded, else 1.
# Units follow nvidia-smi --help-query-gpu: temperatures in degrees C, power.draw in W,
# utilization.* in percent (written as a 0-1 ratio), memory.* in MiB (written as bytes), clocks in
# MHz (written as hertz).

set -u
set -f   # no globbing: nvidia-smi output and help texts are data

DIR=${GPUMON_TEXTFILE_DIR:-/var/lib/node_exporter/textfile_collector}
INTERVAL=${GPUMON_INTERVAL:-15}
TIMEOUT=${GPUMON_TIMEOUT:-10}
SMI=${GPUMON_NVIDIA_SMI:-nvidia-smi}
OUT=$DIR/gpumon-nvidia-smi.prom
TMP=$DIR/.gpumon-nvidia-smi.prom.$$
CSV=$DIR/.gpumon-nvidia-smi.csv.$$
ERRF=$DIR/.gpumon-nvidia-smi.err.$$

# the fields asked for, in column order after uuid,index; a field the driver rejects is removed
FIELDS="temperature.gpu temperature.memory power.draw utilization.gpu utilization.memory memory.used memory.free clocks.current.sm clocks.current.memory"
UNKNOWN=""
LAST_SUCCESS=0

# "\" and '"' escaped for a label value (Kubernetes node names have neither; a hand-set NODE_NAME may)
NODE=$(printf '%s' "${NODE_NAME:-$(uname -n)}" | sed 's/[\\"]/\\&/g' | tr -d '\n')

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

CR=$(printf '\r')

trim() {  # $1 without a carriage return and leading/trailing spaces -> $T
  T=${1%"$CR"}
  T=${T#"${T%%[! ]*}"}
  T=${T%"${T##*[! ]}"}
}

is_number() {
  case $1 in
    ''|.|-|-.|*[!0-9.-]*|?*-*|*.*.*) return 1 ;;
  esac
  return 0
}

strip_zeros() {  # unsigned integer $1 without leading zeros -> $Z
  Z=$1
  while :; do
    case $Z in 0?*) Z=${Z#0} ;; *) break ;; esac
  done
}

# a reading -> $V in the written unit, or $REASON (not_available, not_supported, unknown_error,
# err, invalid) when it is not a number this field can carry
convert() {  # $1 value, $2 conversion
  V="" REASON=""
  case $1 in
    '[N/A]'|N/A) REASON=not_available; return 1 ;;
    '[Not Supported]'|'Not Supported') REASON=not_supported; return 1 ;;
    '[Unknown Error]'|'Unknown Error') REASON=unknown_error; return 1 ;;
    'ERR!') REASON=err; return 1 ;;
  esac
  is_number "$1" || { REASON=invalid; return 1; }
  case $2 in
    none) V=$1; return 0 ;;
  esac
  case $1 in *[!0-9]*) REASON=invalid; return 1 ;; esac   # the rest are whole numbers
  strip_zeros "$1"
  case $2 in
    ratio)
      case $Z in
        100) V=1 ;;
        ?) V=0.0$Z ;;
        ??) V=0.$Z ;;
        *) REASON=invalid; return 1 ;;
      esac ;;
    bytes)
      [ ${#Z} -le 12 ] || { REASON=invalid; return 1; }
      V=$((Z * 1048576)) ;;
    hertz)
      [ ${#Z} -le 9 ] || { REASON=invalid; return 1; }
      V=$((Z * 1000000)) ;;
  esac
  return 0
}

column() {  # the $1-th comma-separated column of $2 (trimmed) -> $T; 1 when the row is shorter
  _row=$2
  _i=1
  while [ "$_i" -lt "$1" ]; do
    case $_row in *,*) _row=${_row#*,} ;; *) return 1 ;; esac
    _i=$((_i + 1))
  done
  trim "${_row%%,*}"
}

valid_row() {  # uuid and index of row $1 -> $UUID $INDEX; 1 when either is malformed
  column 1 "$1" || return 1
  UUID=$T
  column 2 "$1" || return 1
  INDEX=$T
  case $UUID in ''|*[!A-Za-z0-9-]*) return 1 ;; esac
  case $INDEX in ''|*[!0-9]*) return 1 ;; esac
  column "$NCOL" "$1" || return 1
  return 0
}

query() {  # runs nvidia-smi into $CSV/$ERRF, dropping fields it rejects; sets RC
  while :; do
    list=uuid,index
    NCOL=2
    for f in $FIELDS; do list=$list,$f; NCOL=$((NCOL + 1)); done
    timeout -k 2 "$TIMEOUT" "$SMI" --query-gpu="$list" --format=csv,noheader,nounits >"$CSV" 2>"$ERRF"
    RC=$?
    [ "$RC" -eq 0 ] && return 0
    bad=$(sed -n 's/.*Field "\([^"]*\)" is not a valid field to query.*/\1/p' "$CSV" "$ERRF" | head -n 1)
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

gauge() {  # name help
  printf '# HELP %s %s\n# TYPE %s gauge\n' "$1" "$2" "$1"
}

write_readings() {  # appends every field's samples to $TMP; counts unusable samples
  k=3
  for f in $FIELDS; do
    set -- $(describe "$f")
    metric=$1 conv=$2
    shift 2
    gauge "$metric" "$*"
    counts=""
    while IFS= read -r line || [ -n "$line" ]; do
      valid_row "$line" || continue
      column "$k" "$line"
      if convert "$T" "$conv"; then
        printf '%s{UUID="%s",gpu="%s",Hostname="%s"} %s\n' "$metric" "$UUID" "$INDEX" "$NODE" "$V"
      else
        counts="$counts $REASON"
      fi
    done <"$CSV"
    for reason in not_available not_supported unknown_error err invalid; do
      n=0
      for c in $counts; do [ "$c" = "$reason" ] && n=$((n + 1)); done
      [ "$n" -gt 0 ] && echo "$f $reason $n" >>"$TMP.unavailable"
    done
    k=$((k + 1))
  done
}

run_once() {
  now=$(date +%s)
  : >"$TMP"
  : >"$TMP.unavailable"
  query
  gpus=0 skipped=0
  up=0
  if [ "$RC" -eq 0 ]; then up=1; LAST_SUCCESS=$now; fi
  if timed_out "$RC"; then
    log "nvidia-smi did not answer within ${TIMEOUT}s (exit $RC)"
  elif [ "$RC" -ne 0 ]; then
    log "nvidia-smi failed (exit $RC): $(cat "$ERRF" "$CSV" 2>/dev/null | head -n 3 | tr '\n' ' ')"
  fi
  if ! timed_out "$RC" && [ -n "$FIELDS" ]; then
    # a failed run's rows are written where they parse: fresh readings of the GPUs that answered
    while IFS= read -r line || [ -n "$line" ]; do
      if valid_row "$line"; then gpus=$((gpus + 1)); else [ -n "$line" ] && skipped=$((skipped + 1)); fi
    done <"$CSV"
    write_readings >>"$TMP"
  fi
  {
    gauge gpumon_nvidia_smi_up "1 when the last nvidia-smi query exited 0 within the timeout, else 0."
    printf 'gpumon_nvidia_smi_up{Hostname="%s"} %s\n' "$NODE" "$up"
    gauge gpumon_nvidia_smi_exit_code "Exit status of the last nvidia-smi query (124 or 143: timed out, 137: killed after the timeout)."
    printf 'gpumon_nvidia_smi_exit_code{Hostname="%s"} %s\n' "$NODE" "$RC"
    gauge gpumon_nvidia_smi_last_run_timestamp_seconds "When the last query started (Unix time)."
    printf 'gpumon_nvidia_smi_last_run_timestamp_seconds{Hostname="%s"} %s\n' "$NODE" "$now"
    gauge gpumon_nvidia_smi_last_success_timestamp_seconds "When the last successful query started (Unix time; 0: none since the sidecar started)."
    printf 'gpumon_nvidia_smi_last_success_timestamp_seconds{Hostname="%s"} %s\n' "$NODE" "$LAST_SUCCESS"
    gauge gpumon_nvidia_smi_gpus "GPU rows with a valid UUID and index in the last query."
    printf 'gpumon_nvidia_smi_gpus{Hostname="%s"} %s\n' "$NODE" "$gpus"
    gauge gpumon_nvidia_smi_skipped_rows "Output lines of the last query that were not a GPU row (error text, truncated rows)."
    printf 'gpumon_nvidia_smi_skipped_rows{Hostname="%s"} %s\n' "$NODE" "$skipped"
    if [ -s "$TMP.unavailable" ]; then
      gauge gpumon_nvidia_smi_unavailable_samples "Samples of the last query left out because nvidia-smi printed no number ([N/A], [Not Supported], [Unknown Error], ERR!)."
      while read -r f reason n; do
        printf 'gpumon_nvidia_smi_unavailable_samples{Hostname="%s",field="%s",reason="%s"} %s\n' "$NODE" "$f" "$reason" "$n"
      done <"$TMP.unavailable"
    fi
    if [ -n "$UNKNOWN" ]; then
      gauge gpumon_nvidia_smi_field_unknown "1 for a field this driver's nvidia-smi rejects (not a valid field to query); it is no longer asked for."
      for f in $UNKNOWN; do
        printf 'gpumon_nvidia_smi_field_unknown{Hostname="%s",field="%s"} 1\n' "$NODE" "$f"
      done
    fi
  } >>"$TMP"
  rm -f "$TMP.unavailable" "$CSV" "$ERRF"
  mv -f "$TMP" "$OUT" || { log "cannot write $OUT"; rm -f "$TMP"; return 1; }
  [ "$up" -eq 1 ]
}

cleanup() { rm -f "$TMP" "$TMP.unavailable" "$CSV" "$ERRF"; }

if [ "${1:-}" = "--once" ]; then
  run_once
  exit $?
fi
trap 'cleanup; exit 0' TERM INT
log "writing $OUT every ${INTERVAL}s (nvidia-smi timeout ${TIMEOUT}s, node $NODE)"
while :; do
  run_once
  sleep "$INTERVAL" &
  wait $!
done
