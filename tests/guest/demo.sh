#!/bin/bash
# Guest side of `make demo`: load rds_rs, show its KUnit results and socket behaviour next to
# the in-tree C RDS, then real traffic: an rds-stress server and client (two processes) over
# 127.0.0.1, rds-ping and rds-info, first against rds_rs, then against C RDS, and the ratio.
#   demo.sh OUT KDIR MODULE TESTS-BIN TOOLS-DIR
# Writes demo.txt (what the demo shows) and demo-result.txt (one line per exchange,
# "exchange rs|c ok|FAIL <requests/s>"). Exits non-zero if any exchange, ping or info query
# failed.
set -u
OUT=$1 KDIR=$2 MODULE=$3 TESTS=$4 TOOLS=$5
. "$(dirname "$0")/common.sh"
exec > "$OUT/demo.txt" 2>&1
cd "$OUT" || exit 1
: > "$OUT/demo-result.txt"
failed=0
# The exchange both implementations run: 1 KiB requests, 64-byte acks, 8 outstanding.
STRESS_ARGS=(-q 1024 -a 64 -d 8 -t 1 -T 5)
indent() { sed 's/^/   /'; }

# exchange LABEL PORT: an rds-stress server and client over 127.0.0.1, rds-info snapshots
# during and after, rds-ping. Records "exchange LABEL ok|FAIL RATE" in demo-result.txt.
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
  if [ $ok -eq 1 ]; then echo "exchange $label ok $rate" >> "$OUT/demo-result.txt"
  else echo "exchange $label FAIL 0" >> "$OUT/demo-result.txt"; failed=1; fi
}

echo "== guest kernel $(uname -r), $(nproc) vCPU"
echo "== insmod rds_rs.ko"
load_rs || { echo "insmod failed"; echo "exchange rs FAIL 0" >> "$OUT/demo-result.txt"; exit 1; }
dmesg | grep -E 'rds_rs|PF_RDS' | sed 's/^/   /'
echo "== socket(AF_RDS, ...) against rds_rs"
"$TESTS" socket | sed 's/^/   /'
echo "== bind / connect / getsockname against rds_rs (a few of the checks)"
"$TESTS" bind | grep -E ' (bind_loopback|getsockname_bound|bind_in_use|bind_not_local|bind_port_0_picks|connect_loopback|getpeername_connected) ' | sed 's/^/   /'
for suite in bind sockopt; do
  echo "== rds-tests $suite against rds_rs: $("$TESTS" $suite | grep -c '^ok ') checks ok, $("$TESTS" $suite | grep -c '^not ok') not ok"
done
exchange rs 4000
unload_rs && echo "== rmmod rds_rs: ok" || { echo "== rmmod rds_rs FAILED"; failed=1; }
echo "== the same against the in-tree C RDS"
if load_c; then
  "$TESTS" socket | sed 's/^/   /'
  for suite in bind sockopt; do
    echo "== rds-tests $suite against C RDS: $("$TESTS" $suite | grep -c '^ok ') checks ok, $("$TESTS" $suite | grep -c '^not ok') not ok"
  done
  exchange c 4000
  unload_c && echo "== rmmod rds_rdma rds_tcp rds: ok" || { echo "== rmmod of the C modules FAILED"; failed=1; }
else
  echo "== insmod of the C modules FAILED"
  echo "exchange c FAIL 0" >> "$OUT/demo-result.txt"
  failed=1
fi

rs=$(awk '$2 == "rs" && $3 == "ok" {print $4}' "$OUT/demo-result.txt")
c=$(awk '$2 == "c" && $3 == "ok" {print $4}' "$OUT/demo-result.txt")
if [ -n "$rs" ] && [ -n "$c" ] && [ "$c" -gt 0 ]; then
  echo "== rds-stress ${STRESS_ARGS[*]} over 127.0.0.1: rds_rs $rs requests/s, C RDS $c requests/s: rds_rs/C = $(awk -v a="$rs" -v b="$c" 'BEGIN {printf "%.2f", a / b}') (TCG guest; only the ratio means anything)"
else
  echo "== ratio rds_rs/C: not available (rds_rs: ${rs:-failed}, C: ${c:-failed})"
fi
[ $failed -eq 0 ] && echo "== demo: ok" || echo "== demo: FAILED (see above)"
exit $failed
