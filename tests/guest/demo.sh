#!/bin/bash
# Guest side of `make demo`: load rds_rs, show its KUnit results and socket behaviour next to
# the in-tree C RDS, unload.   demo.sh OUT KDIR MODULE TESTS-BIN
set -u
OUT=$1 KDIR=$2 MODULE=$3 TESTS=$4
. "$(dirname "$0")/common.sh"
exec > "$OUT/demo.txt" 2>&1
echo "== guest kernel $(uname -r), $(nproc) vCPU"
echo "== insmod rds_rs.ko"
load_rs || { echo "insmod failed"; exit 1; }
dmesg | grep -E 'rds_rs|PF_RDS' | sed 's/^/   /'
echo "== socket(AF_RDS, ...) against rds_rs"
"$TESTS" socket | sed 's/^/   /'
echo "== bind / connect / getsockname against rds_rs (a few of the checks)"
"$TESTS" bind | grep -E ' (bind_loopback|getsockname_bound|bind_in_use|bind_not_local|bind_port_0_picks|connect_loopback|getpeername_connected) ' | sed 's/^/   /'
for suite in bind sockopt; do
  echo "== rds-tests $suite against rds_rs: $("$TESTS" $suite | grep -c '^ok ') checks ok, $("$TESTS" $suite | grep -c '^not ok') not ok"
done
unload_rs && echo "== rmmod rds_rs: ok"
echo "== the same against the in-tree C RDS"
load_c && "$TESTS" socket | sed 's/^/   /'
for suite in bind sockopt; do
  echo "== rds-tests $suite against C RDS: $("$TESTS" $suite | grep -c '^ok ') checks ok, $("$TESTS" $suite | grep -c '^not ok') not ok"
done
unload_c && echo "== rmmod rds rds_tcp: ok"
