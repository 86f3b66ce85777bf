# shellcheck shell=bash
# bench/device/stages.sh: the stage bookkeeping of the device scripts, sourced
# after they set START and DEADLINE (seconds since the epoch).
#   left                  seconds left before DEADLINE, less RESERVE_S
#   banner TEXT           a section header with the elapsed time
#   set_status NAME TEXT  records a stage's outcome (printed at the end)
#   run_limited NAME WANT_S CMD...
#                         CMD under timeout min(WANT_S, left); records NAME's
#                         status; returns CMD's exit code (99: skipped when
#                         less than MIN_STAGE_S is left)
RESERVE_S=${RESERVE_S:-15}
MIN_STAGE_S=${MIN_STAGE_S:-20}
declare -A STATUS
ORDER=()

left() { echo $((DEADLINE - $(date +%s) - RESERVE_S)); }
banner() { echo; echo "=== $* ($(($(date +%s) - START)) s since start, $(left) s left) ==="; }
set_status() { STATUS[$1]=$2; ORDER+=("$1"); echo "[$1] $2"; }

run_limited() {
  local name=$1 want=$2
  shift 2
  local t
  t=$(left)
  ((t > want)) && t=$want
  if ((t < MIN_STAGE_S)); then
    set_status "$name" "skipped (${t} s left)"
    return 99
  fi
  echo "[$name] limit ${t} s: $*"
  local t0 rc
  t0=$(date +%s)
  timeout --signal=TERM --kill-after=10 "$t" "$@"
  rc=$?
  local dt=$(($(date +%s) - t0))
  case $rc in
    0) set_status "$name" "ok (${dt} s)" ;;
    124 | 137) set_status "$name" "TIMEOUT after ${t} s" ;;
    *) set_status "$name" "FAILED rc=$rc (${dt} s)" ;;
  esac
  return $rc
}
