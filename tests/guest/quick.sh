#!/bin/bash
# Guest side of scripts/quick.sh: load one implementation, run the given suites, unload, and
# write what the judge reads (SUITE-IMPL.tap, unpaired, kmemleak.txt, dmesg.txt).
#   quick.sh OUT KDIR MODULE TESTS-BIN rs|c SUITE[,SUITE...] [ARGS...]
set -u
OUT=$1 KDIR=$2 MODULE=$3 TESTS=$4 IMPL=$5 SUITES=$6; shift 6
. "$(dirname "$0")/common.sh"
cd "$OUT" || exit 1
kmemleak_clear
if [ "$IMPL" = rs ]; then load_rs; else load_c; fi || { tap harness.tap not "load_$IMPL" failed "insmod failed"; exit 1; }
for s in ${SUITES//,/ }; do
  run_prog harness.tap "${s}_$IMPL" "$TESTS" "$s" "$@" > "$OUT/$s-$IMPL.tap"
done
if [ "$IMPL" = rs ]; then
  [ -d /sys/kernel/debug/rds_rs ] && for k in loop_hold loop_ack_hold loop_reset_every loop_softirq loop_ring; do
    echo 0 > "/sys/kernel/debug/rds_rs/$k"; done
  unload_rs || tap harness.tap not unload_rs failed "rmmod rds_rs failed"
  echo "$(grep -c '^	KUNIT_CASE(' "$(dirname "$0")/../../rds/kunit.c")" > "$OUT/kunit.expected"
else
  unload_c || tap harness.tap not unload_c failed "rmmod of the C modules failed"
fi
kmemleak_report
collect_dmesg
