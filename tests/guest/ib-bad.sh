#!/bin/bash
# Bad input from an RDMA peer (issue 10): a user-space raw-verbs RDS/IB peer (badpeer,
# tests/peer/badpeer.c) connects to rds_rs with bad private data, or sends it bad fragments
# after a good handshake. For each scenario: the peer's connection is refused or dropped,
# the counter that says why rises, nothing is delivered (the two good scenarios must be
# delivered, which proves the peer itself speaks the protocol; a replayed message, once
# only: rds-rs's replay rule, which C does not have), and an rds_rs <-> rds_rs
# connection between the same two addresses (a ping-pong kept running throughout)
# carries on. One guest: the two ends of a veth pair with a soft RDMA device on each
# (veth_rdma_up in common.sh), soft-RoCE (rxe) and then soft-iWARP (siw), rds_rs loaded for
# each; rds_rs serves 192.0.2.1, the peer and the background client use 192.0.2.2.
#   ib-bad.sh OUT KDIR MODULE TESTS-BIN [SOFTS]   (the peer is target/badpeer,
#   scripts/build-badpeer.sh; SOFTS "rxe siw" by default: make test runs the two in two guests)
# Results in OUT/ib-bad-rs.tap (rds_rs only; C RDS is not the subject); per device and
# scenario, the peer's report is in OUT/SOFT/badpeer-SCENARIO.out and the counters before
# and after in OUT/SOFT/counters-SCENARIO.{before,after}.
set -u
OUT=$1 KDIR=$2 MODULE=$3 TESTS=$4 SOFTS=${5:-rxe siw}
PEER=$(dirname "$TESTS")/../badpeer
. "$(dirname "$0")/common.sh"
cd "$OUT" || exit 1
F=ib-bad-rs.tap
INFO=$(dirname "$TESTS")/rds-info
SRV=192.0.2.1 CLI=192.0.2.2
RPORT=4000   # the socket the peer's messages are for
BGPORT=4001  # the background ping-pong's echo socket
BGTOS=100    # and its type of service (the scenarios use 0 and 1..21)
STOP=$OUT/stop
rm -f "$STOP"
kmemleak_clear

# Scenario table (badpeer.c says what each sends): name, the outcome the peer must see,
# counters that must rise (at least by one), counters that must not move, and how many
# messages the bound socket must get. Counters are global, so a counter the background
# traffic moves cannot say anything here: the good scenarios are judged by what the socket
# received and by the error counters that must stay still. rs_send_retransmitted must stay
# still in all but the last: it moves when a connection with messages in flight (the
# background's: one is nearly always in flight) is reset; the peer's connections carry none.
# rdma_write_bad_rkey_before_up is badpeer's rdma_write_bad_rkey with rds_rs's ESTABLISHED
# handler held 2 s (the test build's ib_established_delay_ms): the QP fails and its
# receives flush while the connection is not up yet, and rds_rs must still drop it once it
# is (seen once in make test without the knob: the connection stayed up with a dead QP).
# Each scenario has a connection of its own (TOS = its row number), except short_private_8
# (its 8 bytes end before the TOS, so it asks for TOS 0) and same_connection, which asks for
# the background's connection (BGTOS) and must reset it (the background then recovers).
SCENARIOS=(
  "bad_version          rejected     rs_ib_connect_bad_private -                        0"
  "bad_version_5        rejected     rs_ib_connect_bad_private -                        0"
  "short_private        rejected     rs_ib_connect_bad_private -                        0"
  "short_private_8      accepted     -                         rs_ib_connect_bad_private 0"
  "no_private           rejected     rs_ib_connect_bad_private -                        0"
  "zero_daddr           rejected     rs_ib_connect_bad_private -                        0"
  "loopback_saddr       rejected     rs_ib_connect_bad_private -                        0"
  "short_fragment       disconnected rs_ib_bad_fragment,rs_recv_drop_bad_header -       0"
  "too_long             disconnected rs_ib_recv_error          -                        0"
  "wrong_length         disconnected rs_ib_bad_fragment,rs_recv_drop_bad_header -       0"
  "bad_checksum         disconnected rs_ib_bad_fragment,recv_drop_bad_checksum -        0"
  "len_over_1mib        disconnected rs_ib_bad_fragment,rs_recv_drop_bad_header -       0"
  "mismatched_fragments disconnected rs_ib_bad_fragment,rs_recv_drop_bad_header -       0"
  "long_last_fragment   disconnected rs_ib_bad_fragment,rs_recv_drop_bad_header -       0"
  "bad_cong_map         disconnected rs_ib_bad_fragment,rs_recv_drop_bad_header -       0"
  "truncated_ext        disconnected rs_ib_bad_fragment,rs_recv_drop_bad_header -       0"
  "rdma_write_bad_rkey  disconnected -                         -                        0"
  "rdma_write_bad_rkey_before_up disconnected -                -                        0"
  "unknown_ext          stayed       - rs_ib_bad_fragment,rs_ib_recv_error,rs_recv_drop_bad_header,rs_ib_connect_bad_private 1"
  "good                 stayed       - rs_ib_bad_fragment,rs_ib_recv_error,rs_recv_drop_bad_header,rs_ib_connect_bad_private 1"
  "replay               stayed       rs_recv_drop_replay rs_ib_bad_fragment,rs_ib_recv_error,rs_recv_drop_bad_header,rs_ib_connect_bad_private,recv_drop_old_seq 1"
  "same_connection      rejected     ib_listen_closed_stale,conn_reset -                 0"
)

# The helpers below use no external program: every fork and exec costs the TCG guest with
# its debug kernel hundreds of milliseconds (/bin/true 0.4 s, a subshell 0.15 s), and they run
# in loops. The files they read are in the guest's own /tmp (WORK): bash reads a file from the
# shared result folder (virtio-fs) several times slower, line by line (a counter listing 0.6 s
# against 0.1 s). Each scenario's files are copied to OUT/SOFT once it is judged.
# read_counters FILE ARRAY: the counters of an `rds-info -c` listing, by name.
read_counters() {
  local -n arr=$2
  local n v
  arr=()
  while read -r n v; do [[ $v =~ ^[0-9]+$ ]] && arr[$n]=$v; done < "$1"
}
# count_msgs FILE: MSGS = how many messages the receiver reported so far.
count_msgs() {
  local l
  MSGS=0
  while IFS= read -r l; do [[ $l == "msg "* ]] && MSGS=$((MSGS + 1)); done < "$1"
}
# nth_msg FILE N: MSG = the Nth message line (1-based) of the receiver's report.
nth_msg() {
  local l i=0
  MSG=
  while IFS= read -r l; do
    [[ $l == "msg "* ]] && { i=$((i + 1)); [ $i -eq "$2" ] && { MSG=$l; return; }; }
  done < "$1"
}
# now_ms: NOW = milliseconds of the realtime clock.
now_ms() { NOW=$(( ${EPOCHREALTIME/./} / 1000 )); }
declare -A C0 C1

# run_soft SOFT: the whole test over one kind of soft RDMA device (rxe or siw), with rds_rs
# loaded for it and unloaded after.
run_soft() {
  local soft=$1 row sc peer_sc knob want rise still deliver tos rc result outcome m0 m1 p0 p1 t0 secs f
  local obs why a b c sent got total recv_pid bg_pid line version acked log=$OUT/$1
  local work=/tmp/ib-bad-$1
  mkdir -p "$log" "$work"
  rm -f "$STOP" "$work/bg.progress"
  local bgp=$work/bg.progress  # the background ping-pong's round trips so far (num)
  for f in "$PEER" "$INFO" "$TESTS"; do
    [ -x "$f" ] || { tap $F not "ib_bad_${soft}_setup" none "$f is not an executable"; return; }
  done
  if ! veth_rdma_up "$soft"; then
    tap $F not "ib_bad_${soft}_setup" failed "could not set up $soft on a veth pair"
    veth_rdma_down "$soft"
    return
  fi
  if ! load_rs; then
    tap $F not "ib_bad_${soft}_setup" failed "insmod rds_rs.ko failed"
    veth_rdma_down "$soft"
    return
  fi
  tap $F ok "ib_bad_${soft}_setup" "${soft}0,${soft}1"

  # The bound socket that must receive only the good messages.
  "$TESTS" ib-bad recv "$SRV" "$RPORT" "$STOP" 1500 > "$work/recv.log" 2>&1 & recv_pid=$!
  wait_until 60 has "$work/recv.log" '^bound'
  # The other connection that must carry on.
  "$TESTS" ib-bad bg "$CLI" "$SRV" "$BGPORT" "$BGTOS" "$work/bg.progress" "$STOP" 1500 \
    > "$work/bg.log" 2>&1 &
  bg_pid=$!
  wait_until 120 at_least "$bgp" 3
  if ! grep -q '^bound' "$work/recv.log"; then
    tap $F not "ib_bad_${soft}_receiver_start" none "$(tail -3 "$work/recv.log")"
  elif num "$bgp"; [ "$NUM" -lt 3 ]; then
    tap $F not "ib_bad_${soft}_background_start" "$NUM" \
      "the background ping-pong did not start: $(tail -3 "$work/bg.log")"
  else
    tap $F ok "ib_bad_${soft}_background_start" "$NUM"
    tos=0
    for row in "${SCENARIOS[@]}"; do
      read -r sc want rise still deliver <<< "$row"
      tos=$((tos + 1))
      [ "$sc" = same_connection ] && tos=$BGTOS
      [ "$sc" = same_connection ] || still+=,rs_send_retransmitted
      still=${still#-,}
      if [ "$soft" = siw ] && [ "$sc" = short_private_8 ]; then
        # iWARP gives the private data's exact length: 8 bytes are too short.
        want=rejected rise=rs_ib_connect_bad_private still=rs_send_retransmitted
      fi
      if [ "$soft" = siw ] && [ "$sc" = too_long ]; then
        # siw terminates the connection on a SEND longer than the receive: our receive
        # then completes with a length error or, when the termination got there first, as
        # flushed (a flush is not counted as an error of ours); either way rds_rs drops
        # the connection (conn_reset) and delivers nothing.
        rise=conn_reset
      fi
      peer_sc=$sc knob=
      if [ "$sc" = rdma_write_bad_rkey_before_up ]; then
        peer_sc=rdma_write_bad_rkey knob=/sys/kernel/debug/rds_rs/ib_established_delay_ms
        echo 2000 > "$knob"
      fi
      tl "start bad_${soft}_$sc"
      "$INFO" -c > "$work/counters-$sc.before"
      read_counters "$work/counters-$sc.before" C0
      count_msgs "$work/recv.log"; m0=$MSGS
      now_ms; t0=$NOW
      "$PEER" "$CLI" "$SRV" "$peer_sc" "$tos" "$RPORT" 20 > "$work/badpeer-$sc.out" 2>&1; rc=$?
      now_ms; secs=$((NOW - t0))
      [ -n "$knob" ] && echo 0 > "$knob"
      # What the peer saw: its last line, the version of the reply, an ack, what it sent.
      result= version= acked= sent=
      while IFS= read -r line; do
        case $line in
          "result "*) result=$line ;;
          "event version "*) version=$line ;;
          "event frame "*" ack=1 len=0 sport=0 dport=0 "*) acked=yes ;;
          "sent message "*)
            [[ $line =~ ^sent\ message\ (len=[0-9]+\ fnv=[0-9a-f]+)\  ]] \
              && sent=${BASH_REMATCH[1]} ;;
        esac
      done < "$work/badpeer-$sc.out"
      read -r _ outcome _ <<< "$result"
      # What arrives, arrives before the peer sees its connection go (rds_rs handles a
      # frame before it drops the connection); a second more for any late delivery.
      delivered() { count_msgs "$work/recv.log"; [ "$MSGS" -ge $((m0 + deliver)) ]; }
      wait_until 15 delivered
      # The counters that must rise may lag the peer's view under TCG (the completion that
      # counts is handled in a work item): wait for them, bounded; then a moment more for
      # late ones (those that must stay still included) before the counters are read.
      # Without counters that must rise, no listing before that moment (a process start
      # is a good part of a second of the vCPU here).
      end=$((SECONDS + 30))
      while [ "$rise" != - ]; do
        "$INFO" -c > "$work/counters-$sc.after"
        read_counters "$work/counters-$sc.after" C1
        up=1
        for c in ${rise//,/ }; do
          [ "${C1[$c]:-0}" -gt "${C0[$c]:-0}" ] || up=0
        done
        [ $up -eq 1 ] && break
        [ $SECONDS -ge $end ] && break
        nap 0.4
      done
      nap 0.6
      "$INFO" -c > "$work/counters-$sc.after"
      read_counters "$work/counters-$sc.after" C1
      count_msgs "$work/recv.log"; m1=$MSGS
      num "$bgp"; p0=$NUM
      why=()
      [ $rc -eq 0 ] || why+=("badpeer exited $rc")
      [ "$outcome" = "$want" ] || why+=("peer saw '${result:-no result}', expected $want")
      if [ "$want" = rejected ] && [[ $result != *" reason=1 "* ]]; then
        why+=("the reject carries no reason 1 (RDS_RDMA_REJ_INCOMPAT)")
      fi
      if [ "$want" = accepted ] && [[ $version != *" 4.0 "* ]]; then
        # Only a request of major version 0 (zero-padded) is accepted: as 4.0.
        why+=("the reply's version is not 4.0 (${version:-none})")
      fi
      obs="$outcome"
      if [ "$rise" != - ]; then
        for c in ${rise//,/ }; do
          a=${C0[$c]:-} b=${C1[$c]:-}
          if [ -z "$a" ] || [ -z "$b" ]; then why+=("no counter $c"); continue; fi
          obs+=" $c+$((b - a))"
          [ "$b" -gt "$a" ] || why+=("$c did not rise ($a)")
        done
      fi
      if [ "$still" != - ]; then
        for c in ${still//,/ }; do
          a=${C0[$c]:-} b=${C1[$c]:-}
          [ -n "$a" ] && [ "$a" = "$b" ] || why+=("$c moved ($a -> $b)")
        done
      fi
      obs+=" delivered=$((m1 - m0))"
      [ $((m1 - m0)) -eq "$deliver" ] || why+=("$((m1 - m0)) messages delivered, expected $deliver")
      if [ "$deliver" -gt 0 ]; then
        # The message is the peer's, from its port, intact.
        nth_msg "$work/recv.log" $((m0 + 1)); got=$MSG
        [ -n "$sent" ] && [ "$got" = "msg from=$CLI/40000 $sent" ] \
          || why+=("received '$got', sent '$sent' from $CLI/40000")
        # rds_rs acknowledged it (the peer asked: ACK_REQUIRED) with an ack-only frame.
        if [ -n "$acked" ]; then obs+=" acked"
        else why+=("no ack-only frame acknowledging sequence 1 reached the peer"); fi
      fi
      # The background connection carries on: another round trip after the scenario.
      wait_until 60 at_least "$bgp" $((p0 + 1))
      num "$bgp"; p1=$NUM
      obs+=" background+$((p1 - p0)) ${secs}ms"
      [ "$p1" -gt "$p0" ] || why+=("the background ping-pong stalled at $p0 round trips")
      if [ ${#why[@]} -eq 0 ]; then tap $F ok "ib_bad_${soft}_$sc" "$obs"
      else tap $F not "ib_bad_${soft}_$sc" "$obs" "$(IFS=';'; echo "${why[*]}")"; fi
      cp "$work/badpeer-$sc.out" "$work/counters-$sc.before" "$work/counters-$sc.after" "$log/"
      tl "stop bad_${soft}_$sc"
    done
  fi

  # The background ping-pong's own verdict (every echo in order and intact, its
  # connections up at the end), and the receiver's (nothing but the good messages).
  touch "$STOP"
  wait "$bg_pid"; rc=$?
  cp "$work/bg.log" "$log/"
  if grep -q '^ok ib_bad_background \|^not ok ib_bad_background ' "$log/bg.log"; then
    sed -n "s/^\(ok\|not ok\) ib_bad_background /\1 ib_bad_${soft}_background /p" \
      "$log/bg.log" >> "$OUT/$F"
  else
    tap $F not "ib_bad_${soft}_background" "rc=$rc" "no verdict: $(tail -3 "$log/bg.log")"
  fi
  wait "$recv_pid"; rc=$?
  cp "$work/recv.log" "$log/"
  count_msgs "$log/recv.log"; total=$MSGS
  want=$(for row in "${SCENARIOS[@]}"; do echo "$row"; done | awk '{ n += $5 } END { print n }')
  if [ $rc -eq 0 ] && [ "$total" -eq "$want" ]; then tap $F ok "ib_bad_${soft}_receiver" "$total"
  else tap $F not "ib_bad_${soft}_receiver" "$total" \
    "rc=$rc, $total messages in all, expected $want: $(tail -3 "$log/recv.log")"; fi
  # The connections (the background pair, rds_rs's reconnects after each drop) are still
  # up: the unload takes them down.
  if unload_rs; then tap $F ok "ib_bad_${soft}_rmmod" OK
  else tap $F not "ib_bad_${soft}_rmmod" failed "rmmod rds_rs failed"; fi
  veth_rdma_down "$soft" || tap $F not "ib_bad_${soft}_teardown" failed "veth pair still there"
}

for soft in $SOFTS; do run_soft "$soft"; done
kunit_expected
kmemleak_report
collect_dmesg
