#!/bin/bash
# Guest side of `make demo`: load rds_rs, show its socket behaviour next to the in-tree C RDS,
# then real traffic: an rds-stress server and client (two processes) over 127.0.0.1, and RDS
# over soft-RoCE (an rxe device on each end of a veth pair in this guest, 192.0.2.1 and
# 192.0.2.2): rds-stress with RDMA writes and then reads into and out of memory each request
# registers (every byte verified), rds-ping, rds-info -I; first against rds_rs, then against C
# RDS (rds.ko, rds_tcp.ko, rds_rdma.ko), and the ratios of the rates. Meant for a guest under
# QEMU's instruction counter (scripts/demo.sh), where a rate counts instructions and the ratio
# repeats from run to run.
#   demo.sh OUT KDIR MODULE TESTS-BIN TOOLS-DIR
# Writes demo.txt (what the demo shows) and demo-result.txt (one line per exchange,
# "exchange loop|write|read rs|c ok|FAIL <requests/s>"). Exits non-zero if any exchange, ping
# or info query failed.
set -u
OUT=$1 KDIR=$2 MODULE=$3 TESTS=$4 TOOLS=$5
. "$(dirname "$0")/common.sh"
exec > "$OUT/demo.txt" 2>&1
cd "$OUT" || exit 1
: > "$OUT/demo-result.txt"
failed=0
# The exchange both implementations run: 1 KiB requests, 64-byte acks, 8 outstanding.
STRESS_ARGS=(-q 1024 -a 64 -d 8 -t 1 -T 5)
# Over soft-RoCE: 64-byte requests and answers, 8 outstanding, a 64 KiB RDMA each.
RDMA_ARGS=(-o -q 64 -a 64 -d 8 -t 1 -T 5 -D 65536)
indent() { sed 's/^/   /'; }

# exchange LABEL PORT: an rds-stress server and client over 127.0.0.1, rds-info snapshots
# during and after, rds-ping. Records "exchange loop LABEL ok|FAIL RATE" in demo-result.txt.
exchange() {
  local label=$1 port=$2 ok=1 rate=0
  local srv=$OUT/stress-$label-server.txt cli=$OUT/stress-$label-client.txt
  echo "== rds-stress over 127.0.0.1 against $label: two processes"
  echo "   server: rds-stress -r 127.0.0.1 -p $port"
  echo "   client: rds-stress -r 127.0.0.1 -s 127.0.0.1 -p $port ${STRESS_ARGS[*]}"
  timeout 120 "$TOOLS/rds-stress" -r 127.0.0.1 -p "$port" > "$srv" 2>&1 & local sp=$!
  timeout 120 "$TOOLS/rds-stress" -r 127.0.0.1 -s 127.0.0.1 -p "$port" "${STRESS_ARGS[@]}" \
    > "$cli" 2>&1 & local cp=$!
  sleep 3
  echo "== rds-info -k -C while it runs ($label)"
  "$TOOLS/rds-info" -k -C 2>&1 | indent
  [ "${PIPESTATUS[0]}" -eq 0 ] || { echo "   FAILED: rds-info -k -C"; ok=0; }
  wait "$cp"; local crc=$?
  wait "$sp"; local src=$?
  echo "-- client output:"; indent < "$cli"
  echo "-- server output:"; indent < "$srv"
  if [ $crc -ne 0 ] || [ $src -ne 0 ] || ! grep -q 'result=ok' "$cli" || ! grep -q 'result=ok' "$srv"; then
    echo "   FAILED: the rds-stress exchange against $label did not complete (client rc=$crc, server rc=$src)"
    ok=0
  else
    rate=$(sed -n 's/^summary: .* req_per_s=\([0-9]*\) .*/\1/p' "$cli")
    local sent rcvd
    sent=$(sed -n 's/^summary: .* req_sent=\([0-9]*\) .*/\1/p' "$cli")
    rcvd=$(sed -n 's/^summary: .* peer_req_rcvd=\([0-9]*\) .*/\1/p' "$cli")
    echo "== $label: the client sent $sent requests and answered $rcvd from the server, every message verified; $rate requests/s both ways"
  fi
  echo "== rds-ping -c 3 -i 0.2 127.0.0.1 ($label)"
  timeout 30 "$TOOLS/rds-ping" -c 3 -i 0.2 127.0.0.1 2>&1 | indent
  [ "${PIPESTATUS[0]}" -eq 0 ] || { echo "   FAILED: rds-ping got no reply"; ok=0; }
  echo "== rds-info -c after the run ($label; non-zero counters only)"
  "$TOOLS/rds-info" -c > "$OUT/counters-$label.txt" 2>&1
  local irc=$?
  awk 'NR <= 2 || ($NF ~ /^[0-9]+$/ && $NF != 0)' "$OUT/counters-$label.txt" | indent
  [ $irc -eq 0 ] || { echo "   FAILED: rds-info -c"; ok=0; }
  echo "== rds-info -C after the run ($label)"
  "$TOOLS/rds-info" -C 2>&1 | indent
  [ "${PIPESTATUS[0]}" -eq 0 ] || { echo "   FAILED: rds-info -C"; ok=0; }
  if [ $ok -eq 1 ]; then echo "exchange loop $label ok $rate" >> "$OUT/demo-result.txt"
  else echo "exchange loop $label FAIL 0" >> "$OUT/demo-result.txt"; failed=1; fi
}

# over_rxe LABEL: RDS over soft-RoCE between the two ends of the veth pair: rds-stress with RDMA
# writes, then reads (64-byte requests and answers, 8 outstanding, each request registering
# 64 KiB that the server writes or reads, every byte checked), rds-ping, rds-info -I while a
# run is up. Records "exchange write|read LABEL ok|FAIL RATE".
over_rxe() {
  local label=$1 kind extra ok rate srv cli crc src
  for kind in write read; do
    extra=(); [ $kind = read ] && extra=(-Z)
    ok=1 rate=0 srv=$OUT/rdma-$kind-$label-server.txt cli=$OUT/rdma-$kind-$label-client.txt
    echo "== RDS over soft-RoCE against $label: RDMA ${kind}s of 64 KiB (rds-stress -D 65536 ${extra[*]})"
    echo "   server: rds-stress -r 192.0.2.1 -p 4100"
    echo "   client: rds-stress -r 192.0.2.2 -s 192.0.2.1 -p 4100 ${RDMA_ARGS[*]} ${extra[*]}"
    timeout 120 "$TOOLS/rds-stress" -r 192.0.2.1 -p 4100 > "$srv" 2>&1 & local sp=$!
    timeout 120 "$TOOLS/rds-stress" -r 192.0.2.2 -s 192.0.2.1 -p 4100 "${RDMA_ARGS[@]}" \
      "${extra[@]}" > "$cli" 2>&1 & local cp=$!
    if [ $kind = write ]; then
      sleep 3
      echo "== rds-info -I while it runs ($label): the IB connections, both ends in this guest"
      "$TOOLS/rds-info" -I 2>&1 | indent
      [ "${PIPESTATUS[0]}" -eq 0 ] || { echo "   FAILED: rds-info -I"; ok=0; }
    fi
    wait "$cp"; crc=$?
    wait "$sp"; src=$?
    echo "-- client output:"; indent < "$cli"
    if [ $crc -ne 0 ] || [ $src -ne 0 ] || ! grep -q 'result=ok' "$cli"; then
      echo "   FAILED: the RDMA $kind exchange against $label did not complete (client rc=$crc, server rc=$src)"
      ok=0
    else
      rate=$(sed -n 's/^summary: .* req_per_s=\([0-9]*\).*/\1/p' "$cli")
      echo "== $label: $rate requests/s, each with a 64 KiB RDMA $kind, every byte verified"
    fi
    if [ $ok -eq 1 ]; then echo "exchange $kind $label ok $rate" >> "$OUT/demo-result.txt"
    else echo "exchange $kind $label FAIL 0" >> "$OUT/demo-result.txt"; failed=1; fi
  done
  echo "== rds-ping -c 3 -i 0.2 -I 192.0.2.2 192.0.2.1 ($label, over soft-RoCE)"
  timeout 30 "$TOOLS/rds-ping" -c 3 -i 0.2 -I 192.0.2.2 192.0.2.1 2>&1 | indent
  [ "${PIPESTATUS[0]}" -eq 0 ] || { echo "   FAILED: rds-ping over soft-RoCE got no reply"; failed=1; }
  echo "== rds-info -c after the runs ($label; the IB counters that moved)"
  "$TOOLS/rds-info" -c 2>&1 | awk '$1 ~ /ib|rdma/ && $NF ~ /^[0-9]+$/ && $NF != 0' | indent
}

echo "== guest kernel $(uname -r), $(nproc) vCPU"
echo "== insmod rds_rs.ko"
load_rs || { echo "insmod failed"; echo "exchange loop rs FAIL 0" >> "$OUT/demo-result.txt"; exit 1; }
dmesg | grep -E 'rds_rs|PF_RDS' | sed 's/^/   /'
echo "== socket(AF_RDS, ...) against rds_rs"
"$TESTS" socket | sed 's/^/   /'
echo "== bind / connect / getsockname against rds_rs (a few of the checks)"
"$TESTS" bind | grep -E ' (bind_loopback|getsockname_bound|bind_in_use|bind_not_local|bind_port_0_picks|connect_loopback|getpeername_connected) ' | sed 's/^/   /'
for suite in bind sockopt; do
  echo "== rds-tests $suite against rds_rs: $("$TESTS" $suite | grep -c '^ok ') checks ok, $("$TESTS" $suite | grep -c '^not ok') not ok"
done
exchange rs 4000
echo "== soft-RoCE: an rxe device on each end of a veth pair (rxe0 on veth0 with 192.0.2.1, rxe1 on veth1 with 192.0.2.2)"
if veth_rdma_up rxe; then
  rdma link show 2>&1 | indent
  over_rxe rs
else
  echo "   FAILED: could not set up rxe on a veth pair"
  echo "exchange write rs FAIL 0" >> "$OUT/demo-result.txt"; failed=1
fi
unload_rs && echo "== rmmod rds_rs: ok" || { echo "== rmmod rds_rs FAILED"; failed=1; }
echo "== the same against the in-tree C RDS"
if load_c; then
  "$TESTS" socket | sed 's/^/   /'
  for suite in bind sockopt; do
    echo "== rds-tests $suite against C RDS: $("$TESTS" $suite | grep -c '^ok ') checks ok, $("$TESTS" $suite | grep -c '^not ok') not ok"
  done
  exchange c 4000
  ip link show veth0 > /dev/null 2>&1 && over_rxe c
  unload_c && echo "== rmmod rds_rdma rds_tcp rds: ok" || { echo "== rmmod of the C modules FAILED"; failed=1; }
else
  echo "== insmod of the C modules FAILED"
  echo "exchange loop c FAIL 0" >> "$OUT/demo-result.txt"
  failed=1
fi

veth_rdma_down rxe
echo "== rates in requests per second of guest time; under QEMU's instruction counter a second is"
echo "   a billion instructions, so the ratio is one of instructions per request and repeats"
for kind in loop write read; do
  rs=$(awk -v k=$kind '$2 == k && $3 == "rs" && $4 == "ok" {print $5}' "$OUT/demo-result.txt")
  c=$(awk -v k=$kind '$2 == k && $3 == "c" && $4 == "ok" {print $5}' "$OUT/demo-result.txt")
  case $kind in
    loop) what="rds-stress ${STRESS_ARGS[*]} over 127.0.0.1" ;;
    *) what="rds-stress ${RDMA_ARGS[*]}$([ $kind = read ] && echo ' -Z') over soft-RoCE (RDMA ${kind}s)" ;;
  esac
  if [ -n "$rs" ] && [ -n "$c" ] && [ "$c" -gt 0 ]; then
    echo "== $what: rds_rs $rs, C RDS $c: rds_rs/C = $(awk -v a="$rs" -v b="$c" 'BEGIN {printf "%.3f", a / b}')"
  else
    echo "== $what: ratio not available (rds_rs: ${rs:-failed}, C: ${c:-failed})"
  fi
done
[ $failed -eq 0 ] && echo "== demo: ok" || echo "== demo: FAILED (see above)"
exit $failed
