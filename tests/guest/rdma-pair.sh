#!/bin/bash
# One side of the two-guest RDS over RDMA test, C RDS against rds_rs: brings up soft-RoCE (or
# soft-iWARP) on the guest's only NIC, loads one implementation (side a: the in-tree C rds_rdma,
# side b: rds_rs), starts echo servers on its IPv4 and IPv6 addresses, and runs the checking
# client (rds-tests ib-client) against the other side's in four rounds:
#   1. b alone, IPv4: rds_rs connects to C (C passive);
#   2. a alone, IPv6: C connects to rds_rs (rds_rs passive);
#   3. both at once, IPv4, a new connection (TOS 7): both ends connect at the same time (C's
#      simultaneous-connect rules against ours);
#   4. the same over IPv6;
# then the project's rds-ping and rds-info -I against the other side, and, with the echo
# servers done, the peer's module reloaded mid-stream:
#   5. rds_rs streams to C (ib-source, paced); C's receiver takes the first 200 messages (in
#      order), exits, and C's modules are unloaded and loaded again; a new receiver takes
#      the rest: from some message on, every one exactly once and in order up to the last
#      (what arrived while no socket was bound is dropped, as RDS drops messages for a port
#      nobody holds; the check prints how many);
#   6. the same with the roles swapped: C streams to rds_rs, rds_rs is reloaded;
#   7. RDMA both ways at once (rds-tests ib-rdma-pair): each side registers memory with
#      RDS_CMSG_RDMA_MAP and has the other write and read it, 30 operations each way;
#   8-9. RDS over TCP (C's rds_tcp against rds_rs's TCP transport), the soft-RDMA device
#      deleted, on new addresses: the echo and client checks again, IPv4 then IPv6, both
#      sides' clients at once;
#   10-11. over TCP, the peer's module reloaded mid-stream as in 5 and 6 (C, then rds_rs);
#   12. over TCP, a stream each way at once while side b's link is cut for 12 s and restored:
#      every message exactly once and in order;
#   13. the same while each side forges TCP resets into its own stack (tcp-rst.py): three
#      of its RDS/TCP connections with the other side are reset, as by a middlebox.
# Side a first runs the registration rules of RDS/IB (rds-tests rdma-reg).
#   rdma-pair.sh a|b OUT KDIR MODULE TESTS-BIN MY-ADDR PEER-ADDR MY-ADDR6 PEER-ADDR6 RXE|SIW PEER-OUT [RDMA-OPS]
# The guests reach this step at different times (each first runs its own suites) and meet
# before the first round and at each round: a side writes OUT/pair-rN when its part of round N
# is done and goes on when the other's PEER-OUT/pair-rN exists (both guests see the host's
# filesystem). Nothing with a lifetime (an echo server, a receiver) starts before both sides
# are there. Results:
# ib-pair-c.tap (side a's clients, C against rds_rs), ib-pair-rs.tap (side b's).
set -u
ROLE=$1 OUT=$2 KDIR=$3 MODULE=$4 TESTS=$5 ME=$6 PEER=$7 ME6=$8 PEER6=$9 SOFT=${10} PEER_OUT=${11} RDMA_OPS=${12:-30}
. "$(dirname "$0")/common.sh"
cd "$OUT"
kmemleak_clear
if [ "$ROLE" = a ]; then impl=c peer_impl=rs; else impl=rs peer_impl=c; fi
f=ib-pair-$impl.tap

# Devices backed by hardware (virtual tunnels such as sit0 have no device link).
nics=$(for n in /sys/class/net/*; do [ -e "$n/device" ] && basename "$n"; done)
if [ "$(echo "$nics" | wc -w)" -ne 1 ]; then
  tap harness.tap not one_nic "$nics" "the guest must have exactly one NIC (the socket link)"
  kmemleak_report
  collect_dmesg; exit 1
fi
ip link set "$nics" up && ip addr add "$ME/24" dev "$nics" \
  && ip -6 addr add "$ME6/64" dev "$nics" nodad \
  && rdma link add "${SOFT}0" type "$SOFT" netdev "$nics" \
  && tap harness.tap ok rdma_link "${SOFT}0@$nics" \
  || tap harness.tap not rdma_link failed "could not set up $SOFT on $nics"

# Both implementations take C's rds_ib_retry_count=7 here (C's default is 1): with it, rxe
# resends an unacknowledged packet for as long as it takes instead of failing the connection
# after twice its 0.54 s ack timeout. Two TCG guests on a loaded host can leave a packet
# unacknowledged that long (a busy-core run of make test saw C's connections fail and
# reconnect hundreds of times in the 1 MiB round, and its echoes miss their 120 s); this test is
# about the two implementations' protocol, not about the host's pace. The single-guest IB
# tests keep the default.
RDS_IB_PARAMS=rds_ib_retry_count=7
if [ $impl = c ]; then load_c; else load_rs; fi
loaded_ok=$?
if [ $loaded_ok -eq 0 ]; then
  mod=rds_rs; [ $impl = c ] && mod=rds_rdma
  v=$(cat /sys/module/$mod/parameters/rds_ib_retry_count 2>&1)
  if [ "$v" = 7 ]; then tap harness.tap ok "pair_retry_count_$impl" "$v"
  else tap harness.tap not "pair_retry_count_$impl" "$v" "rds_ib_retry_count=7 did not take"; fi
fi
if [ $loaded_ok -eq 0 ]; then
  if [ $impl = c ]; then
    # The registration rules of C's RDS/IB (soft-RoCE), paired with rds_rs's loopback run in
    # the suite's rds_rs half (rdma-reg.rs.tap).
    run_prog harness.tap rdma_reg_c "$TESTS" rdma-reg "$ME" ib > "$OUT/rdma-reg.c.tap"
  fi
  # meet N: this side is done with round N (or ready for it); waits for the other side to
  # say the same. No bound of its own: the guests reach this step at different times (each
  # first runs its own suites), and the harness's bound on the whole guest is the safety net;
  # a peer whose guest has ended (the harness writes guest-exited) is not waited for. How
  # long each meeting waited goes to OUT/meet-waits.txt.
  met=1
  meet() {
    echo done > "$OUT/pair-r$1"
    [ $met -eq 1 ] || return 1
    tl "start meet_r$1"
    local t0=$SECONDS
    until [ -e "$PEER_OUT/pair-r$1" ]; do
      if [ -e "$PEER_OUT/guest-exited" ] && [ ! -e "$PEER_OUT/pair-r$1" ]; then
        tap harness.tap not "pair_meet_r$1" none "the other guest ended before round $1"
        echo "round $1: the other guest ended after $((SECONDS - t0))s of waiting" >> "$OUT/meet-waits.txt"
        met=0; tl "stop meet_r$1"; return 1
      fi
      nap 0.5
    done
    echo "round $1: waited $((SECONDS - t0))s for the other guest" >> "$OUT/meet-waits.txt"
    tl "stop meet_r$1"
    grep -q '^failed' "$PEER_OUT/pair-r$1" && { met=0; return 1; }
    return 0
  }
  # echoes_done CHECK OUT-PREFIX PID4 PID6: waits (bounded) for the two echo servers, which
  # the other side's clients stop, then a check per family that each echoed.
  echoes_done() {
    local check=$1 pre=$2 pid fam; shift 2
    for pid in "$@"; do
      wait_until 120 gone "$pid"
      kill "$pid" 2>/dev/null
      wait "$pid"
    done
    for fam in v4 v6; do
      if grep -q '^# echoed' "$pre-$fam.out"; then
        tap $f ok "${check}_$fam" "$(grep '^# echoed' "$pre-$fam.out")"
      else
        tap $f not "${check}_$fam" none "$(tail -3 "$pre-$fam.out")"
      fi
    done
  }
  # Both guests are here before anything with a lifetime starts: the echo servers' bound
  # (1200 s) counts from the meeting, not from whenever this side finished its suites.
  meet arrive
  # Side a's IPv4 server has b's clients of rounds 1 and 3, its IPv6 one b's of round 4;
  # b's IPv4 server a's of round 3, its IPv6 one a's of rounds 2 and 4.
  if [ $impl = c ]; then n4=2 n6=1; else n4=1 n6=2; fi
  "$TESTS" ib-echo "$ME" 4000 4 1200 $n4 > "$OUT/ib-echo-pair-v4.out" 2>&1 & echo4=$!
  "$TESTS" ib-echo "$ME6" 4000 4 1200 $n6 > "$OUT/ib-echo-pair-v6.out" 2>&1 & echo6=$!
  wait_until 60 has "$OUT/ib-echo-pair-v4.out" 'echo bound'
  wait_until 60 has "$OUT/ib-echo-pair-v6.out" 'echo bound'
  client() { # client FAMILY [TOS]
    local me=$ME peer=$PEER tag="${impl}_to_${peer_impl}_$1"
    [ "$1" = v6 ] && me=$ME6 peer=$PEER6
    [ -n "${2:-}" ] && tag="${tag}_tos$2"
    run_prog harness.tap "ib_pair_client_$tag" "$TESTS" ib-client "$me" "$peer" 4000 4 "$tag" \
      ${2:-} >> "$OUT/$f"
    # What each round left: resets, old sequence numbers dropped, and the connections'
    # sequence numbers (to tell, when a round fails, which side resent or accepted what).
    "$(dirname "$TESTS")/rds-info" -c -6 -C > "$OUT/info-after-$tag.txt" 2>&1
  }
  if meet 0; then
    [ $impl = rs ] && client v4
    meet 1 && { [ $impl = c ] && client v6; meet 2; } \
      && { client v4 7; meet 3; } && { client v6 7; meet 4; }
  fi
  # The other side's clients stop our echo servers when they are done; bounded.
  echoes_done ib_pair_${impl}_echo "$OUT/ib-echo-pair" $echo4 $echo6
  # The project's rds-ping and rds-info -I against the other side over the IPv4 connection
  # the rounds left up (either end may be C or rds_rs): three pings answered, and the IB
  # connection listed with both addresses. Each ping waits its interval (3 s) for its reply:
  # between two TCG guests on a busy host a round trip took over a second (CI).
  bin=$(dirname "$TESTS")
  # The connection may be down (rds_rs reaps idle ones) and both sides ping at once: their
  # connects race (C's requests refused while rds_rs's own is under way), which took 4 s.
  # One ping first, not counted, waits up to 30 s for the connection to come up.
  "$bin/rds-ping" -c 1 -i 30 -I "$ME" "$PEER" > "$OUT/rds-ping-first.txt" 2>&1
  out=$("$bin/rds-ping" -c 3 -i 3 -I "$ME" "$PEER" 2>&1); n=$(grep -c ' usec$' <<< "$out")
  if [ "$n" -eq 3 ]; then tap $f ok "ib_pair_${impl}_rds_ping" "3 replies"
  else tap $f not "ib_pair_${impl}_rds_ping" "$n replies" "$out"; fi
  "$bin/rds-info" -c -6 -C > "$OUT/info-end.txt" 2>&1
  out=$("$bin/rds-info" -I 2>&1)
  if grep -Eq "^ *$ME +$PEER +0 " <<< "$out"; then
    tap $f ok "ib_pair_${impl}_rds_info_I" "$ME -> $PEER listed"
  else
    tap $f not "ib_pair_${impl}_rds_info_I" none "$out"
  fi
  # reload_round N: round 5 (C reloaded) or 6 (rds_rs reloaded).
  # reload_round N VICTIM [tcp]: over RDS/IB on the pair's addresses, or (tcp, rounds 10 and
  # 11) over RDS/TCP on the TCP rounds' addresses, where the module reloaded takes its
  # listener and connections with it and the other side reconnects to the new one.
  reload_round() {
    local n=$1 victim=$2 tag log=$OUT/reload-r$1 rc1 rc2 src first got lost why=
    local tr=ib me=$ME peer=$PEER port=4300
    tag=ib_pair_reload_${victim}
    [ "${3:-}" = tcp ] && { tr=tcp me=$T4 peer=$PT4 port=4310 tag=tcp_pair_reload_${victim}; }
    # Both sides are here before the receiver's bound starts.
    meet "${n}s" || return
    if [ $impl = "$victim" ]; then
      RDS_TESTS_TRANSPORT=$tr "$TESTS" ib-sink "$me" $port 200 "$log.p1" 300 > "$log.sink1" 2>&1 & local s1=$!
      wait_until 60 has "$log.sink1" 'sink bound'
      meet "${n}a" || { kill $s1; wait $s1; return; }
      wait $s1; rc1=$?
      if [ $impl = c ]; then unload_c && load_c; else unload_rs && load_rs; fi         || why="the module did not reload"
      RDS_TESTS_TRANSPORT=$tr "$TESTS" ib-sink "$me" $port 600 "$log.p2" 300 resume > "$log.sink2" 2>&1; rc2=$?
      touch "$log.p2.done"   # the sender may close now, whatever the outcome
      first=$(sed -n 's/^# received [0-9]* from \([0-9]*\) .*/\1/p' "$log.sink2")
      got=$(sed -n 's/^# received \([0-9]*\) .*/\1/p' "$log.sink2")
      [ $rc1 -eq 0 ] || why="${why:+$why; }first receiver: $(tail -1 "$log.sink1")"
      [ $rc2 -eq 0 ] || why="${why:+$why; }second receiver: $(tail -1 "$log.sink2")"
      if [ -n "$first" ] && [ "$first" -lt 200 ]; then
        lost="$((200 - first)) of the first receiver's again (never acknowledged before the unload)"
      else
        lost="$(( ${first:-200} - 200 )) dropped while no receiver was bound"
      fi
      if [ -z "$why" ]; then
        tap $f ok "$tag" "200 before the reload in order; after it ${got} in order from ${first}; ${lost}"
      else
        tap $f not "$tag" "rc=$rc1,$rc2" "$why"
      fi
    else
      meet "${n}a" || return
      RDS_TESTS_TRANSPORT=$tr "$TESTS" ib-source "$me" "$peer" $port 600 "$log.sent" 400 60 \
        "$PEER_OUT/reload-r$n.p2.done" \
        > "$log.source" 2>&1; src=$?
      if [ $src -eq 0 ]; then tap $f ok "${tag}_sender" "$(tail -1 "$log.source")"
      else tap $f not "${tag}_sender" "rc=$src" "$(tail -2 "$log.source")"; fi
    fi
  }
  # fault_round N cut|rst: round 12 or 13 (above).
  fault_round() {
    local n=$1 kind=$2 log=$OUT/fault-r$1 port=$((4320 + $1)) sk src rc src_rc act=0 why=
    meet "${n}s" || return
    RDS_TESTS_TRANSPORT=tcp "$TESTS" ib-sink "$T4" $port 400 "$log.p" 300 > "$log.sink" 2>&1 & sk=$!
    wait_until 60 has "$log.sink" 'sink bound'
    meet "${n}a" || { kill $sk; wait $sk; return 1; }
    RDS_TESTS_TRANSPORT=tcp "$TESTS" ib-source "$T4" "$PT4" $port 400 "$log.sent" 300 50 \
      "$PEER_OUT/fault-r$n.done" > "$log.source" 2>&1 & src=$!
    # The fault starts once the stream to this side flows.
    wait_until 120 at_least "$log.p" 32
    "$(dirname "$TESTS")/rds-info" -c -T > "$OUT/info-before-fault-r$n.txt" 2>&1
    case $kind in
      cut)
        if [ "$ROLE" = b ]; then
          sysctl -qw "net.ipv6.conf.$nics.keep_addr_on_down=1"
          { ip link set "$nics" down && sleep 12 && ip link set "$nics" up; } > "$log.cut" 2>&1 || act=1
          if [ $act -eq 0 ]; then tap $f ok "tcp_pair_cut_link" "$nics down 12 s, up"
          else tap $f not "tcp_pair_cut_link" "$(cat "$log.cut")" "the link did not go down and up"; fi
        fi ;;
      rst)
        python3 "$(dirname "$0")/tcp-rst.py" "$nics" "$T4" "$PT4" 3 2 90 > "$log.rst" 2>&1 || act=1
        if [ $act -eq 0 ]; then tap $f ok "tcp_pair_rst_${impl}_injected" "$(tail -1 "$log.rst")"
        else tap $f not "tcp_pair_rst_${impl}_injected" "$(tail -1 "$log.rst")" "fewer resets took than asked"; fi ;;
    esac
    wait $sk; rc=$?
    touch "$log.done"   # the other side's source may close now
    wait $src; src_rc=$?
    if [ $rc -eq 0 ]; then tap $f ok "tcp_pair_${kind}_${impl}_recv" "$(tail -1 "$log.sink")"
    else tap $f not "tcp_pair_${kind}_${impl}_recv" "rc=$rc" "$(tail -2 "$log.sink")"; fi
    if [ $src_rc -eq 0 ]; then tap $f ok "tcp_pair_${kind}_${impl}_send" "$(tail -1 "$log.source")"
    else tap $f not "tcp_pair_${kind}_${impl}_send" "rc=$src_rc" "$(tail -2 "$log.source")"; fi
    "$(dirname "$TESTS")/rds-info" -c -T > "$OUT/info-after-fault-r$n.txt" 2>&1
    return 0
  }
  if [ $met -eq 1 ]; then
    reload_round 5 c; meet 5 && reload_round 6 rs; meet 6
  fi
  # 7. RDMA both ways at once: each side's registrant asks the other's operator for 30
  #    writes and reads of its RDMA_MAP registrations (rds-tests ib-rdma-pair).
  if [ $met -eq 1 ]; then
    run_prog harness.tap "ib_rdma_pair_$impl" "$TESTS" ib-rdma-pair "$ME" "$PEER" \
      "${impl}_with_${peer_impl}" "$RDMA_OPS" >> "$OUT/$f"
    meet 7
  fi
  # 8-9. RDS over TCP, C's rds_tcp against rds_rs's TCP transport: the soft-RDMA device goes
  #    (no address is RDS/IB's any more), and new addresses carry the echo servers and the
  #    client checks again over TCP (RDS_TESTS_TRANSPORT=tcp), IPv4 (round 8) then IPv6
  #    (round 9), each side's client against the other's echo server at the same time: the
  #    smaller address connects, the larger one only nudges (C's rule, both ways).
  if [ $met -eq 1 ]; then
    # C's rds_rdma goes first: deleting the device under it corrupts the kernel (rxe's pools
    # still hold what rds_rdma never gave back: Documentation/c-rds-findings.md). rds_rs
    # takes its device's removal (ib-faults.sh checks it).
    if [ $impl = c ]; then
      rmmod rds_rdma || tap harness.tap not tcp_pair_rmmod_rds_rdma failed "rmmod rds_rdma failed"
    fi
    rdma link delete "${SOFT}0"
    if [ "$ROLE" = a ]; then t=1 pt=2; else t=2 pt=1; fi
    T4=198.51.100.$t PT4=198.51.100.$pt T6=fd02::$t PT6=fd02::$pt
    ip addr add "$T4/24" dev "$nics" && ip -6 addr add "$T6/64" dev "$nics" nodad \
      || tap harness.tap not tcp_pair_addrs failed "could not add the TCP round's addresses"
    if meet 8s; then
      RDS_TESTS_TRANSPORT=tcp "$TESTS" ib-echo "$T4" 4100 4 900 1 > "$OUT/tcp-echo-v4.out" 2>&1 & te4=$!
      RDS_TESTS_TRANSPORT=tcp "$TESTS" ib-echo "$T6" 4100 4 900 1 > "$OUT/tcp-echo-v6.out" 2>&1 & te6=$!
      wait_until 60 has "$OUT/tcp-echo-v4.out" 'echo bound'
      wait_until 60 has "$OUT/tcp-echo-v6.out" 'echo bound'
      tclient() { # tclient FAMILY
        local me=$T4 peer=$PT4 tag="tcp_${impl}_to_${peer_impl}_$1"
        [ "$1" = v6 ] && me=$T6 peer=$PT6
        run_prog harness.tap "tcp_pair_client_$tag" env RDS_TESTS_TRANSPORT=tcp "$TESTS" \
          ib-client "$me" "$peer" 4100 4 "$tag" >> "$OUT/$f"
        "$(dirname "$TESTS")/rds-info" -c -6 -C -T > "$OUT/info-after-$tag.txt" 2>&1
        tpaths "$1" "$me" "$peer"
      }
      tpaths() { # tpaths FAMILY ME PEER: multipath negotiated, 8 TCP sockets between the two
        local flag= n=0 i
        [ "$1" = v6 ] && flag=-6
        for i in $(seq 100); do
          n=$("$(dirname "$TESTS")/rds-info" $flag -T 2>/dev/null \
            | awk -v m="$2" -v p="$3" '$1 == m && $3 == p' | wc -l)
          [ "$n" -eq 8 ] && break
          sleep 0.2
        done
        if [ "$n" -eq 8 ]; then tap "$f" ok "tcp_pair_${impl}_paths_$1" "8 TCP sockets"
        else tap "$f" not "tcp_pair_${impl}_paths_$1" "$n TCP sockets" "multipath: not 8 paths"; fi
      }
      if meet 8a; then
        tclient v4; meet 8 && { tclient v6; meet 9; }
      fi
      echoes_done tcp_pair_${impl}_echo "$OUT/tcp-echo" $te4 $te6
      # 10-11. Over TCP, the peer's module reloaded mid-stream: C (10), then rds_rs (11).
      if [ $met -eq 1 ]; then
        reload_round 10 c tcp; meet 10 && reload_round 11 rs tcp; meet 11
      fi
      # 12-13. Over TCP, faults under two streams at once (each side's ib-source to the
      # other's ib-sink, 400 messages of 8 B to 9 KiB paced 50 ms, every one exactly once and
      # in order): 12, side b's link cut for 12 s (the stream's path waits on TCP's
      # retransmission; the paths that carry nothing may die of keepalive) and restored;
      # 13, each side forges resets into its own stack (tcp-rst.py), three connections each.
      [ $met -eq 1 ] && fault_round 12 cut && meet 12 && fault_round 13 rst && meet 13
    fi
  fi
  if [ $impl = c ]; then
    unload_c || tap harness.tap not unload_c failed "rmmod of the C modules failed"
  else
    unload_rs || tap harness.tap not unload_rs failed "rmmod rds_rs with connections up failed"
    kunit_expected
  fi
else
  tap harness.tap not "load_$impl" failed "insmod of the RDS modules failed"
  for r in arrive 0 1 2 3 4 5s 5a 5 6s 6a 6 7 8s 8a 8 9 10s 10a 10 11s 11a 11 12s 12a 12 13s 13a 13; do echo failed > "$OUT/pair-r$r"; done   # the other side need not wait
fi
rdma link delete "${SOFT}0" 2>/dev/null
kmemleak_report
collect_dmesg
