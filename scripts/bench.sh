#!/usr/bin/env bash
# `make bench`: rds-stress against the in-tree C RDS and against rds_rs, side by side, in one
# guest boot on the plain kernel (TCG: only ratios within one run mean anything). Prints a
# table of both rates and the ratio rs/C per message size and depth.
# The guest has one vCPU: with two, every wake-up of the peer process crosses vCPUs, whose
# QEMU threads compete with everything else on the host, and the rates then swing tenfold
# from run to run (measured); with one, runs repeat within some 30%.
#   BENCH_CPUS     vCPUs of the guest (default 1)
#   BENCH_SECS     seconds per run (default 4)
#   BENCH_REPS     runs per implementation and configuration (default 2: C rs rs C)
#   BENCH_CONFIGS  "SIZE:DEPTH ..." (default: 64 B, 1 KiB, 16 KiB, 256 KiB at depths 1 and 8)
#
# `make soak` (scripts/bench.sh --soak): `rds-tests load COUNT` against rds_rs in a guest on
# the debug kernel (KASAN, lockdep, kmemleak), judged like `make test` judges its guests.
#   SOAK_COUNT     the argument of `rds-tests load` (default 1000000)
#   SOAK_TIMEOUT   bound on the guest, in seconds (default 7200); `rds-tests load` is given
#                  10 minutes less as its own bound, so it reports rather than being killed.
#                  (Measured: ~250 messages/s on the debug kernel under TCG, so 1000000 takes
#                  about an hour.)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/.." && pwd)
. "$here/lib.sh"
cd "$top"
t0=$SECONDS
mode=bench
[ "${1:-}" = --soak ] && mode=soak
bash "$here/setup.sh"

if [ "$mode" = soak ]; then
  count=${SOAK_COUNT:-1000000}
  bound=${SOAK_TIMEOUT:-7200}
  load_secs=$((bound > 1200 ? bound - 600 : bound / 2))
  kdir=$(bash "$here/kernel.sh" debug)
  module=$(bash "$here/module.sh" "$kdir")
  cargo build --release --quiet -p rds-tests
  out=$top/target/soak
  rm -rf "$out"; mkdir -p "$out"
  step "booting a guest (TCG, debug kernel): rds-tests load $count $load_secs against rds_rs (bound ${bound}s)"
  python3 tests/harness.py one --kernel "$kdir" --out "$out" --timeout "$bound" -- \
    "$top/tests/guest/bench.sh" soak "$out" "$kdir" "$module" "$top/target/release/rds-tests" "$count" "$load_secs"
  tail -20 "$out/soak.txt" 2>/dev/null || true
  step "judging the soak guest"
  python3 tests/harness.py judge --counts "$out/counts" --expect "$out/soak.tap:soak_load_rs" "$out"
  read -r p f < "$out/counts"
  echo "(make soak took $((SECONDS - t0))s; results in $out)"
  echo "$p passed, $f failed"
  [ "$f" -eq 0 ]
  exit
fi

secs=${BENCH_SECS:-4}
reps=${BENCH_REPS:-2}
cpus=${BENCH_CPUS:-1}
configs=${BENCH_CONFIGS:-"64:1 64:8 1024:1 1024:8 16384:1 16384:8 262144:1 262144:8"}
n=$(wc -w <<< "$configs")
# Per run: the exchange, its drain and start-up (a few seconds under TCG); plus the boot.
bound=$((n * 2 * reps * (secs + 20) + 180))
kdir=$(bash "$here/kernel.sh" plain)
module=$(bash "$here/module.sh" "$kdir")
cargo build --release --quiet -p rds-tools
out=$top/target/bench
rm -rf "$out"; mkdir -p "$out"
step "booting a guest (TCG, plain kernel, $cpus vCPU): $n configurations x {C RDS, rds_rs} x $reps, ${secs}s each (bound ${bound}s)"
python3 tests/harness.py one --kernel "$kdir" --out "$out" --timeout "$bound" --cpus "$cpus" -- \
  "$top/tests/guest/bench.sh" bench "$out" "$kdir" "$module" "$top/target/release" "$secs" "$reps" "$configs"
[ -s "$out/bench.txt" ] || { tail -30 "$out/bench.log" 2>/dev/null; die "the guest wrote no table (see $out/bench.log, $out/console.txt)"; }
cat "$out/bench.txt"
echo "(make bench took $((SECONDS - t0))s; per-run output in $out)"
grep -q '^ok ' "$out/vm.tap" || die "some runs failed or the guest did not finish cleanly (see $out/bench.log)"
