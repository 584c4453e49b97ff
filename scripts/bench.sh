#!/usr/bin/env bash
# `make bench`: rds-stress against rds_rs, the in-tree C RDS and AF_UNIX SOCK_SEQPACKET (the
# same request/ack exchange, `rds-stress -U`), in one guest on the plain kernel with one vCPU
# under QEMU's instruction counter (`-icount shift=0,sleep=off`): the guest clock advances one
# nanosecond per instruction and skips idle time, so a rate measured in the guest is a
# per-instruction cost and repeats from boot to boot (within ~0.1%) whatever else the host
# runs. Prints the table (request size, depth, requests/s of each, rs/C, rs/unix, unix/C) and
# writes it to bench/results/<date>-<commit>.md and latest.md, with a PNG chart of each.
#   BENCH_CONFIGS  "SIZE:DEPTH ..." (default "64:1 1024:8 16384:8 131072:2")
#   BENCH_SECS     seconds of guest time per run (default 10)
#   BENCH_REPEAT   configurations run a second time at the end of the guest, to show the
#                  spread (default "1024:8"; "" for none)
#   BENCH_IB       "SIZE:DEPTH ..." of RDMA over soft-RoCE in the same guest (default "65536:8";
#                  "" for none): RDMA writes and reads of SIZE by rds-stress -D against C RDS/IB
#                  and rds_rs, beside perftest's raw ib_write_bw/ib_read_bw, and 64-byte
#                  requests beside ibv_rc_pingpong's round trips (perftest's ib_send_lat
#                  cannot run here: tests/guest/bench.sh says why)
#   BENCH_MODULE   an rds_rs.ko (built for the plain kernel) to measure instead of building
#                  one from the tree: to compare a new module against an earlier one
#   BENCH_NAME     the results file name without .md (default <YYYY-MM-DD>-<short commit>,
#                  "-dirty" added when the module or tool sources differ from the commit)
#   BENCH_BASELINE an earlier results file (.md) to compare rds_rs against (extra columns)
#   BENCH_RESULTS  the results directory (default bench/results)
#   BENCH_NOTE     a line for the results file (where the module came from, say)
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

configs=${BENCH_CONFIGS:-"64:1 1024:8 16384:8 131072:2"}
secs=${BENCH_SECS:-10}
repeat=${BENCH_REPEAT-"1024:8"}
ibconfigs=${BENCH_IB-"65536:8"}
results=${BENCH_RESULTS:-$top/bench/results}
baseline=${BENCH_BASELINE:-}
[[ $secs =~ ^[1-9][0-9]*$ ]] || die "BENCH_SECS must be a whole number of seconds"
for cfg in $configs $repeat $ibconfigs; do
  [[ $cfg =~ ^[1-9][0-9]*:[1-9][0-9]*$ ]] || die "bad configuration '$cfg' (SIZE:DEPTH)"
done
[ -z "$baseline" ] || [ -f "$baseline" ] || die "no baseline results file $baseline"
runs=$(( ($(wc -w <<< "$configs") + $(wc -w <<< "$repeat")) * 3 ))
[ -n "$ibconfigs" ] && runs=$((runs + $(wc -w <<< "$ibconfigs") * 6 + 3))
# Per run: the exchange and its start-up and drain, a few seconds of guest time more (about
# one second of host time per second of guest time on 2 cores; 3 allowed); plus the boot.
bound=$((runs * (secs + 20) * 3 + 300))
kdir=$(bash "$here/kernel.sh" plain)
if [ -n "${BENCH_MODULE:-}" ]; then
  [ -f "$BENCH_MODULE" ] || die "BENCH_MODULE: no file $BENCH_MODULE"
  module=$(realpath "$BENCH_MODULE")
  info "measuring $module (BENCH_MODULE)"
else
  module=$(bash "$here/module.sh" "$kdir")
fi
cargo build --release --quiet -p rds-tools
# One folder per run, so that two runs (say, a baseline beside the tree) do not clobber each other.
out=$top/target/bench/run-$(date +%Y%m%d-%H%M%S)-$$
rm -rf "$out"; mkdir -p "$out"
step "booting a guest (plain kernel, 1 vCPU, icount): $runs runs of ${secs}s guest time (bound ${bound}s)"
python3 tests/harness.py one --kernel "$kdir" --out "$out" --timeout "$bound" --cpus 1 \
  "--qemu-opts=-icount shift=0,sleep=off" -- \
  "$top/tests/guest/bench.sh" bench "$out" "$kdir" "$module" "$top/target/release" "$secs" "$configs" "$repeat" \
  "$ibconfigs"
[ -s "$out/bench-raw.txt" ] || { tail -30 "$out/bench.log" 2>/dev/null; die "the guest measured nothing (see $out/bench.log, $out/console.txt)"; }

# The report. Debian's python3 (the one with python3-matplotlib), even when another is first
# on PATH.
py=python3; [ -x /usr/bin/python3 ] && py=/usr/bin/python3
commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
dirty=
if [ -z "${BENCH_MODULE:-}" ] && [ -n "$(git status --porcelain -- Kbuild rds rds_loop bindings proto tools librds 2>/dev/null)" ]; then
  dirty=-dirty
elif [ -n "$(git status --porcelain -- tools librds 2>/dev/null)" ]; then
  dirty=-dirty
fi
name=${BENCH_NAME:-$(date +%F)-$commit$dirty}
mkdir -p "$results"
sha() { sha256sum "$1" | cut -c1-16; }
meta=(
  --meta "date=$(date +%F)"
  --meta "commit=$commit$dirty"
  --meta "rds_rs.ko=${BENCH_MODULE:+$module, }sha256 $(sha "$module")"
  --meta "rds-stress=sha256 $(sha "$top/target/release/rds-stress")"
  --meta "guest kernel=$(sed -n 's/^== guest kernel \([^,]*\),.*/\1/p' "$out/bench.log"), plain, build key $(cat "$kdir/.rds-rs-key")"
  --meta "QEMU=$(qemu-system-x86_64 --version | head -1 | sed 's/QEMU emulator version //'), TCG, -icount shift=0,sleep=off, 1 vCPU"
  --meta "per run=${secs} s of guest time"
  --meta "host time=$((SECONDS - t0)) s for make bench"
)
[ -n "${BENCH_NOTE:-}" ] && meta+=(--meta "note=$BENCH_NOTE")
[ -n "$baseline" ] && meta+=(--baseline "$baseline" --meta "baseline=$(basename "$baseline")")
step "results: $results/$name.md"
"$py" "$top/bench/report.py" --raw "$out/bench-raw.txt" --md "$results/$name.md" \
  --png "$results/$name.png" "${meta[@]}"
cp "$results/$name.md" "$results/latest.md"
[ -f "$results/$name.png" ] && cp "$results/$name.png" "$results/latest.png"
echo "(make bench took $((SECONDS - t0))s; per-run output in $out; results in $results/$name.md)"
grep -q ' FAIL$' "$out/bench-raw.txt" && die "some runs failed (see $out/bench.log)"
grep -q '^ok ' "$out/vm.tap" || die "the guest did not finish cleanly (see $out/bench.log)"
