#!/bin/bash
# Guest side of `make bench` and `make soak`.
#   bench.sh bench OUT KDIR MODULE TOOLS-DIR SECONDS REPS "SIZE:DEPTH ..."
#     rds-stress (server and client over 127.0.0.1, two processes) against the in-tree C RDS
#     and against rds_rs, REPS times each per configuration, alternating which goes first
#     (C rs rs C ...: drift in the guest or on the host favours neither); writes bench.txt
#     (the table: means over the repetitions) and bench-raw.txt (one line per run).
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

TOOLS=$5 SECS=$6 REPS=$7 CONFIGS=$8
exec > "$OUT/bench.log" 2>&1
: > "$OUT/bench-raw.txt"
failed=0

# run IMPL SIZE DEPTH PORT: one exchange; appends "IMPL SIZE DEPTH RATE|FAIL" to bench-raw.txt.
run() {
  local impl=$1 size=$2 depth=$3 port=$4 rate=FAIL
  if [ "$impl" = c ]; then load_c; else load_rs; fi || { echo "$impl $size $depth FAIL" >> bench-raw.txt; failed=1; return; }
  local cli=$OUT/run$k-$impl-$size-$depth.client.txt srv=$OUT/run$k-$impl-$size-$depth.server.txt
  timeout $((SECS + 90)) "$TOOLS/rds-stress" -r 127.0.0.1 -p "$port" > "$srv" 2>&1 & local sp=$!
  timeout $((SECS + 90)) "$TOOLS/rds-stress" -r 127.0.0.1 -s 127.0.0.1 -p "$port" \
    -q "$size" -a 64 -d "$depth" -t 1 -T "$SECS" > "$cli" 2>&1; local crc=$?
  wait "$sp"; local src=$?
  if [ $crc -eq 0 ] && [ $src -eq 0 ] && grep -q 'result=ok' "$cli"; then
    local sum med mb rtt
    sum=$(grep '^summary: ' "$cli")
    field() { sed -n "s/.* $1=\([0-9.]*\) .*/\1/p" <<< "$sum"; }
    rate=$(field req_per_s) med=$(field req_per_s_median) mb=$(field mb_per_s) rtt=$(field rtt_us)
    echo "$impl $size $depth $rate $med $mb $rtt" >> bench-raw.txt
  else
    echo "$impl $size $depth FAIL" >> bench-raw.txt
    echo "== FAILED: $impl size $size depth $depth (client rc=$crc, server rc=$src)"
    tail -n 5 "$cli" "$srv"
    failed=1
  fi
  if [ "$impl" = c ]; then unload_c; else unload_rs; fi || { echo "== rmmod ($impl) FAILED"; failed=1; }
}

echo "== guest kernel $(uname -r), $(nproc) vCPU; $SECS s per run, $REPS runs each"
k=0
for cfg in $CONFIGS; do
  size=${cfg%:*} depth=${cfg#*:}
  for _ in $(seq "$REPS"); do
    if [ $((k % 2)) -eq 0 ]; then order="c rs"; else order="rs c"; fi
    for impl in $order; do
      echo "-- $impl: -q $size -a 64 -d $depth -T $SECS"
      run "$impl" "$size" "$depth" 4000
    done
    k=$((k + 1))
  done
done

human() { # bytes -> 64 B, 16 KiB, ...
  local b=$1
  if [ "$b" -ge 1048576 ] && [ $((b % 1048576)) -eq 0 ]; then echo "$((b / 1048576)) MiB"
  elif [ "$b" -ge 1024 ] && [ $((b % 1024)) -eq 0 ]; then echo "$((b / 1024)) KiB"
  else echo "$b B"; fi
}
# mean IMPL SIZE DEPTH: "RATE MEDIAN MB/S RTT", means over the runs, or "FAIL - - -" if any
# run failed.
mean() {
  awk -v i="$1" -v s="$2" -v d="$3" '
    $1 == i && $2 == s && $3 == d { n++; if ($4 == "FAIL") bad = 1; else { r += $4; md += $5; m += $6; t += $7 } }
    END { if (!n || bad) print "FAIL - - -"; else printf "%.0f %.0f %.2f %.0f\n", r / n, md / n, m / n, t / n }' bench-raw.txt
}
ratio() { # A B -> A/B, or - if either is not a number
  if [[ $1 =~ ^[0-9]+$ ]] && [[ $2 =~ ^[0-9]+$ ]] && [ "$2" -gt 0 ]; then
    awk -v a="$1" -v b="$2" 'BEGIN {printf "%.2f", a / b}'
  else echo -; fi
}
{
  echo "rds-stress over 127.0.0.1: 1 task per side, 64 B acks, requests both ways;"
  echo "$SECS s per run, mean of $REPS runs per implementation, alternating C and rds_rs."
  echo "req/s: requests completed per second (both ways) over the whole run; rs/C med: the"
  echo "ratio of the median one-second rates (less sensitive to passing load on the host)."
  echo "(guest kernel $(uname -r), $(nproc) vCPU, TCG: compare the ratios, not the rates)"
  printf '%8s %5s %9s %9s %6s %9s %8s %8s %8s %8s\n' request depth "C req/s" "rs req/s" "rs/C" "rs/C med" "C MB/s" "rs MB/s" "C rtt us" "rs rtt us"
  for cfg in $CONFIGS; do
    size=${cfg%:*} depth=${cfg#*:}
    read -r cr cmed cm ct < <(mean c "$size" "$depth")
    read -r rr rmed rm rt < <(mean rs "$size" "$depth")
    printf '%8s %5s %9s %9s %6s %9s %8s %8s %8s %8s\n' "$(human "$size")" "$depth" "$cr" "$rr" \
      "$(ratio "$rr" "$cr")" "$(ratio "$rmed" "$cmed")" "$cm" "$rm" "$ct" "$rt"
  done
} > "$OUT/bench.txt"
cat "$OUT/bench.txt"
exit $failed
