#!/bin/bash
# One side of the two-guest RDS/IB test: brings up soft-RoCE (or soft-iWARP) on the guest's only
# NIC, loads the in-tree C RDS over RDMA, and runs the ping-pong program as server or client;
# the server first runs the registration rules of RDS/IB (rds-tests rdma-reg).
#   rdma-pair.sh server|client OUT KDIR TESTS-BIN MY-ADDR PEER-ADDR PORT COUNT RXE|SIW PEER-OUT
# The client starts only when the server has written PEER-OUT/ready (both guests see the host's
# filesystem), so it never connects to a guest whose RDS/IB is not listening yet; the server
# starts its bounded wait for pings only when the client has written PEER-OUT/client-ready
# (the guests reach this step at different times: each first runs its half of the suite).
set -u
ROLE=$1 OUT=$2 KDIR=$3 TESTS=$4 ME=$5 PEER=$6 PORT=$7 COUNT=$8 SOFT=$9 PEER_OUT=${10}
. "$(dirname "$0")/common.sh"
cd "$OUT"
kmemleak_clear

# Devices backed by hardware (virtual tunnels such as sit0 have no device link).
nics=$(for n in /sys/class/net/*; do [ -e "$n/device" ] && basename "$n"; done)
if [ "$(echo "$nics" | wc -w)" -ne 1 ]; then
  tap harness.tap not one_nic "$nics" "the guest must have exactly one NIC (the socket link)"
  kmemleak_report
  collect_dmesg; exit 1
fi
ip link set "$nics" up && ip addr add "$ME/24" dev "$nics" \
  && rdma link add "${SOFT}0" type "$SOFT" netdev "$nics" \
  && tap harness.tap ok rdma_link "${SOFT}0@$nics" \
  || tap harness.tap not rdma_link failed "could not set up $SOFT on $nics"

if load_c rdma; then
  if [ "$ROLE" = server ]; then
    # The registration rules of C's RDS/IB (soft-RoCE), paired with rds_rs's loopback run in
    # the suite's rds_rs half (rdma-reg.rs.tap): only the server writes this file.
    run_prog harness.tap rdma_reg_c "$TESTS" rdma-reg "$ME" ib > "$OUT/rdma-reg.c.tap"
    echo ready > "$OUT/ready"
    for _ in $(seq 1800); do [ -e "$PEER_OUT/client-ready" ] && break; sleep 0.5; done
    [ -e "$PEER_OUT/client-ready" ] || tap harness.tap not peer_ready none "client never came"
    run_prog harness.tap pingpong "$TESTS" pingpong server "$ME" "$PORT" "$COUNT" \
      > "$OUT/pingpong-c-$SOFT.tap"
  else
    echo ready > "$OUT/client-ready"
    for _ in $(seq 1800); do [ -e "$PEER_OUT/ready" ] && break; sleep 0.5; done
    [ -e "$PEER_OUT/ready" ] || tap harness.tap not peer_ready none "server never became ready"
    run_prog harness.tap pingpong "$TESTS" pingpong client "$ME" "$PEER" "$PORT" "$COUNT" \
      > "$OUT/pingpong-c-$SOFT.tap"
  fi
  unload_c || tap harness.tap not unload_c failed "rmmod of the C modules failed"
else
  tap harness.tap not load_c failed "insmod of the C RDS modules failed"
fi
rdma link delete "${SOFT}0"
kmemleak_report
collect_dmesg
