#!/bin/bash
# RDS over RDMA with rds_rs at both ends, in one guest: the two ends of a veth pair, a soft
# RDMA device on each (veth_rdma_up), soft-RoCE (rxe) and then soft-iWARP (siw), IPv4 and
# IPv6. An echo server on one address, the checking client (rds-tests ib-client) on the other;
# then rmmod with the connections up, which must tear them down and leave nothing behind.
# First, memory registrations on each device with no connection up (rds-tests ib-mr).
#   ib-one.sh OUT KDIR MODULE TESTS-BIN
# Results in ib-rs-SOFT.tap (rds_rs only: C RDS has no iWARP, and C against rds_rs is the
# two-guest step, rdma-pair.sh).
set -u
OUT=$1 KDIR=$2 MODULE=$3 TESTS=$4
. "$(dirname "$0")/common.sh"
cd "$OUT"
kmemleak_clear

for soft in rxe siw; do
  f=ib-rs-$soft.tap
  if ! veth_rdma_up "$soft"; then
    tap $f not "ib_${soft}_setup" failed "could not set up $soft on a veth pair"
    veth_rdma_down "$soft"
    continue
  fi
  tap $f ok "ib_${soft}_setup" "${soft}0,${soft}1"
  if load_rs; then
    # Registrations on the device before anything connects (rds-tests ib-mr).
    for a in 192.0.2.1 fd00::1; do
      run_prog harness.tap "ib_mr_${soft}_$a" "$TESTS" ib-mr "$a" "$soft" >> "$OUT/$f"
    done
    for fam in v4 v6; do
      if [ $fam = v4 ]; then srv=192.0.2.1 cli=192.0.2.2; else srv=fd00::1 cli=fd00::2; fi
      log=$OUT/ib-echo-$soft-$fam.out
      "$TESTS" ib-echo "$srv" 4000 4 600 > "$log" 2>&1 & echo_pid=$!
      wait_until 60 has "$log" 'echo bound'
      run_prog harness.tap "ib_client_${soft}_$fam" "$TESTS" ib-client "$cli" "$srv" 4000 4 \
        "rs_${soft}_$fam" >> "$OUT/$f"
      # The client's last message stops the echo server; one that did not get it is ended.
      wait_until 60 gone "$echo_pid"
      kill "$echo_pid" 2>/dev/null
      wait "$echo_pid"; rc=$?
      if [ $rc -eq 0 ] && grep -q '^# echoed' "$log"; then
        tap $f ok "ib_${soft}_${fam}_echo_exit" "$(grep '^# echoed' "$log")"
      else
        tap $f not "ib_${soft}_${fam}_echo_exit" "rc=$rc" "$(tail -3 "$log")"
      fi
    done
    # A sent message's memory goes back to its sender once the peer's ack settled it: sends
    # in steady state allocate next to nothing (rs_msg_alloc against rs_msg_recycled).
    run_prog harness.tap "ib_recycle_${soft}" "$TESTS" ib-recycle 192.0.2.2 192.0.2.1 "rs_${soft}" >> "$OUT/$f"
    # Many connections (four types of service to three peer addresses, both ends here): what
    # one holds (RDS_INFO_IB_CONNECTIONS, free memory), and that it comes back when those to
    # two of the peers, whose addresses go, are reaped (rds-tests ib-many).
    m0=$(< /sys/class/net/veth0/address)
    for a in 192.0.2.11 192.0.2.12; do
      ip addr add $a/32 dev veth0 && ip route add $a/32 dev veth1 \
        && ip neigh add $a lladdr "$m0" dev veth1 nud permanent
    done
    run_prog harness.tap "ib_many_${soft}" "$TESTS" ib-many "rs_$soft" 192.0.2.2 4 192.0.2.1 192.0.2.11 \
      192.0.2.12 -- 192.0.2.11 192.0.2.12 >> "$OUT/$f"
    # Both ends connect to each other at once, on new connections: the tie-break settles each
    # in one attempt (rds-tests ib-duel: `unsent` holds the requests back so that the end
    # whose request has not left yields every time; `crossed` holds their handling back so
    # that both requests leave and the larger address yields every time).
    run_prog harness.tap "ib_duel_${soft}_race" "$TESTS" ib-duel "rs_$soft" 192.0.2.1 192.0.2.2 \
      100 race >> "$OUT/$f"
    run_prog harness.tap "ib_duel_${soft}_unsent" "$TESTS" ib-duel "rs_$soft" 192.0.2.1 192.0.2.2 \
      110 unsent >> "$OUT/$f"
    run_prog harness.tap "ib_duel_${soft}_crossed" "$TESTS" ib-duel "rs_$soft" 192.0.2.1 192.0.2.2 \
      120 crossed >> "$OUT/$f"
    # RDMA reads and writes across the device's connection (siw: fast registrations, no
    # atomics). What must arrive may take 30 s here, not 5 (megabytes through a soft device
    # under KASAN, on a loaded host: tests/src/util.rs, arrival_bound).
    export RDS_TESTS_ARRIVAL=30
    run_prog harness.tap "ib_rdma_${soft}_v4" "$TESTS" ib-rdma 192.0.2.1 192.0.2.2 "${soft}_v4" >> "$OUT/$f"
    run_prog harness.tap "ib_rdma_${soft}_v6" "$TESTS" ib-rdma fd00::1 fd00::2 "${soft}_v6" >> "$OUT/$f"
    unset RDS_TESTS_ARRIVAL
    # Registrations freed while the peer reads them (siw: the QPs are fenced first, and a
    # fence that is overdue, by the test build's ib_fence_expire, costs its connection).
    run_prog harness.tap "ib_free_race_${soft}" "$TESTS" ib-free-race 192.0.2.1 192.0.2.2 \
      "${soft}_v4" >> "$OUT/$f"
    # RDMA both ways at once between two processes, each a registrant (RDS_CMSG_RDMA_MAP)
    # and an operator for the other (rds-tests ib-rdma-pair, as in rdma-pair.sh against C):
    # every READ's data there at its notification; on siw, with READs out at both ends, the
    # message behind each (which waits for its operation) must not wait for the other's.
    "$TESTS" ib-rdma-pair 192.0.2.1 192.0.2.2 "rs_${soft}_one" 200 > "$OUT/ib-pair-one-$soft.out" 2> "$OUT/ib-pair-one-$soft.err" &
    pair_pid=$!
    run_prog harness.tap "ib_rdma_pair_${soft}_two" "$TESTS" ib-rdma-pair 192.0.2.2 192.0.2.1 \
      "rs_${soft}_two" 200 >> "$OUT/$f"
    wait "$pair_pid" || tap harness.tap not "ib_rdma_pair_${soft}_one_exit" "rc=$?" "test program failed"
    cat "$OUT/ib-pair-one-$soft.out" >> "$OUT/$f"
    # siw: registrations freed while the device's fence rounds are held back 3 s return at
    # once, and those freed meanwhile share a round (rds-tests ib-slow-fence).
    if [ "$soft" = siw ]; then
      run_prog harness.tap ib_slow_fence "$TESTS" ib-slow-fence 192.0.2.1 192.0.2.2 >> "$OUT/$f"
    fi
    # The connections stay up after their sockets are gone; unloading must take them down.
    if unload_rs; then tap $f ok "ib_${soft}_rmmod_with_connections" OK
    else tap $f not "ib_${soft}_rmmod_with_connections" failed "rmmod rds_rs failed"; fi
    # The device goes away under live registrations (siw: with its service connection).
    if load_rs; then
      rm -f "$OUT/mr-mark" "$OUT/mr-go"
      "$TESTS" ib-mr-revoke 192.0.2.1 "$OUT/mr-mark" "$OUT/mr-go" >> "$OUT/$f" 2>&1 & mr_pid=$!
      wait_until 120 test -e "$OUT/mr-mark"
      rdma link delete "${soft}0"
      touch "$OUT/mr-go"
      wait "$mr_pid" || tap $f not ib_mr_revoke_exit "rc=$?" "rds-tests ib-mr-revoke failed"
      unload_rs || tap $f not ib_mr_revoke_rmmod failed "rmmod rds_rs failed"
    fi
  else
    tap $f not "ib_${soft}_load_rs" failed "insmod rds_rs.ko failed"
  fi
  veth_rdma_down "$soft" || tap $f not "ib_${soft}_teardown" failed "veth pair still there"
done

kunit_expected
kmemleak_report
collect_dmesg
