#!/bin/bash
# Faults under RDS over RDMA, rds_rs at both ends, in one guest (the veth pair of
# veth_rdma_up with an rxe device on each end). Two numbered streams run at once, one each
# way between 192.0.2.1 and 192.0.2.2 (rds-tests ib-source / ib-sink: every message checked
# exactly once, in order and intact), and mid-stream:
#   1. the RDMA device goes away and comes back (rdma link delete rxe1, then add);
#   2. the link goes down (veth1 down for a few seconds, then up again: its IPv4 routes and
#      neighbours are put back, as a network manager would);
#   3. the RDMA device goes away and comes back again, with RDMA writes in flight
#      (rds-tests ib-rdma-flood);
#   4. connection-manager handlers racing a teardown (cm_race, below).
# Each fault is a check that prints how many messages of each stream had arrived before it
# and after recovery, and how many connection resets it cost (conn_reset); the streams'
# own verdicts are checks of their own.
#   ib-faults.sh OUT KDIR MODULE TESTS-BIN
# Results in ib-faults-rs.tap (rds_rs only).
set -u
OUT=$1 KDIR=$2 MODULE=$3 TESTS=$4
. "$(dirname "$0")/common.sh"
cd "$OUT" || exit 1
F=ib-faults-rs.tap
INFO=$(dirname "$TESTS")/rds-info
COUNT=2000     # messages per stream (8 B to 9 KiB each)
BOUND=600      # seconds any stream may take (a bound against a hang; a busy host is slow)
A=192.0.2.1 B=192.0.2.2
kmemleak_clear

# got NAME: how many messages the sink NAME received so far. The predicates polled by
# wait_until read the file with at_least instead: a subshell every 0.1 s would take the
# streams' vCPU.
got() { num "$OUT/faults-$1.progress"; echo "$NUM"; }
# counter NAME: the rds_rs counter NAME (rds-info -c).
counter() { "$INFO" -c | awk -v n="$1" '$1 == n { print $2 }'; }
# wait_got NAME N SECONDS: waits until sink NAME has N messages; false if it did not.
wait_got() {
  wait_until "$3" at_least "$OUT/faults-$1.progress" "$2"
}
# dump_state TAG: what the module and the devices say, for a failure's post-mortem
# (OUT/faults-state-TAG.txt).
dump_state() {
  local f=$OUT/faults-state-$1.txt d
  { date +%s.%N; "$INFO" -C -I -t -c 2>&1
    for d in /sys/class/infiniband/*; do
      echo "== $d"; grep -H . "$d"/ports/1/state "$d"/ports/1/hw_counters/* 2>/dev/null
    done; } > "$f"
}
# veth1_back: veth1's IPv4 route and neighbour again (a link that went down lost them).
veth1_back() {
  local m0
  m0=$(cat /sys/class/net/veth0/address)
  ip route replace $A/32 dev veth1 && ip neigh replace $A lladdr "$m0" dev veth1 nud permanent
}

# gsi_repair: soft-RoCE puts a QP in the error state when it cannot send a packet (the link
# down), its management QP (GSI, QP 1) included: a connection manager message that was
# going out during the cut leaves the device's CM deaf for good (no request or reply gets
# through any more; seen with the C-era and the current module alike). An administrator
# re-creates such a device; so does this, and the fault's check names the devices
# (`gsi_recreated`).
gsi=
gsi_repair() {
  local d
  gsi=
  for d in rxe0 rxe1; do
    if rdma res show qp 2>/dev/null | grep -q "link $d/1 lqpn 1 type GSI state ERR"; then
      gsi="${gsi:+$gsi,}$d"
      rdma link delete "$d" && rdma link add "$d" type rxe netdev "veth${d#rxe}"
    fi
  done
}

# rxe1_readd: deletes the RDMA device of veth1 and adds it again 2 s later; prints what failed
# (nothing when both worked).
rxe1_readd() {
  rdma link delete rxe1 || echo "rdma link delete rxe1 failed"
  sleep 2
  rdma link add rxe1 type rxe netdev veth1 || echo "rdma link add rxe1 failed"
}

# fault NAME: breaks and repairs one thing, while both streams run; the check says what
# crossed it.
fault() {
  local name=$1 ab0 ba0 ab1 ba1 r0 r1 why=
  tl "start fault_$name"
  ab0=$(got ab) ba0=$(got ba) r0=$(counter conn_reset)
  case $name in
    link_down_up)
      ip link set veth1 down; sleep 4
      ip link set veth1 up && veth1_back || why="could not bring veth1 back"
      gsi_repair ;;
    rdma_link_readd) why=$(rxe1_readd) ;;
  esac
  # Recovery: both streams move on by at least 50 messages (or finish).
  wait_got ab $(( ab0 + 50 < COUNT ? ab0 + 50 : COUNT )) 180 \
    || why="${why:+$why; }stream a->b stuck at $(got ab)"
  wait_got ba $(( ba0 + 50 < COUNT ? ba0 + 50 : COUNT )) 180 \
    || why="${why:+$why; }stream b->a stuck at $(got ba)"
  ab1=$(got ab) ba1=$(got ba) r1=$(counter conn_reset)
  dump_state "after-$name"
  local obs="a->b $ab0 before, $ab1 after; b->a $ba0 before, $ba1 after; resets +$((r1 - r0))"
  [ "$name" = link_down_up ] && obs="$obs; gsi_recreated=${gsi:-none}"
  echo "# fault $name: $obs" >> "$OUT/faults.log"
  if [ -z "$why" ]; then tap $F ok "ib_fault_rxe_$name" "$obs"
  else tap $F not "ib_fault_rxe_$name" "$obs" "$why"; fi
  tl "stop fault_$name"
}

# short_stream NAME PORT COUNT: COUNT messages from A to B on PORT (every one exactly once,
# in order), within 150 s; prints what went wrong (nothing when all arrived).
short_stream() {
  local name=$1 port=$2 count=$3 sink rc_sink rc_src
  rm -f "$OUT/faults-$name.progress"*
  "$TESTS" ib-sink $B "$port" "$count" "$OUT/faults-$name.progress" 150 > "$OUT/faults-sink-$name.out" 2>&1 &
  sink=$!
  wait_until 60 has "$OUT/faults-sink-$name.out" 'sink bound'
  "$TESTS" ib-source $A $B "$port" "$count" "$OUT/faults-$name-sent" 150 0 "$OUT/faults-$name.progress.done" \
    > "$OUT/faults-source-$name.out" 2>&1
  rc_src=$?
  wait $sink; rc_sink=$?
  [ $rc_src -eq 0 ] && [ $rc_sink -eq 0 ] || echo "stream $name: sink rc=$rc_sink source rc=$rc_src"
}

# cm_race KNOB NAME PORT: with KNOB (a delay of a cm handler of the test build) set, a stream
# starts a connect, and the connection breaks in the handler's window (a reset under the route
# handler; for the passive accept, the reaper, given a short idle time, destroys the passive
# end's new, idle connection); then checks that the handler noticed (rs_ib_cm_raced), that the
# stream got through once the knob was off, and that another one does.
cm_race() {
  local knob=$1 name=$2 port=$3 d=/sys/kernel/debug/rds_rs idle0 c0 c1 why= sink src rc
  idle0=$(cat $d/conn_idle_ms)
  why=$(short_stream "$name-before" "$port" 20)
  c0=$(counter rs_ib_cm_raced)
  echo 4000 > "$d/$knob"
  # Connections with nothing to send stay down after a reset, until the stream sends.
  echo 1 > $d/reset
  if [ "$knob" = ib_accept_delay_ms ]; then
    # The reaper takes up the short idle time at its next run (at most 5 s away) and reaps
    # the idle connections; the passive end's next one is then reaped while it is accepted.
    echo 200 > $d/conn_idle_ms; sleep 6
  fi
  rm -f "$OUT/faults-$name.progress"*
  "$TESTS" ib-sink $B "$port" 20 "$OUT/faults-$name.progress" 150 > "$OUT/faults-sink-$name.out" 2>&1 &
  sink=$!
  wait_until 60 has "$OUT/faults-sink-$name.out" 'sink bound'
  "$TESTS" ib-source $A $B "$port" 20 "$OUT/faults-$name-sent" 150 0 "$OUT/faults-$name.progress.done" \
    > "$OUT/faults-source-$name.out" 2>&1 &
  src=$!
  if [ "$knob" = ib_route_delay_ms ]; then
    # The connect's ROUTE_RESOLVED handler sleeps; the reset comes meanwhile.
    sleep 1.5; echo 1 > $d/reset
  fi
  sleep 6
  c1=$(counter rs_ib_cm_raced)
  echo 0 > "$d/$knob"
  echo "$idle0" > $d/conn_idle_ms
  [ "$c1" -gt "$c0" ] || why="${why:+$why; }no handler found its connection gone (rs_ib_cm_raced $c0 -> $c1)"
  wait $src; rc=$?
  wait $sink; rc=$((rc | $?))
  [ $rc -eq 0 ] || why="${why:+$why; }the stream started during the race failed: $(tail -1 "$OUT/faults-sink-$name.out")"
  local after
  after=$(short_stream "$name-after" "$port" 20)
  [ -z "$after" ] || why="${why:+$why; }$after"
  dump_state "after-$name"
  local obs="rs_ib_cm_raced $c0 -> $c1"
  echo "# fault cm_race $name: $obs" >> "$OUT/faults.log"
  if [ -z "$why" ]; then tap $F ok "ib_fault_rxe_cm_race_$name" "$obs"
  else tap $F not "ib_fault_rxe_cm_race_$name" "$obs" "$why"; fi
}

if ! veth_rdma_up rxe; then
  tap $F not ib_fault_rxe_setup failed "could not set up rxe on a veth pair"
elif ! load_rs; then
  tap $F not ib_fault_rxe_setup failed "insmod rds_rs.ko failed"
else
  tap $F ok ib_fault_rxe_setup "rxe0,rxe1"
  rm -f "$OUT"/faults-*.progress* "$OUT"/faults-*-sent
  "$TESTS" ib-sink $B 4200 $COUNT "$OUT/faults-ab.progress" $BOUND > "$OUT/faults-sink-ab.out" 2>&1 &
  sink_ab=$!
  "$TESTS" ib-sink $A 4201 $COUNT "$OUT/faults-ba.progress" $BOUND > "$OUT/faults-sink-ba.out" 2>&1 &
  sink_ba=$!
  wait_until 60 has "$OUT/faults-sink-ab.out" 'sink bound'
  wait_until 60 has "$OUT/faults-sink-ba.out" 'sink bound'
  "$TESTS" ib-source $A $B 4200 $COUNT "$OUT/faults-ab-sent" $BOUND 0 "$OUT/faults-ab.progress.done" \
    > "$OUT/faults-source-ab.out" 2>&1 &
  src_ab=$!
  "$TESTS" ib-source $B $A 4201 $COUNT "$OUT/faults-ba-sent" $BOUND 0 "$OUT/faults-ba.progress.done" \
    > "$OUT/faults-source-ba.out" 2>&1 &
  src_ba=$!
  # Each fault once both streams are well under way (the first at 300 messages, the
  # second at 1100), and before they end.
  if wait_got ab 300 120 && wait_got ba 300 120; then
    fault rdma_link_readd
  else
    tap $F not ib_fault_rxe_rdma_link_readd "a->b $(got ab), b->a $(got ba)" "the streams did not start"
  fi
  if wait_got ab 1100 180 && wait_got ba 1100 180 && [ "$(got ab)" -lt $((COUNT - 100)) ]; then
    fault link_down_up
  else
    tap $F not ib_fault_rxe_link_down_up "a->b $(got ab), b->a $(got ba)" \
      "the streams did not get far enough between the faults (or ended before the second)"
  fi
  # A stream that stalls is told by its sink's bound; a snapshot while it waits.
  streams_over() {
    { at_least "$OUT/faults-ab.progress" $COUNT && at_least "$OUT/faults-ba.progress" $COUNT; } \
      || { gone $sink_ab && gone $sink_ba; }
  }
  wait_until 120 streams_over
  [ "$(got ab)" -ge $COUNT ] && [ "$(got ba)" -ge $COUNT ] || dump_state stalled
  for p in ab:$sink_ab:$src_ab ba:$sink_ba:$src_ba; do
    IFS=: read -r dir sink src <<< "$p"
    wait "$src"; rc_src=$?
    wait "$sink"; rc_sink=$?
    res=$(grep '^# received' "$OUT/faults-sink-$dir.out")
    if [ $rc_sink -eq 0 ] && [ $rc_src -eq 0 ] && [ -n "$res" ]; then
      tap $F ok "ib_fault_rxe_stream_${dir}_exactly_once_in_order" "${res#\# }"
    else
      tap $F not "ib_fault_rxe_stream_${dir}_exactly_once_in_order" "sink rc=$rc_sink source rc=$rc_src" \
        "$(tail -2 "$OUT/faults-sink-$dir.out") / $(tail -2 "$OUT/faults-source-$dir.out")"
    fi
  done
  # 3. RDMA operations in flight when the operating side's RDMA device goes away and comes
  #    back (rds-tests ib-rdma-flood; the registration lives on the other device, rxe0):
  #    every operation reported once, the registration still good after the reconnect,
  #    nothing left pinned. (A cut link is not used here: when rxe cannot send a packet it
  #    puts the QP in the error state, its management QP 1 included, and a connection
  #    manager message that was going out then leaves the device's CM deaf for good: the
  #    reconnect never completes; Documentation/testing.md.)
  rm -f "$OUT/flood.progress" "$OUT/flood.stop"
  "$TESTS" ib-rdma-flood $A $B "$OUT/flood.progress" "$OUT/flood.stop" \
    > "$OUT/flood.out" 2>&1 & flood=$!
  flood_done() { num "$OUT/flood.progress"; echo "$NUM"; }
  wait_until 240 at_least "$OUT/flood.progress" 300
  f0=$(flood_done) r0=$(counter conn_reset)
  why=$(rxe1_readd)
  [ -z "$why" ] || tap $F not ib_fault_rxe_rdma_flood_link failed "$why"
  wait_until 360 at_least "$OUT/flood.progress" $((f0 + 300))
  [ "$(flood_done)" -ge $((f0 + 300)) ] || dump_state flood
  f1=$(flood_done) r1=$(counter conn_reset)
  touch "$OUT/flood.stop"
  wait $flood; rc=$?
  cat "$OUT/flood.out" >> "$OUT/$F"
  echo "# fault rdma_flood: $f0 operations reported before the removal, $f1 after it, resets +$((r1 - r0))" \
    >> "$OUT/faults.log"
  if [ $rc -eq 0 ] && [ "$f1" -ge $((f0 + 300)) ] && [ $((r1 - r0)) -ge 1 ]; then
    tap $F ok ib_fault_rxe_rdma_flood_link "$f0 before the removal, $f1 after; resets +$((r1 - r0))"
  else
    tap $F not ib_fault_rxe_rdma_flood_link "rc=$rc, $f0 before, $f1 after, resets +$((r1 - r0))" \
      "the operations did not resume after the device came back (or its removal cost no reset)"
  fi
  # 4. Connection-manager handlers that race a teardown, their windows widened by the test
  #    build's delays: (a) the active end's ROUTE_RESOLVED handler has built its QP when a
  #    reset tears the connection down under it; (b) the passive end's accept has built its
  #    QP when the reaper destroys its (idle) connection. The handler must find out and take
  #    its QP down itself (`rs_ib_cm_raced`), nothing may be left behind (kmemleak, KASAN, a
  #    module unload that waits for a path), and traffic must resume (a short stream each).
  # Before them: a reaped connection's sequence numbers outlive it: the peer's retransmissions to the
  #    next connection are dropped as old, not delivered again (rds-tests ib-reap).
  run_prog harness.tap ib_fault_rxe_reap "$TESTS" ib-reap $A $B >> "$OUT/$F"
  cm_race ib_route_delay_ms route_resolved_vs_reset 4300
  cm_race ib_accept_delay_ms accept_vs_reap 4301
  unload_rs || tap $F not ib_fault_rxe_rmmod failed "rmmod rds_rs failed"
fi
veth_rdma_down rxe || tap $F not ib_fault_rxe_teardown failed "veth pair still there"

kunit_expected
kmemleak_report
collect_dmesg
