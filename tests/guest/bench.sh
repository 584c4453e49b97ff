#!/bin/bash
# Guest side of `make bench` and `make soak`.
#   bench.sh bench OUT KDIR MODULE TOOLS-DIR SECONDS "SIZE:DEPTH ..." "SIZE:DEPTH ..." \
#            ["SIZE:DEPTH ..." ["SIZE:DEPTH ..." ["SIZE:DEPTH ..." ["SIZE:DEPTH ..." \
#            [PERIOD [PROFILE-SECONDS ["SIZE:DEPTH ..." ["SIZE:DEPTH[:TASKS] ..." \
#            ["SIZE:DEPTH[:TASKS] ..."]]]]]]]]]
#     rds-stress (server and client over 127.0.0.1, two processes, one task each) for each
#     configuration of the first list against the in-tree C RDS, rds_rs and AF_UNIX
#     SOCK_SEQPACKET (`rds-stress -U`), in that order, SECONDS of guest time each; then the
#     configurations of the second list (the repeatability check) once more. Meant for a
#     one-vCPU guest under `-icount shift=0,sleep=off`, where guest time counts instructions:
#     nothing in the measured part may wait for the host (programs and the module are copied
#     to the guest's memory first, output goes there and is copied out after each run).
#     Writes bench-raw.txt: "PASS IMPL SIZE DEPTH REQ/S MEDIAN MB/S RTT-US" per run (PASS
#     main or repeat), or "PASS IMPL SIZE DEPTH FAIL".
#     The third list, RDMA over soft-RoCE (an rxe device on each end of a veth pair in this
#     guest, 192.0.2.1 and .2): for each configuration, RDMA writes and then reads of SIZE
#     with `rds-stress -D SIZE [-Z] -o` (64-byte requests and acks, DEPTH outstanding) against
#     C RDS/IB (rds.ko and rds_rdma.ko) and rds_rs, each followed by perftest's raw
#     ib_write_bw/ib_read_bw of SIZE; then 64-byte requests at depth 1 over the same link
#     beside ibv_rc_pingpong's round trips. Lines "ib IMPL KIND SIZE DEPTH REQ/S MB/S" (IMPL c,
#     rs or raw; KIND write, read or send), or "ib IMPL KIND SIZE DEPTH FAIL".
#     The fourth list: rds-pingpong (one client and one server process, blocking sendto/recv,
#     nothing verified; tools/src/bin/rds-pingpong.rs) over 127.0.0.1 against C RDS, rds_rs
#     and AF_UNIX, SIZE-byte requests and 64-byte answers, DEPTH outstanding; the
#     configurations of the second list run again with it too. Lines "pp PASS IMPL SIZE DEPTH
#     REQ/S" (PASS main or repeat), or "pp PASS IMPL SIZE DEPTH FAIL".
#     The fifth list: rds-pingpong over rxe (192.0.2.2 to 192.0.2.1, the same veth pair)
#     against C RDS/IB and rds_rs: lines "pp ib IMPL SIZE DEPTH REQ/S" (or FAIL); with the
#     third list's ibv_rc_pingpong row for the raw floor.
#     The sixth list: configurations of the fourth to run once more, PROFILE-SECONDS each, for
#     C and rds_rs under `perf record -a -g` (cpu-clock, one sample every PERIOD ns of guest
#     time, that is every PERIOD instructions, but at most one per tick without high-resolution
#     timers): "pp profile IMPL SIZE DEPTH REQ/S" (the rate with perf attached)
#     and profile-IMPL-SIZE-DEPTH.folded (call chains with their sample counts, see
#     bench/steps.py) and .perf.txt (perf's own messages). perf and its libraries are
#     copied to guest memory and started with its events disabled; they are enabled (and
#     acknowledged) just before the exchange and disabled just after, so that nothing in the
#     sampled part waits for the host.
#     The seventh list: configurations of the fifth (over rxe) to run once more in the same
#     way under perf, for C RDS/IB and rds_rs: "pp ibprofile IMPL SIZE DEPTH REQ/S" and
#     profile-ib-IMPL-SIZE-DEPTH.folded.
#     The eighth list ("SIZE:DEPTH[:TASKS] ..."): rds-stress over TCP (C RDS with rds_tcp.ko,
#     then rds_rs with its TCP transport) between two network namespaces of this guest joined
#     by a veth pair (server 10.0.0.1 in rdsb0, client 10.0.0.2 in rdsb1: an address of another
#     namespace, so neither implementation takes its loopback path), TASKS tasks each side
#     (default 1), then the same exchange over AF_UNIX in the initial namespace (`-U`); a fresh
#     pair of namespaces for each run, deleted before the module is unloaded; before each TCP
#     run one second of the same exchange, not counted (its failure is only noted in
#     bench.log), so that the measured run finds the connections up. Lines "tcp PASS
#     IMPL SIZE DEPTH TASKS REQ/S MEDIAN MB/S RTT-US CONNS" (CONNS: the RDS TCP connections,
#     port 16385, established in the client's namespace after the run; "-" for unix), or
#     "tcp PASS IMPL SIZE DEPTH TASKS FAIL".
#     The ninth list: configurations of the eighth run once more over TCP (C and rds_rs) at
#     the end of the guest, for the spread (PASS repeat).
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

TOOLS=$5 SECS=$6 CONFIGS=$7 REPEAT=${8:-} IBCONFIGS=${9:-} PPCONFIGS=${10:-}
IBPPCONFIGS=${11:-} PROFILE=${12:-} PERIOD=${13:-100000} PSECS=${14:-$SECS} IBPROFILE=${15:-}
TCPCONFIGS=${16:-} TCPREPEAT=${17:-} TCPPROFILE=${18:-}
exec > "$OUT/bench.log" 2>&1
: > "$OUT/bench-raw.txt"
failed=0

# Everything a run touches lives in guest memory: under icount a read from the host
# filesystem (9p) completes after however long the host takes, and the guest clock skips
# ahead meanwhile.
W=$(mktemp -d /tmp/bench.XXXXXX) || exit 1
cp "$TOOLS/rds-stress" "$TOOLS/rds-pingpong" "$MODULE" "$W/" || exit 1
MODULE=$W/$(basename "$MODULE")
mkdir -p "$W/c"
cp "$KDIR/net/rds/rds.ko" "$KDIR/net/rds/rds_tcp.ko" "$KDIR/net/rds/rds_rdma.ko" "$W/c/" \
  || exit 1
if [ -n "$IBCONFIGS$IBPPCONFIGS" ]; then
  cp /usr/bin/ib_write_bw /usr/bin/ib_read_bw /usr/bin/ibv_rc_pingpong "$W/" || exit 1
fi
KDIR_C=$W/c
STRESS=$W/rds-stress
PINGPONG=$W/rds-pingpong
BENCH_DIR=$(cd "$(dirname "$0")/../../bench" && pwd)
if [ -n "$PROFILE$IBPROFILE$TCPPROFILE" ]; then
  # perf with every library it links, run through the copied loader.
  mkdir -p "$W/perf" || exit 1
  cp /usr/bin/perf $(ldd /usr/bin/perf | awk '$2 == "=>" && $3 ~ /^\// { print $3 }') \
    /lib64/ld-linux-x86-64.so.2 "$W/perf/" || exit 1
fi

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

# exchange NAME SADDR CADDR ARGS...: rds-stress, the server on SADDR and the client from CADDR
# with ARGS; sets cli and srv (their outputs, copied to OUT too), crc and src (their exit
# codes); true when both ended well and the client says result=ok. The server runs in the
# network namespace SRV_NS and the client in CLI_NS when they are set (`ip netns exec`, which
# execs rds-stress: timeout's signal reaches it).
SRV_NS= CLI_NS=
exchange() {
  local name=$1 sa=$2 ca=$3 sin=() cin=(); shift 3
  [ -n "$SRV_NS" ] && sin=(ip netns exec "$SRV_NS")
  [ -n "$CLI_NS" ] && cin=(ip netns exec "$CLI_NS")
  cli=$W/$name.client.txt srv=$W/$name.server.txt
  # Nothing left for writeback to send to the host while the run is measured.
  sync
  timeout $((SECS + 90)) "${sin[@]}" "$STRESS" -r "$sa" -p 4000 > "$srv" 2>&1 & local sp=$!
  timeout $((SECS + 90)) "${cin[@]}" "$STRESS" -r "$ca" -s "$sa" -p 4000 "$@" > "$cli" 2>&1; crc=$?
  wait "$sp"; src=$?
  cp "$cli" "$srv" "$OUT/"
  [ $crc -eq 0 ] && [ $src -eq 0 ] && grep -q 'result=ok' "$cli"
}

# exchange_failed LINE WHAT: records the failure of the last exchange (LINE: the start of its
# bench-raw.txt line).
exchange_failed() {
  echo "$1 FAIL" >> "$OUT/bench-raw.txt"
  echo "== FAILED: $2 (client rc=$crc, server rc=$src)"
  tail -n 5 "$cli" "$srv"
  failed=1
}

# run PASS IMPL SIZE DEPTH: one exchange; appends its line to bench-raw.txt.
k=0
run() {
  local pass=$1 impl=$2 size=$3 depth=$4 flag=()
  [ "$impl" = unix ] && flag=(-U)
  k=$((k + 1))
  local name=run$k-$pass-$impl-$size-$depth cli srv crc src
  echo "-- run $k ($pass): $impl -q $size -a 64 -d $depth -t 1 -T $SECS ${flag[*]}"
  if ! load "$impl"; then
    echo "$pass $impl $size $depth FAIL" >> "$OUT/bench-raw.txt"
    echo "== FAILED: loading $impl"; failed=1; return
  fi
  if exchange "$name" 127.0.0.1 127.0.0.1 -q "$size" -a 64 -d "$depth" -t 1 -T "$SECS" \
    "${flag[@]}"; then
    local sum rate med mb rtt
    sum=$(grep '^summary: ' "$cli")
    field() { sed -n "s/.* $1=\([0-9.]*\) .*/\1/p" <<< "$sum"; }
    rate=$(field req_per_s) med=$(field req_per_s_median) mb=$(field mb_per_s) rtt=$(field rtt_us)
    echo "$pass $impl $size $depth $rate $med $mb $rtt" >> "$OUT/bench-raw.txt"
    echo "   $rate requests/s"
  else
    exchange_failed "$pass $impl $size $depth" "$impl size $size depth $depth"
  fi
  unload "$impl" || { echo "== rmmod ($impl) FAILED"; failed=1; }
}

# tcp_up: the two namespaces of the TCP runs, rdsb0 (10.0.0.1) and rdsb1 (10.0.0.2), joined by
# a veth pair, loopback up in each. tcp_down deletes them (with whatever they still hold).
tcp_up() {
  ip netns add rdsb0 && ip netns add rdsb1 \
    && ip link add rbv0 netns rdsb0 type veth peer name rbv1 netns rdsb1 \
    && ip -n rdsb0 addr add 10.0.0.1/24 dev rbv0 && ip -n rdsb1 addr add 10.0.0.2/24 dev rbv1 \
    && ip -n rdsb0 link set rbv0 up && ip -n rdsb1 link set rbv1 up \
    && ip -n rdsb0 link set lo up && ip -n rdsb1 link set lo up
}
tcp_down() { ip netns del rdsb0 2>/dev/null; ip netns del rdsb1 2>/dev/null; true; }

# run_tcp PASS IMPL SIZE DEPTH TASKS: one rds-stress exchange over TCP between the namespaces
# (IMPL c or rs), or over AF_UNIX in the initial namespace (unix); appends its line to
# bench-raw.txt.
run_tcp() {
  local pass=$1 impl=$2 size=$3 depth=$4 tasks=$5 flag=() sa=10.0.0.1 ca=10.0.0.2 secs=$SECS
  local perfed=0 tag=tcp-$impl-$size-$depth
  [ "$pass" = profile ] && secs=$PSECS perfed=1
  k=$((k + 1))
  local name=run$k-tcp-$pass-$impl-$size-$depth-$tasks line="tcp $pass $impl $size $depth $tasks"
  local cli srv crc src conns=-
  if [ "$impl" = unix ]; then
    flag=(-U) sa=127.0.0.1 ca=127.0.0.1
  elif ! tcp_up; then
    echo "$line FAIL" >> "$OUT/bench-raw.txt"
    echo "== FAILED: making the namespaces"; tcp_down; failed=1; return
  else
    SRV_NS=rdsb0 CLI_NS=rdsb1
  fi
  echo "-- run $k (tcp $pass): $impl -r $ca -s $sa -q $size -a 64 -d $depth -t $tasks -T $secs ${flag[*]}"
  if ! load "$impl"; then
    echo "$line FAIL" >> "$OUT/bench-raw.txt"
    echo "== FAILED: loading $impl"; failed=1; SRV_NS= CLI_NS=; tcp_down; return
  fi
  # The warm-up: one second of the same exchange, not counted, so that the measured run finds
  # the RDS connections up (C's rds_tcp brings up its 8 paths after a handshake on the first,
  # and 6.12's can lose a message sent while they come up). Its failure is only noted.
  if [ "$impl" != unix ] && ! exchange "$name-warmup" "$sa" "$ca" -q "$size" -a 64 \
    -d "$depth" -t "$tasks" -T 1; then
    echo "   (the warm-up failed: client rc=$crc, server rc=$src; $name-warmup.*.txt)"
    grep -h '^rds-stress: ' "$cli" "$srv" | sed 's/^/   /'
  fi
  # ran: 0 measured, 1 the exchange failed, 2 perf failed (its line written).
  local ran=0
  if [ $perfed = 1 ] && ! perf_start "$tag"; then
    perf_failed "$line"; ran=2
  else
    exchange "$name" "$sa" "$ca" -q "$size" -a 64 -d "$depth" -t "$tasks" -T "$secs" \
      "${flag[@]}" || ran=1
    if [ $perfed = 1 ] && ! perf_stop "$tag" && [ $ran = 0 ]; then perf_failed "$line"; ran=2; fi
  fi
  if [ $ran = 0 ]; then
    local sum rate med mb rtt
    sum=$(grep '^summary: ' "$cli")
    field() { sed -n "s/.* $1=\([0-9.]*\) .*/\1/p" <<< "$sum"; }
    rate=$(field req_per_s) med=$(field req_per_s_median) mb=$(field mb_per_s) rtt=$(field rtt_us)
    # The RDS connections (paths) the run had up: TCP to or from port 16385 in the client's
    # namespace (none would mean the exchange went over the loopback transport).
    if [ "$impl" != unix ]; then
      ip netns exec rdsb1 ss -Htn state established > "$W/$name.ss.txt" 2>&1
      cp "$W/$name.ss.txt" "$OUT/"
      conns=$(grep -c ':16385\b' "$W/$name.ss.txt")
    fi
    echo "$line $rate $med $mb $rtt $conns" >> "$OUT/bench-raw.txt"
    echo "   $rate requests/s, $conns RDS TCP connections"
  elif [ $ran = 1 ]; then
    exchange_failed "$line" "tcp $impl size $size depth $depth tasks $tasks"
  fi
  SRV_NS= CLI_NS=
  [ "$impl" = unix ] || tcp_down
  unload "$impl" || { echo "== rmmod ($impl) FAILED"; failed=1; }
}

# pingpong NAME SECONDS ARGS...: one rds-pingpong run of SECONDS with ARGS; sets cli (its
# output, copied to OUT too) and crc (its exit code); true when it ended well with a summary,
# and then sets rate.
pingpong() {
  local name=$1 secs=$2; shift 2
  cli=$W/$name.txt rate=
  sync
  timeout $((secs + 90)) "$PINGPONG" -T "$secs" "$@" > "$cli" 2>&1; crc=$?
  cp "$cli" "$OUT/"
  [ $crc -eq 0 ] || return 1
  rate=$(sed -n 's/^summary: .* req_per_s=\([0-9.]*\) .*/\1/p' "$cli")
  [ -n "$rate" ]
}

# run_pp PASS IMPL SIZE DEPTH: one rds-pingpong exchange over 127.0.0.1 (PASS main, repeat
# or profile), or over rxe (PASS ib); appends its line to bench-raw.txt.
run_pp() {
  local pass=$1 impl=$2 size=$3 depth=$4 args=() loader=load cli crc rate secs=$SECS
  local tag=$impl-$size-$depth perfed=0
  case $impl in unix) args=(-U) ;; esac
  case $pass in profile|ibprofile) secs=$PSECS perfed=1 ;; esac
  if [ "$pass" = ib ] || [ "$pass" = ibprofile ]; then
    args=(-r 192.0.2.2 -s 192.0.2.1) loader=ib_load
  fi
  [ "$pass" = ibprofile ] && tag=ib-$tag
  k=$((k + 1))
  local name=run$k-pp-$pass-$impl-$size-$depth line="pp $pass $impl $size $depth"
  echo "-- run $k (pingpong $pass): $impl -q $size -a 64 -d $depth -T $secs ${args[*]}"
  if ! $loader "$impl"; then
    echo "$line FAIL" >> "$OUT/bench-raw.txt"
    echo "== FAILED: loading $impl"; failed=1; return
  fi
  if [ $perfed = 1 ] && ! perf_start "$tag"; then
    perf_failed "$line"
  elif pingpong "$name" "$secs" -q "$size" -a 64 -d "$depth" "${args[@]}"; then
    if [ $perfed = 0 ] || perf_stop "$tag"; then
      echo "$line $rate" >> "$OUT/bench-raw.txt"
      echo "   $rate requests/s"
    else
      perf_failed "$line"
    fi
  else
    [ $perfed = 1 ] && perf_stop "$tag"
    echo "$line FAIL" >> "$OUT/bench-raw.txt"
    echo "== FAILED: pingpong $pass $impl size $size depth $depth (rc=$crc)"
    tail -n 5 "$cli"
    failed=1
  fi
  unload "$impl" || { echo "== rmmod ($impl) FAILED"; failed=1; }
}

# perf_start TAG: perf record -a -g on cpu-clock, events disabled until perf acknowledges the
# enable command on its control fifo (so that its start-up, which reads the host's
# filesystem, is not sampled and sampling has begun before the exchange does).
PERF=("$W/perf/ld-linux-x86-64.so.2" --library-path "$W/perf" "$W/perf/perf")
perf_pid=
perf_start() {
  local tag=$1 a
  rm -f "$W/perf.ctl" "$W/perf.ack" "$W/perf.data"
  mkfifo "$W/perf.ctl" "$W/perf.ack" || return 1
  timeout $((PSECS + 300)) "${PERF[@]}" record -a -g -e cpu-clock -c "$PERIOD" -m 1024 -N -B \
    -D -1 --control "fifo:$W/perf.ctl,$W/perf.ack" -o "$W/perf.data" \
    > "$W/profile-$tag.perf.txt" 2>&1 &
  perf_pid=$!
  exec 7<> "$W/perf.ctl" 6<> "$W/perf.ack"
  echo enable >&7
  read -r -t 120 -u 6 a && [ "$a" = ack ]
}
# perf_stop TAG: disables the events (acknowledged), ends perf (SIGINT to its pid), and turns
# the samples into profile-TAG.folded in OUT (while the module is still loaded, so that its
# symbols resolve).
perf_stop() {
  local tag=$1 a ok=0
  echo disable >&7
  read -r -t 120 -u 6 a && [ "$a" = ack ] || ok=1
  exec 7>&- 6<&-
  kill -INT "$perf_pid" 2> /dev/null
  # perf ends itself with the signal it got (timeout passes it on): 130.
  wait "$perf_pid"; case $? in 0|130) ;; *) ok=1 ;; esac
  perf_pid=
  cp "$W/profile-$tag.perf.txt" "$OUT/"
  [ $ok -eq 0 ] || return 1
  # perf script's lines: a sample's "comm" line, then "ip sym (dso)" per frame, leaf first;
  # bench/steps.py folds them. Symbols from /proc/kallsyms: perf finds no file for rds_rs.ko
  # (it was loaded from this guest's memory), and would otherwise leave its frames unnamed.
  "${PERF[@]}" script --kallsyms /proc/kallsyms -i "$W/perf.data" -F comm,ip,sym,dso \
    2>> "$OUT/profile-$tag.perf.txt" \
    | python3 "$BENCH_DIR/steps.py" fold > "$OUT/profile-$tag.folded" || return 1
  [ -s "$OUT/profile-$tag.folded" ]
}
# perf_failed LINE: records a profile run whose perf part failed.
perf_failed() {
  echo "$1 FAIL" >> "$OUT/bench-raw.txt"
  echo "== FAILED: perf for $1 (see profile-*.perf.txt)"
  [ -n "$perf_pid" ] && { kill -INT "$perf_pid" 2> /dev/null; wait "$perf_pid"; perf_pid=; }
  failed=1
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
for cfg in $PPCONFIGS; do
  for impl in c rs unix; do run_pp main "$impl" "${cfg%:*}" "${cfg#*:}"; done
done
# Over TCP between two namespaces (SIZE:DEPTH[:TASKS]).
for cfg in $TCPCONFIGS; do
  IFS=: read -r size depth tasks <<< "$cfg"
  for impl in c rs unix; do run_tcp main "$impl" "$size" "$depth" "${tasks:-1}"; done
done
for cfg in $REPEAT; do
  for impl in c rs unix; do run repeat "$impl" "${cfg%:*}" "${cfg#*:}"; done
  for impl in c rs unix; do run_pp repeat "$impl" "${cfg%:*}" "${cfg#*:}"; done
done
for cfg in $TCPREPEAT; do
  IFS=: read -r size depth tasks <<< "$cfg"
  for impl in c rs; do run_tcp repeat "$impl" "$size" "$depth" "${tasks:-1}"; done
done
for cfg in $PROFILE; do
  for impl in c rs unix; do run_pp profile "$impl" "${cfg%:*}" "${cfg#*:}"; done
done
# Over TCP under perf, C and rds_rs (profile-tcp-IMPL-SIZE-DEPTH.folded).
for cfg in $TCPPROFILE; do
  IFS=: read -r size depth tasks <<< "$cfg"
  for impl in c rs; do run_tcp profile "$impl" "$size" "$depth" "${tasks:-1}"; done
done
# RDMA over rxe (see the top).
ib_load() { # IMPL
  case $1 in
    c) loaded rds_rs && return 1; insmod "$KDIR_C/rds.ko" && insmod "$KDIR_C/rds_rdma.ko" ;;
    rs) load_rs ;;
  esac
}
# run_ib IMPL KIND SIZE DEPTH: rds-stress over rxe; appends its line to bench-raw.txt.
run_ib() {
  local impl=$1 kind=$2 size=$3 depth=$4 extra=() field=rdma_mb_per_s
  case $kind in
    write) extra=(-D "$size") ;;
    read) extra=(-D "$size" -Z) ;;
    send) field=mb_per_s ;;
  esac
  k=$((k + 1))
  local name=run$k-ib-$impl-$kind-$size-$depth cli srv crc src
  local q=64; [ "$kind" = send ] && q=$size
  echo "-- run $k (ib): $impl -r 192.0.2.2 -s 192.0.2.1 -o -q $q -a 64 -d $depth -t 1 -T $SECS ${extra[*]}"
  if ! ib_load "$impl"; then
    echo "ib $impl $kind $size $depth FAIL" >> "$OUT/bench-raw.txt"
    echo "== FAILED: loading $impl"; failed=1; return
  fi
  if exchange "$name" 192.0.2.1 192.0.2.2 -o -q "$q" -a 64 -d "$depth" -t 1 -T "$SECS" \
    "${extra[@]}"; then
    local sum rate mb
    sum=$(grep '^summary: ' "$cli")
    rate=$(sed -n 's/.* req_per_s=\([0-9.]*\) .*/\1/p' <<< "$sum")
    mb=$(sed -n "s/.* $field=\([0-9.]*\) .*/\1/p" <<< "$sum")
    echo "ib $impl $kind $size $depth $rate $mb" >> "$OUT/bench-raw.txt"
    echo "   $rate requests/s, $mb MB/s"
  else
    exchange_failed "ib $impl $kind $size $depth" "ib $impl $kind $size depth $depth"
  fi
  unload "$impl" || { echo "== rmmod ($impl) FAILED"; failed=1; }
}
# run_raw KIND SIZE: raw verbs over the same devices, no RDS loaded: perftest's ib_write_bw /
# ib_read_bw for SECS seconds of guest time (messages/s from its average MiB/s), or for the
# round trips ibv_rc_pingpong (one over its microseconds per iteration, a send each way).
# perftest polls its completion queue: at nice 19 the polling leaves the one vCPU to rxe, which
# does the work of both ends in the kernel (at nice 0 it takes half, and the rates drop by a
# third; perftest's events mode runs neither writes nor timed runs). Its ib_send_lat is not
# usable here: polling, each round trip waits for a scheduler tick (4 ms); with events it
# hangs on rxe. ibv_rc_pingpong sleeps on completion events (-e).
run_raw() {
  local kind=$1 size=$2 cmd
  case $kind in
    write) cmd=(nice -n 19 "$W/ib_write_bw" -d rxe0 -x 1 -s "$size" -D "$SECS" -F) ;;
    read) cmd=(nice -n 19 "$W/ib_read_bw" -d rxe0 -x 1 -s "$size" -D "$SECS" -F) ;;
    send) cmd=("$W/ibv_rc_pingpong" -d rxe0 -g 1 -e -s "$size" -n 20000) ;;
  esac
  k=$((k + 1))
  local cli=$W/run$k-raw-$kind-$size.client.txt srv=$W/run$k-raw-$kind-$size.server.txt
  echo "-- run $k (ib): ${cmd[*]//rxe0/rxe0|rxe1}"
  sync
  timeout $((SECS + 90)) "${cmd[@]}" > "$srv" 2>&1 & local sp=$!
  sleep 3
  timeout $((SECS + 90)) "${cmd[@]//rxe0/rxe1}" 192.0.2.1 > "$cli" 2>&1; local crc=$?
  wait "$sp"; local src=$?
  cp "$cli" "$srv" "$OUT/"
  local res rate= mb=
  if [ $crc -eq 0 ] && [ "$kind" = send ]; then
    # "N iters in T seconds = U usec/iter"
    res=$(sed -n 's/.* = \([0-9.]*\) usec\/iter.*/\1/p' "$cli")
    [ -n "$res" ] && rate=$(awk -v u="$res" 'BEGIN { if (u > 0) printf "%.0f", 1e6 / u }')
  elif [ $crc -eq 0 ]; then
    # "#bytes #iterations peak avg[MiB/s] MsgRate": perftest's MB is a MiB, and MsgRate's six
    # decimals are too coarse.
    res=$(awk -v s="$size" '$1 == s && NF >= 5 { print $4; exit }' "$cli")
    [ -n "$res" ] && rate=$(awk -v b="$res" -v s="$size" 'BEGIN { printf "%.0f", b * 1048576 / s }')
  fi
  # Bytes per second as rds-stress counts them: a round trip moves SIZE each way.
  local ways=1; [ "$kind" = send ] && ways=2
  [ -n "$rate" ] && mb=$(awk -v r="$rate" -v s="$size" -v w=$ways 'BEGIN { printf "%.2f", r * s * w / 1e6 }')
  if [ -n "$rate" ] && [ "$rate" != 0 ]; then
    echo "ib raw $kind $size 1 $rate $mb" >> "$OUT/bench-raw.txt"
    echo "   $rate /s, $mb MB/s"
  else
    echo "ib raw $kind $size 1 FAIL" >> "$OUT/bench-raw.txt"
    echo "== FAILED: raw $kind $size (client rc=$crc, server rc=$src)"
    tail -n 5 "$cli" "$srv"
    failed=1
  fi
}
if [ -n "$IBCONFIGS$IBPPCONFIGS" ]; then
  if veth_rdma_up rxe; then
    for cfg in $IBCONFIGS; do
      for kind in write read; do
        for impl in c rs; do run_ib "$impl" "$kind" "${cfg%:*}" "${cfg#*:}"; done
        run_raw "$kind" "${cfg%:*}"
      done
    done
    for impl in c rs; do run_ib "$impl" send 64 1; done
    run_raw send 64
    for cfg in $IBPPCONFIGS; do
      for impl in c rs; do run_pp ib "$impl" "${cfg%:*}" "${cfg#*:}"; done
    done
    for cfg in $IBPROFILE; do
      for impl in c rs; do run_pp ibprofile "$impl" "${cfg%:*}" "${cfg#*:}"; done
    done
  else
    echo "== FAILED: could not set up rxe on a veth pair"
    echo "ib rs write 0 0 FAIL" >> "$OUT/bench-raw.txt"
    failed=1
  fi
  veth_rdma_down rxe
fi
echo "== $k runs in $(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN {printf "%.1f", b - a}') s of guest time"
dmesg > "$OUT/dmesg.txt"
exit $failed
