#!/bin/bash
# The kernel's own RDS selftest (tools/testing/selftests/net/rds/test.py, unchanged, from the
# guest kernel's source tree) against rds_rs's TCP transport: two namespaces joined by a veth
# pair, 50,000 messages each way over non-blocking AF_RDS sockets, with netem on the link.
# One run per configuration, in this order: no faults, 10% loss, 10% corruption, 10%
# duplication, all three at once. Between runs the two namespaces are deleted (with whatever
# rds_rs still holds in them) and the next run makes them again.
#   tcp-selftest.sh OUT KDIR MODULE TESTS-BIN [CONFIGS]
# CONFIGS (the short loop): the configurations to run, `;`-separated (`none;-l 10`), or `skip`.
# Then hostile peers from a raw TCP socket (tcp-hostile.py), zero-copy send against
# rds_rs and C's rds_tcp (tcp-zcopy.py), and with TCP_NEUTRAL=1 in the environment (guest tcp
# of make test; one guest only, since the judge takes each paired file from one guest), after
# each of the two the transport-neutral suites of rds-tests over TCP (tcp-neutral.sh).
# Results: tcp-selftest.tap (one check per run), selftest-N.log (each run's output),
# tcp-hostile.tap, tcp-zcopy.tap, SUITE-tcp.rs.tap and SUITE-tcp.c.tap (paired by the judge).
set -u
OUT=$1 KDIR=$2 MODULE=$3 TESTS=$4 CONFIGS=${5:-none;-l 10;-c 10;-u 10;-l 10 -c 10 -u 10}
. "$(dirname "$0")/common.sh"
cd "$OUT" || exit 1
f=tcp-selftest.tap
kmemleak_clear
ST=${RDS_SELFTEST_DIR:-$(readlink -f "$KDIR/source")/tools/testing/selftests/net/rds}
if [ ! -f "$ST/test.py" ]; then
  tap harness.tap not tcp_selftest_present "$ST" "the kernel's RDS selftest is missing"
  kmemleak_report; collect_dmesg; exit 1
fi
# The selftest runs /usr/sbin/tcpdump and /usr/sbin/tc; Debian has tcpdump in /usr/bin, and
# the guest's /usr/sbin is read-only: a tmpfs of links to /usr/sbin's files, tcpdump added,
# goes over it.
if [ ! -e /usr/sbin/tcpdump ]; then
  d=$(mktemp -d /dev/shm/sbin.XXXX) && mkdir "$d/orig" "$d/new" && mount --bind /usr/sbin "$d/orig" \
    && mount -t tmpfs tmpfs "$d/new" && for x in "$d"/orig/*; do ln -s "$x" "$d/new/"; done \
    && ln -s /usr/bin/tcpdump "$d/new/tcpdump" && mount --bind "$d/new" /usr/sbin
fi
if [ ! -x /usr/sbin/tcpdump ]; then
  tap harness.tap not tcp_selftest_tcpdump none "no /usr/sbin/tcpdump for the selftest"
  kmemleak_report; collect_dmesg; exit 1
fi
load_rs || { tap harness.tap not load_rs failed "insmod failed"; kmemleak_report; collect_dmesg; exit 1; }
n=0
IFS=';' read -r -a cfgs <<< "$CONFIGS"
[ "$CONFIGS" = skip ] && cfgs=()   # the short loop: the hostile peers only
for cfg in "${cfgs[@]}"; do
  n=$((n + 1))
  args=; [ "$cfg" = none ] || args=$cfg
  name=tcp_selftest_$(echo "${cfg// /}" | tr -d -)
  mkdir -p "$OUT/selftest-$n"
  tl "start $name"
  # test.py's own bound (SIGALRM) first, then ours.
  # A run that makes no progress for 30 s gets the state of both namespaces written down
  # (once), for the diagnosis.
  ( last=; same=0
    while :; do
      nap 5
      cur=$(tail -1 "$OUT/selftest-$n.log" 2>/dev/null)
      if [ -n "$cur" ] && [ "$cur" = "$last" ]; then same=$((same + 5)); else same=0; last=$cur; fi
      if [ $same -ge 30 ]; then
        for ns in net0 net1; do
          { echo "== $ns"; ip netns exec $ns "$(dirname "$TESTS")/rds-info" -c -C -r -s -T -k
            ip netns exec $ns ss -tnie; } >> "$OUT/stall-$n.txt" 2>&1
        done
        break
      fi
    done ) & mon=$!
  # Unbuffered, each line stamped with the guest's uptime.
  timeout 1600 python3 -u "$ST/test.py" --timeout 1500 -d "$OUT/selftest-$n" $args 2>&1 \
    | while IFS= read -r l; do read -r up _ < /proc/uptime; echo "$up $l"; done \
    > "$OUT/selftest-$n.log"; rc=${PIPESTATUS[0]}
  kill $mon 2>/dev/null; wait $mon 2>/dev/null
  tl "stop $name"
  if [ $rc -eq 0 ] && grep -q ' Success$' "$OUT/selftest-$n.log"; then
    tap $f ok "$name" "$(grep ' done ' "$OUT/selftest-$n.log" | cut -d' ' -f2-)"
  else
    tap $f not "$name" "rc=$rc" "$(grep -v ' sending\.\.\.\| receiving\.\.\.' "$OUT/selftest-$n.log" | tail -3 | tr '\n' ' ')"
  fi
  "$(dirname "$TESTS")/rds-info" -c > "$OUT/counters-$n.txt" 2>&1
  killall -q tcpdump
  # The namespaces go with their connections and listeners (whatever is still in flight).
  ip netns del net0 2>/dev/null; ip netns del net1 2>/dev/null
done
# Hostile peers from a raw TCP socket (tcp-hostile.py): two namespaces on a veth pair, as the
# selftest makes them but with an address pair per case, then deleted with whatever the cases
# left.
hostile_ns() {
  ip netns add net0 && ip netns add net1 && ip link add veth0 type veth peer name veth1 \
    && ip link set veth0 netns net0 up && ip link set veth1 netns net1 up \
    && ip -n net0 link set lo up && ip -n net1 link set lo up || return 1
  local i
  for i in 1 11 12 13 14 15 16 17 18 19; do ip -n net0 addr add 10.0.0.$i/24 dev veth0 || return 1; done
  for i in 2 21 22 23 24 25 26 27 28 29; do ip -n net1 addr add 10.0.0.$i/24 dev veth1 || return 1; done
}
hostile_ns || tap harness.tap not tcp_hostile_setup failed "could not make the namespaces"
tl "start tcp_hostile"
timeout 300 python3 -u "$(dirname "$0")/tcp-hostile.py" "$(dirname "$TESTS")/rds-info" > "$OUT/tcp-hostile.tap" 2> "$OUT/tcp-hostile.err"
rc=$?
tl "stop tcp_hostile"
[ $rc -eq 0 ] || tap harness.tap not tcp_hostile_exit "rc=$rc" "$(tail -3 "$OUT/tcp-hostile.err" | tr '\n' ' ')"
ip netns del net0 2>/dev/null; ip netns del net1 2>/dev/null
# Zero-copy send (tcp-zcopy.py), against rds_rs and then C's rds_tcp: the same cases.
zcopy() { # zcopy IMPL
  tl "start tcp_zcopy_$1"
  timeout 300 python3 -u "$(dirname "$0")/tcp-zcopy.py" "$1" "$(dirname "$TESTS")/rds-info" \
    >> "$OUT/tcp-zcopy.tap" 2>> "$OUT/tcp-zcopy.err"
  local rc=$?
  tl "stop tcp_zcopy_$1"
  [ $rc -eq 0 ] || tap harness.tap not "tcp_zcopy_${1}_exit" "rc=$rc" "$(tail -3 "$OUT/tcp-zcopy.err" | tr '\n' ' ')"
  ip netns del zc0 2>/dev/null; ip netns del zc1 2>/dev/null
}
zcopy rs
# The transport-neutral suites over TCP between two namespaces (tcp-neutral.sh), rds_rs's half;
# C's half below, the judge pairs them.
neutral() {
  [ "${TCP_NEUTRAL:-}" = 1 ] || return 0
  bash "$(dirname "$0")/tcp-neutral.sh" "$OUT" "$KDIR" "$MODULE" "$TESTS" "$1"
}
neutral rs
# What the namespaces held went with them: the unload finds no connection left (a leak would
# be reported by the module, which the judge reads in the kernel log).
unload_rs || tap harness.tap not unload_rs failed "rmmod rds_rs failed"
kunit_expected
if load_c; then
  zcopy c
  neutral c
  unload_c || tap harness.tap not unload_c failed "rmmod of the C modules failed"
else
  tap harness.tap not load_c failed "insmod of the C modules failed"
fi
kmemleak_report
collect_dmesg
