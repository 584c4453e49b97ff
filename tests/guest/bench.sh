#!/bin/bash
# Guest side of `make bench` and `make soak`.
#   bench.sh bench OUT KDIR MODULE TOOLS-DIR SECONDS "SIZE:DEPTH ..." "SIZE:DEPTH ..."
#     rds-stress (server and client over 127.0.0.1, two processes, one task each) for each
#     configuration of the first list against the in-tree C RDS, rds_rs and AF_UNIX
#     SOCK_SEQPACKET (`rds-stress -U`), in that order, SECONDS of guest time each; then the
#     configurations of the second list (the repeatability check) once more. Meant for a
#     one-vCPU guest under `-icount shift=0,sleep=off`, where guest time counts instructions:
#     nothing in the measured part may wait for the host (programs and the module are copied
#     to the guest's memory first, output goes there and is copied out after each run).
#     Writes bench-raw.txt: "PASS IMPL SIZE DEPTH REQ/S MEDIAN MB/S RTT-US" per run (PASS
#     main or repeat), or "PASS IMPL SIZE DEPTH FAIL".
#   bench.sh soak OUT KDIR MODULE TESTS-BIN COUNT [SECONDS]
#     `rds-tests load COUNT [SECONDS]` against rds_rs; writes soak.tap, load-rs.tap (the
#     program's own checks), kmemleak.txt and dmesg.txt for `harness.py judge`.
set -u
MODE=$1 OUT=$2 KDIR=$3 MODULE=$4
. "$(dirname "$0")/common.sh"
cd "$OUT" || exit 1

if [ "$MODE" = soak ]; then
  TESTS=$5 COUNT=$6 SECS=${7:-}
  exec > "$OUT/soak.txt" 2>&1
  kmemleak_clear
  echo "== guest kernel $(uname -r), $(nproc) vCPU; rds-tests load $COUNT $SECS against rds_rs"
  if load_rs; then
    t=$SECONDS
    "$TESTS" load "$COUNT" $SECS > "$OUT/load.out" 2>&1; rc=$?
    cat "$OUT/load.out"
    # The program's own checks, for the judge to count.
    grep -E '^(not )?ok ' "$OUT/load.out" > "$OUT/load-rs.tap"
    echo "== rds-tests load $COUNT: exit $rc after $((SECONDS - t))s"
    if [ $rc -eq 0 ]; then tap soak.tap ok soak_load_rs "$COUNT"
    else tap soak.tap not soak_load_rs "rc=$rc" "rds-tests load $COUNT failed (or has no 'load' subcommand)"; fi
    unload_rs || tap soak.tap not soak_unload_rs failed "rmmod rds_rs failed"
  else
    tap soak.tap not soak_load_module failed "insmod rds_rs.ko failed"
  fi
  kmemleak_report
  collect_dmesg
  exit 0
fi

TOOLS=$5 SECS=$6 CONFIGS=$7 REPEAT=${8:-}
exec > "$OUT/bench.log" 2>&1
: > "$OUT/bench-raw.txt"
failed=0

# Everything a run touches lives in guest memory: under icount a read from the host
# filesystem (9p) completes after however long the host takes, and the guest clock skips
# ahead meanwhile.
W=$(mktemp -d /tmp/bench.XXXXXX) || exit 1
cp "$TOOLS/rds-stress" "$MODULE" "$W/" || exit 1
MODULE=$W/$(basename "$MODULE")
mkdir -p "$W/c"
cp "$KDIR/net/rds/rds.ko" "$KDIR/net/rds/rds_tcp.ko" "$W/c/" || exit 1
KDIR_C=$W/c
STRESS=$W/rds-stress

load() { # IMPL
  case $1 in
    c) loaded rds_rs && return 1; insmod "$KDIR_C/rds.ko" && insmod "$KDIR_C/rds_tcp.ko" ;;
    rs) load_rs ;;
    unix) ! loaded rds && ! loaded rds_rs ;;
  esac
}
unload() { # IMPL
  case $1 in
    c) unload_c ;;
    rs) unload_rs ;;
    unix) true ;;
  esac
}

# run PASS IMPL SIZE DEPTH: one exchange; appends its line to bench-raw.txt.
k=0
run() {
  local pass=$1 impl=$2 size=$3 depth=$4 flag=()
  [ "$impl" = unix ] && flag=(-U)
  k=$((k + 1))
  local name=run$k-$pass-$impl-$size-$depth
  local cli=$W/$name.client.txt srv=$W/$name.server.txt
  echo "-- run $k ($pass): $impl -q $size -a 64 -d $depth -t 1 -T $SECS ${flag[*]}"
  if ! load "$impl"; then
    echo "$pass $impl $size $depth FAIL" >> "$OUT/bench-raw.txt"
    echo "== FAILED: loading $impl"; failed=1; return
  fi
  # Nothing left for writeback to send to the host while the run is measured.
  sync
  timeout $((SECS + 90)) "$STRESS" -r 127.0.0.1 -p 4000 > "$srv" 2>&1 & local sp=$!
  timeout $((SECS + 90)) "$STRESS" -r 127.0.0.1 -s 127.0.0.1 -p 4000 \
    -q "$size" -a 64 -d "$depth" -t 1 -T "$SECS" "${flag[@]}" > "$cli" 2>&1; local crc=$?
  wait "$sp"; local src=$?
  cp "$cli" "$srv" "$OUT/"
  if [ $crc -eq 0 ] && [ $src -eq 0 ] && grep -q 'result=ok' "$cli"; then
    local sum rate med mb rtt
    sum=$(grep '^summary: ' "$cli")
    field() { sed -n "s/.* $1=\([0-9.]*\) .*/\1/p" <<< "$sum"; }
    rate=$(field req_per_s) med=$(field req_per_s_median) mb=$(field mb_per_s) rtt=$(field rtt_us)
    echo "$pass $impl $size $depth $rate $med $mb $rtt" >> "$OUT/bench-raw.txt"
    echo "   $rate requests/s"
  else
    echo "$pass $impl $size $depth FAIL" >> "$OUT/bench-raw.txt"
    echo "== FAILED: $impl size $size depth $depth (client rc=$crc, server rc=$src)"
    tail -n 5 "$cli" "$srv"
    failed=1
  fi
  unload "$impl" || { echo "== rmmod ($impl) FAILED"; failed=1; }
}

echo "== guest kernel $(uname -r), $(nproc) vCPU, $(cat /proc/cmdline)"
echo "== mounts:"; cat /proc/mounts
echo "== clocksource $(cat /sys/devices/system/clocksource/clocksource0/current_clocksource 2>/dev/null)"
echo "== $SECS s of guest time per run; configurations: $CONFIGS; repeated: ${REPEAT:-none}"
# udev's coldplug of the boot must be over before anything is measured.
command -v udevadm > /dev/null && udevadm settle --timeout=60
t0=$(date +%s.%N)
for cfg in $CONFIGS; do
  for impl in c rs unix; do run main "$impl" "${cfg%:*}" "${cfg#*:}"; done
done
for cfg in $REPEAT; do
  for impl in c rs unix; do run repeat "$impl" "${cfg%:*}" "${cfg#*:}"; done
done
echo "== $k runs in $(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN {printf "%.1f", b - a}') s of guest time"
dmesg > "$OUT/dmesg.txt"
exit $failed
