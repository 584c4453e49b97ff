#!/bin/bash
# The transport-neutral suites of rds-tests (sendrecv, cmsg, cong, ping, info) over RDS/TCP,
# against the implementation the caller has loaded (tcp-selftest.sh: rds_rs, then C's
# rds + rds_tcp). A destination on the sender's host always goes over loopback, so each suite
# runs in a namespace of its own (rtn0, the near end: 203.0.113.1, fd03::1) with its peer
# sockets in another (rtn1, the far end: 203.0.113.2, 203.0.113.3, fd03::2), the two joined
# by a veth pair; RDS_TESTS_TCP=rtn1 tells the suite so (tests/src/util.rs,
# `tcp_peer_netns`), and its sockets ask for TCP. Fresh namespaces for every suite: the info
# suite lists what its namespaces hold, and a namespace deleted takes its connections with it.
#   tcp-neutral.sh OUT KDIR MODULE TESTS-BIN [IMPL]
# IMPL is c or rs, the one loaded. Without it (`scripts/quick.sh guest tcp-neutral`) the
# script loads rds_rs, runs, unloads, then does the same with C, and reports leaks and the
# kernel log itself. Results: SUITE-tcp.IMPL.tap, which the judge pairs across the two
# implementations as it pairs the loopback runs' SUITE.c.tap and SUITE.rs.tap.
set -u
OUT=$1 KDIR=$2 MODULE=$3 TESTS=$4 IMPL=${5:-}
SELF=$(readlink -f "$0")
. "$(dirname "$0")/common.sh"
cd "$OUT" || exit 1

# The two namespaces and their veth pair; lo up in each (the suites' own loopback checks do
# not run here, but an RDS socket may bind only to an address of an interface that is up).
neutral_ns() {
  ip netns add rtn0 && ip netns add rtn1 \
    && ip link add rtv0 netns rtn0 type veth peer name rtv1 netns rtn1 || return 1
  ip -n rtn0 -batch - <<'EOF' || return 1
link set lo up
link set rtv0 up
addr add 203.0.113.1/24 dev rtv0
addr add fd03::1/64 dev rtv0 nodad
EOF
  ip -n rtn1 -batch - <<'EOF' || return 1
link set lo up
link set rtv1 up
addr add 203.0.113.2/24 dev rtv1
addr add 203.0.113.3/24 dev rtv1
addr add fd03::2/64 dev rtv1 nodad
EOF
}
neutral_ns_del() { ip netns del rtn0 2>/dev/null; ip netns del rtn1 2>/dev/null; }

if [ -z "$IMPL" ]; then
  kmemleak_clear
  if load_rs; then
    bash "$SELF" "$OUT" "$KDIR" "$MODULE" "$TESTS" rs
    unload_rs || tap harness.tap not unload_rs failed "rmmod rds_rs failed"
  else
    tap harness.tap not load_rs failed "insmod failed"
  fi
  kunit_expected
  if load_c; then
    bash "$SELF" "$OUT" "$KDIR" "$MODULE" "$TESTS" c
    unload_c || tap harness.tap not unload_c failed "rmmod of the C modules failed"
  else
    tap harness.tap not load_c failed "insmod of the C modules failed"
  fi
  kmemleak_report
  collect_dmesg
  exit 0
fi

# cong: over TCP C congests too (its loopback never does), so both expect `congests`.
for spec in sendrecv cmsg "cong congests" ping info; do
  read -r -a args <<< "$spec"
  s=${args[0]}
  neutral_ns_del
  if ! neutral_ns; then
    tap harness.tap not "${s}_tcp_${IMPL}_setup" failed "could not make the namespaces"
    continue
  fi
  run_prog harness.tap "${s}_tcp_$IMPL" ip netns exec rtn0 env RDS_TESTS_TCP=rtn1 "$TESTS" "${args[@]}" \
    > "$OUT/$s-tcp.$IMPL.tap"
  # The namespaces go with their sockets' connections (whatever is still in flight).
  neutral_ns_del
done
