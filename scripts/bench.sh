#!/usr/bin/env bash
# `make bench`: rds-stress and rds-pingpong against rds_rs, the in-tree C RDS and AF_UNIX
# SOCK_SEQPACKET (the same exchange: `rds-stress -U`, `rds-pingpong -U`), in one guest on the
# plain kernel with one vCPU under QEMU's instruction counter (`-icount shift=0,sleep=off`):
# the guest clock advances one nanosecond per instruction and skips idle time, so a rate
# measured in the guest is a per-instruction cost and repeats from boot to boot (within
# ~0.1%) whatever else the host runs. Over loopback, over TCP between two network namespaces
# of the guest (BENCH_TCP), and over soft-RoCE (BENCH_IB...). Prints the tables (request size,
# depth, requests/s of each, rs/C, rs/unix, unix/C) and writes them to
# bench/results/<date>-<commit>.md and latest.md, with a PNG chart of each.
#   BENCH_CONFIGS  "SIZE:DEPTH ..." of rds-stress (verifying every message, both sides
#                  sending requests; default "64:1 1024:8 16384:8 131072:2")
#   BENCH_PINGPONG "SIZE:DEPTH ..." of rds-pingpong (a blocking request/answer pair, nothing
#                  verified: the kernel's cost with little of the tool's; 64-byte answers;
#                  default "64:1 1024:8 16384:8 131072:2")
#   BENCH_SECS     seconds of guest time per run (default 10)
#   BENCH_SLOW     host seconds allowed per second of guest time in the guest's bound (default
#                  3; more when other guests share the host's cores)
#   BENCH_REPEAT   configurations run a second time (rds-stress and rds-pingpong) at the end
#                  of the guest, to show the spread (default "1024:8"; "" for none)
#   BENCH_TCP      "SIZE:DEPTH[:TASKS] ..." of rds-stress over TCP (request/ack as
#                  BENCH_CONFIGS, TASKS tasks each side, default 1) between two network
#                  namespaces of the guest joined by a veth pair, C RDS with rds_tcp.ko and
#                  rds_rs, beside the same exchange over AF_UNIX (default "64:1 1024:8 16384:8
#                  131072:2 1024:1:8"; "" for none). The last row: 8 tasks each side, each
#                  keeping a request outstanding to each of the other side's 8 (64 each way),
#                  sockets on 16 ports, which multipath (up to 8 TCP connections between two
#                  addresses, a message's chosen by its socket's port) can spread; the table
#                  shows how many RDS TCP connections each implementation had up
#   BENCH_TCP_REPEAT configurations of BENCH_TCP run again at the end, C and rds_rs (default
#                  "1024:8"; "" for none)
#   BENCH_IB_PINGPONG "SIZE:DEPTH ..." of rds-pingpong over soft-RoCE (the veth pair of
#                  BENCH_IB), C RDS/IB and rds_rs (default "64:1 1024:8 8192:4 65536:2"; ""
#                  for none); beside ibv_rc_pingpong's 64-byte round trips
#   BENCH_PROFILE  the step profile (`make bench-profile` sets 1): "1" for "64:1 1024:8", or
#                  "SIZE:DEPTH ..." of BENCH_PINGPONG's configurations, run once more for C,
#                  rds_rs and AF_UNIX under `perf record -a -g`; the results file gets a table of
#                  instructions per exchange step by step (send, transmit, deliver,
#                  ack/settle, recvmsg, syscall, scheduler, user, other), bench/steps.py says
#                  how; the folded call chains are kept in bench/results/<name>.profile/
#   BENCH_IB_PROFILE  "SIZE:DEPTH ..." of BENCH_IB_PINGPONG's configurations to profile the
#                  same way over soft-RoCE, C RDS/IB and rds_rs (`make bench-profile` sets
#                  "64:1"): the step table of one request/answer over rxe, with the steps of
#                  rxe and the network below it and of the completion dispatch apart
#   BENCH_TCP_PROFILE "SIZE:DEPTH[:TASKS] ..." of BENCH_TCP's configurations run once more for
#                  C and rds_rs under perf (no step table: the folded call chains,
#                  profile-tcp-IMPL-SIZE-DEPTH.folded, go to bench/results/<name>.profile/;
#                  `bench/steps.py show` lists their biggest stacks)
#   BENCH_PROFILE_SECS  seconds of guest time of each profile run (default 60). perf's
#                  cpu-clock samples on the kernel's hrtimers; without CONFIG_HIGH_RES_TIMERS
#                  (the plain kernel, HZ=250) they fire at the tick only: one sample every
#                  4,000,000 instructions, 250 per second of guest time, so a profile needs
#                  long runs (60 s: about 15,000 samples, a step with a tenth of them known
#                  to about 2.5%)
#   BENCH_PERIOD   perf's sampling period in guest nanoseconds = instructions (default: the
#                  tick without high-resolution timers, else 100000)
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

configs=${BENCH_CONFIGS-"64:1 1024:8 16384:8 131072:2"}
ppconfigs=${BENCH_PINGPONG-"64:1 1024:8 16384:8 131072:2"}
secs=${BENCH_SECS:-10}
repeat=${BENCH_REPEAT-"1024:8"}
ibconfigs=${BENCH_IB-"65536:8"}
ibppconfigs=${BENCH_IB_PINGPONG-"64:1 1024:8 8192:4 65536:2"}
tcpconfigs=${BENCH_TCP-"64:1 1024:8 16384:8 131072:2 1024:1:8"}
tcprepeat=${BENCH_TCP_REPEAT-"1024:8"}
tcpprofile=${BENCH_TCP_PROFILE:-}
profile=${BENCH_PROFILE:-}
ibprofile=${BENCH_IB_PROFILE:-}
[ "$profile" = 1 ] && profile="64:1 1024:8"
psecs=${BENCH_PROFILE_SECS:-60}
results=${BENCH_RESULTS:-$top/bench/results}
baseline=${BENCH_BASELINE:-}
[[ $secs =~ ^[1-9][0-9]*$ ]] || die "BENCH_SECS must be a whole number of seconds"
[[ $psecs =~ ^[1-9][0-9]*$ ]] || die "BENCH_PROFILE_SECS must be a whole number of seconds"
for cfg in $configs $ppconfigs $repeat $ibconfigs $ibppconfigs $profile $ibprofile; do
  [[ $cfg =~ ^[1-9][0-9]*:[1-9][0-9]*$ ]] || die "bad configuration '$cfg' (SIZE:DEPTH)"
done
for cfg in $tcpconfigs $tcprepeat; do
  [[ $cfg =~ ^[1-9][0-9]*:[1-9][0-9]*(:[1-9][0-9]?)?$ ]] \
    || die "bad configuration '$cfg' (SIZE:DEPTH[:TASKS])"
done
# A profile is scaled by the rate of the same exchange without perf.
for cfg in $profile; do
  [[ " $ppconfigs " == *" $cfg "* ]] || die "BENCH_PROFILE's $cfg is not in BENCH_PINGPONG"
done
for cfg in $tcprepeat; do
  [[ " $tcpconfigs " == *" $cfg "* ]] || die "BENCH_TCP_REPEAT's $cfg is not in BENCH_TCP"
done
for cfg in $tcpprofile; do
  [[ " $tcpconfigs " == *" $cfg "* ]] || die "BENCH_TCP_PROFILE's $cfg is not in BENCH_TCP"
done
for cfg in $ibprofile; do
  [[ " $ibppconfigs " == *" $cfg "* ]] || die "BENCH_IB_PROFILE's $cfg is not in BENCH_IB_PINGPONG"
done
[ -n "$configs$ppconfigs$tcpconfigs" ] \
  || die "nothing to measure over loopback or TCP (BENCH_CONFIGS, BENCH_PINGPONG, BENCH_TCP)"
[ -z "$baseline" ] || [ -f "$baseline" ] || die "no baseline results file $baseline"
words() { wc -w <<< "$1"; }
runs=$(( ($(words "$configs") + $(words "$ppconfigs") + 2 * $(words "$repeat")) * 3 ))
runs=$((runs + $(words "$ibconfigs") * 6 + $(words "$ibppconfigs") * 2))
[ -n "$ibconfigs$ibppconfigs" ] && runs=$((runs + 3))
runs=$((runs + $(words "$tcpconfigs") * 3 + $(words "$tcprepeat") * 2))
# Per run: the exchange and its start-up and drain, a few seconds of guest time more (about
# one second of host time per second of guest time on 2 cores; 3 allowed); plus the boot; a
# profile run also copies perf in and runs perf script (minutes under TCG).
# BENCH_SLOW: host seconds allowed per guest second (3; more when other guests share the cores).
slow=${BENCH_SLOW:-3}
[[ $slow =~ ^[1-9][0-9]?$ ]] || die "BENCH_SLOW must be a whole number from 1 to 99"
# Each TCP run of C and rds_rs has a warm-up exchange of one second before it.
warmups=$(( ($(words "$tcpconfigs") + $(words "$tcprepeat")) * 2 ))
bound=$((runs * (secs + 20) * slow + warmups * 21 * slow \
  + ($(words "$profile") * 3 + ($(words "$ibprofile") + $(words "$tcpprofile")) * 2) \
  * (psecs * slow + 900) + 300))
kdir=$(bash "$here/kernel.sh" plain)
if [ -n "${BENCH_PERIOD:-}" ]; then
  period=$BENCH_PERIOD
elif grep -q '^CONFIG_HIGH_RES_TIMERS=y' "$kdir/.config"; then
  period=100000
else
  # perf's hrtimer fires at the tick: ask for one sample per tick.
  period=$((1000000000 / $(sed -n 's/^CONFIG_HZ=//p' "$kdir/.config")))
fi
[[ $period =~ ^[1-9][0-9]{3,}$ ]] || die "BENCH_PERIOD must be a whole number, at least 1000"
if [ -n "${BENCH_MODULE:-}" ]; then
  [ -f "$BENCH_MODULE" ] || die "BENCH_MODULE: no file $BENCH_MODULE"
  module=$(realpath "$BENCH_MODULE")
  info "measuring $module (BENCH_MODULE)"
else
  module=$(bash "$here/module.sh" "$kdir")
fi
cargo build --release --quiet -p rds-tools
# The commit the module and tools were built from, taken now: the tree may move during the
# run (the report used to name the commit checked out when the guest ended).
commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
dirty=
if [ -z "${BENCH_MODULE:-}" ] && [ -n "$(git status --porcelain -- Kbuild rds rds_loop rds_ib rds_tcp bindings proto tools librds 2>/dev/null)" ]; then
  dirty=-dirty
elif [ -n "$(git status --porcelain -- tools librds 2>/dev/null)" ]; then
  dirty=-dirty
fi
# One folder per run, so that two runs (say, a baseline beside the tree) do not clobber each other.
out=$top/target/bench/run-$(date +%Y%m%d-%H%M%S)-$$
rm -rf "$out"; mkdir -p "$out"
nprof=$(( $(words "$profile") * 3 + ($(words "$ibprofile") + $(words "$tcpprofile")) * 2 ))
step "booting a guest (plain kernel, 1 vCPU, icount): $runs runs of ${secs}s guest time$([ "$nprof" -gt 0 ] && echo ", $nprof of ${psecs}s under perf") (bound ${bound}s)"
python3 tests/harness.py one --kernel "$kdir" --out "$out" --timeout "$bound" --cpus 1 \
  "--qemu-opts=-icount shift=0,sleep=off" -- \
  "$top/tests/guest/bench.sh" bench "$out" "$kdir" "$module" "$top/target/release" "$secs" "$configs" "$repeat" \
  "$ibconfigs" "$ppconfigs" "$ibppconfigs" "$profile" "$period" "$psecs" "$ibprofile" \
  "$tcpconfigs" "$tcprepeat" "$tcpprofile"
[ -s "$out/bench-raw.txt" ] || { tail -30 "$out/bench.log" 2>/dev/null; die "the guest measured nothing (see $out/bench.log, $out/console.txt)"; }

# The report. Debian's python3 (the one with python3-matplotlib), even when another is first
# on PATH.
py=python3; [ -x /usr/bin/python3 ] && py=/usr/bin/python3
name=${BENCH_NAME:-$(date +%F)-$commit$dirty}
mkdir -p "$results"
sha() { sha256sum "$1" | cut -c1-16; }
meta=(
  --meta "date=$(date +%F)"
  --meta "commit=$commit$dirty"
  --meta "rds_rs.ko=${BENCH_MODULE:+$module, }sha256 $(sha "$module")"
  --meta "rds-stress=sha256 $(sha "$top/target/release/rds-stress")"
  --meta "rds-pingpong=sha256 $(sha "$top/target/release/rds-pingpong")"
  --meta "guest kernel=$(sed -n 's/^== guest kernel \([^,]*\),.*/\1/p' "$out/bench.log"), plain, build key $(cat "$kdir/.rds-rs-key")"
  --meta "QEMU=$(qemu-system-x86_64 --version | head -1 | sed 's/QEMU emulator version //'), TCG, -icount shift=0,sleep=off, 1 vCPU"
  --meta "per run=${secs} s of guest time"
  --meta "host time=$((SECONDS - t0)) s for make bench"
)
[ -n "${BENCH_NOTE:-}" ] && meta+=(--meta "note=$BENCH_NOTE")
[ -n "$baseline" ] && meta+=(--baseline "$baseline" --meta "baseline=$(basename "$baseline")")
prof=()
if [ -n "$profile$ibprofile$tcpprofile" ]; then
  # The folded call chains stay beside the results, so the steps can be counted again.
  mkdir -p "$results/$name.profile"
  cp "$out"/profile-*.folded "$results/$name.profile/" 2>/dev/null || true
  gzip -f "$results/$name.profile"/*.folded 2>/dev/null || true
  prof=(--profile "$results/$name.profile" --period "$period")
  meta+=(--meta "perf=$(perf --version 2>/dev/null), cpu-clock every $period ns of guest time, -a -g, ${psecs} s per profile run")
fi
step "results: $results/$name.md"
"$py" "$top/bench/report.py" --raw "$out/bench-raw.txt" --md "$results/$name.md" \
  --png "$results/$name.png" "${prof[@]}" "${meta[@]}"
cp "$results/$name.md" "$results/latest.md"
[ -f "$results/$name.png" ] && cp "$results/$name.png" "$results/latest.png"
echo "(make bench took $((SECONDS - t0))s; per-run output in $out; results in $results/$name.md)"
grep -q ' FAIL$' "$out/bench-raw.txt" && die "some runs failed (see $out/bench.log)"
grep -q '^ok ' "$out/vm.tap" || die "the guest did not finish cleanly (see $out/bench.log)"
