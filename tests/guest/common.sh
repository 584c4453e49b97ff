# Helpers for guest-side test scripts (sourced). Runs inside the QEMU guest.
# Result lines go to TAP files in $OUT; see tests/harness.py for the format.
# CHAINED=before|after: this script is followed by / follows another in the same guest; the
# first clears kmemleak, the last reports leaks and writes the kernel log for both.

kmemleak=/sys/kernel/debug/kmemleak
mountpoint -q /sys/kernel/debug || mount -t debugfs none /sys/kernel/debug

# tap FILE ok|not NAME OBSERVATION [WHY]   (multi-line text is flattened to one line)
tap() {
  local f=$1 res=$2 name=$3 obs=${4:-} why=${5:-}
  obs=${obs//$'\n'/ } why=${why//$'\n'/ }
  if [ "$res" = ok ]; then echo "ok $name $obs" >> "$OUT/$f"
  else echo "not ok $name $obs: $why" >> "$OUT/$f"; fi
}

loaded() { [ -d "/sys/module/$1" ]; }

# The harness never has two RDS implementations loaded: refuse to load one while the other is.
load_c() {
  loaded rds_rs && { echo "refusing to load C RDS while rds_rs is loaded" >&2; return 1; }
  insmod "$KDIR/net/rds/rds.ko" && insmod "$KDIR/net/rds/rds_tcp.ko" \
    && { [ "${1:-}" != rdma ] || insmod "$KDIR/net/rds/rds_rdma.ko"; }
}
unload_c() {
  local m
  for m in rds_rdma rds_tcp rds; do loaded "$m" && rmmod "$m"; done
  ! loaded rds
}
load_rs() {
  loaded rds && { echo "refusing to load rds_rs while C RDS is loaded" >&2; return 1; }
  insmod "$MODULE" && rs_loads=$((${rs_loads:-0} + 1))
}
unload_rs() { rmmod rds_rs && ! loaded rds_rs; }

# Forgets what kmemleak would report so far (boot-time objects): `clear` only drops objects a
# scan already reported, so scan first.
kmemleak_clear() {
  [ "${CHAINED:-}" = after ] && return 0   # a step that follows another keeps its leak record
  [ -e $kmemleak ] || return 0
  echo scan > $kmemleak && echo clear > $kmemleak
}
# Reports objects leaked since kmemleak_clear; kmemleak only reports objects older than 5 s.
# A kmemleak that is missing or has disabled itself is a failure, not a clean report.
kmemleak_report() {
  [ "${CHAINED:-}" = before ] && return 0  # the last step of the guest reports
  if [ ! -e $kmemleak ]; then echo "kmemleak not available in this kernel" > "$OUT/kmemleak.txt"; return; fi
  sleep 6
  if ! { echo scan > $kmemleak && echo scan > $kmemleak; } 2>/dev/null; then
    echo "kmemleak scan failed (kmemleak disabled?)" > "$OUT/kmemleak.txt"; return
  fi
  cat $kmemleak > "$OUT/kmemleak.txt"
}

# The kernel log, once per guest (the last step writes it).
collect_dmesg() {
  [ "${CHAINED:-}" = before ] && return 0
  dmesg > "$OUT/dmesg.txt"
}

# run_prog TAPFILE-FOR-ERRORS NAME CMD... : runs a test program; a non-zero exit is a failure.
run_prog() {
  local f=$1 name=$2; shift 2
  "$@"; local rc=$?
  [ $rc -eq 0 ] || tap "$f" not "${name}_exit" "rc=$rc" "test program failed"
}
