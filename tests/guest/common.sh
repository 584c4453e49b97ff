# Helpers for guest-side test scripts (sourced). Runs inside the QEMU guest.
# Result lines go to TAP files in $OUT; see tests/harness.py for the format.
# CHAINED=before|middle|after: this script is followed by / between / follows others in the same
# guest; the first clears kmemleak, the last reports leaks and writes the kernel log for all.

kmemleak=/sys/kernel/debug/kmemleak
mountpoint -q /sys/kernel/debug || mount -t debugfs none /sys/kernel/debug

# tl WHAT: one line of this guest's timeline (OUT/timeline.txt: host clock, guest uptime,
# what began or ended), read by `harness.py times` to say where the time of a run goes.
# Builtins only (a `date` and a `cut` cost the guest's vCPU most of a second per line).
tl() {
  local up
  read -r up _ < /proc/uptime
  echo "$EPOCHREALTIME $up $*" >> "$OUT/timeline.txt"
}
tl "begin $(basename "$0")"
trap 'tl "end $(basename "$0")"' EXIT

# nap SECONDS: a sleep that starts no process (a read timing out on a FIFO nobody writes to):
# a polling loop would otherwise start `sleep` ten times a second, each start a fork and an
# exec, which on a starved TCG vCPU costs more than the wait itself.
nap_fifo=/run/rds-rs-nap.$$
mkfifo "$nap_fifo" && exec {NAP_FD}<>"$nap_fifo"; rm -f "$nap_fifo"
nap() { read -r -t "$1" -u "$NAP_FD" _ || true; }
# wait_until SECONDS COMMAND [ARGS...]: runs COMMAND every 0.1 s until it succeeds (true) or
# SECONDS of wall time have passed (false). Bounds are in time, not in rounds: a round costs
# more on a busy host, and a count of rounds would stretch the bound with it.
wait_until() {
  local end=$((SECONDS + $1)); shift
  until "$@"; do
    [ "$SECONDS" -ge "$end" ] && return 1
    nap 0.1
  done
}
# has FILE PATTERN: FILE has a line matching PATTERN (an extended regular expression), read
# without starting a process: it is polled while a program starts, and every process start
# (grep's included) costs the guest's one vCPU some 0.4 s that the program would have had.
has() {
  local l
  { while IFS= read -r l || [ -n "$l" ]; do [[ $l =~ $2 ]] && return 0; done < "$1"; } 2>/dev/null
  return 1
}
# num FILE: NUM = the number on FILE's first line (0 while the file is missing or empty), read
# without a subshell: the progress files of the test programs are polled ten times a second.
num() { NUM=0; read -r NUM 2>/dev/null < "$1"; NUM=${NUM:-0}; }
# at_least FILE N: FILE's number (num) is N or more.
at_least() { num "$1"; [ "$NUM" -ge "$2" ]; }
# gone PID: the process PID has ended.
gone() { ! kill -0 "$1" 2>/dev/null; }

# tap FILE ok|not NAME OBSERVATION [WHY]   (multi-line text is flattened to one line)
tap() {
  local f=$1 res=$2 name=$3 obs=${4:-} why=${5:-}
  obs=${obs//$'\n'/ } why=${why//$'\n'/ }
  if [ "$res" = ok ]; then echo "ok $name $obs" >> "$OUT/$f"
  else echo "not ok $name $obs: $why" >> "$OUT/$f"; fi
}

loaded() { [ -d "/sys/module/$1" ]; }

# The harness never has two RDS implementations loaded: refuse to load one while the other is.
# RDS_IB_PARAMS: module parameters of the IB transport, which both implementations take under
# the same names (C's rds_rdma.ko, rds_rs.ko), e.g. rds_ib_retry_count=7.
load_c() {
  loaded rds_rs && { echo "refusing to load C RDS while rds_rs is loaded" >&2; return 1; }
  # rds_rdma too: rds_rs always carries its IB transport (and its info tables).
  insmod "$KDIR/net/rds/rds.ko" && insmod "$KDIR/net/rds/rds_tcp.ko" \
    && insmod "$KDIR/net/rds/rds_rdma.ko" ${RDS_IB_PARAMS:-}
}
unload_c() {
  local m
  for m in rds_rdma rds_tcp rds; do loaded "$m" && rmmod "$m"; done
  ! loaded rds
}
load_rs() {
  loaded rds && { echo "refusing to load rds_rs while C RDS is loaded" >&2; return 1; }
  insmod "$MODULE" ${RDS_IB_PARAMS:-} || return
  echo "$MODULE" >> "$OUT/rs-loads"
  # Where this load's code is, to read module addresses in a later kmemleak report.
  echo "uptime $(cut -d" " -f1 /proc/uptime) pid-next $(sh -c 'echo $$') text $(cat /sys/module/rds_rs/sections/.text 2>/dev/null)" \
    >> "$OUT/rs-sections"
}
# The test build runs its KUnit suite at every insmod: the harness expects that many cases
# for the loads of this guest so far (every step that loads rds_rs calls this at its end).
kunit_expected() {
  local cases loads
  cases=$(grep -c '^	KUNIT_CASE(' "$(dirname "${BASH_SOURCE[0]}")/../../rds/kunit.c")
  loads=$(cat "$OUT/rs-loads" 2>/dev/null | wc -l)
  echo $((cases * loads)) > "$OUT/kunit.expected"
}
unload_rs() { rmmod rds_rs && ! loaded rds_rs; }

# Forgets what kmemleak would report so far (boot-time objects): `clear` only drops objects a
# scan already reported, so scan first.
kmemleak_clear() {
  case "${CHAINED:-}" in after|middle) return 0 ;; esac  # a later step keeps the leak record
  [ -e $kmemleak ] || return 0
  echo scan > $kmemleak && echo clear > $kmemleak
}
# Reports objects leaked since kmemleak_clear; kmemleak only reports objects older than 5 s.
# A kmemleak that is missing or has disabled itself is a failure, not a clean report.
kmemleak_report() {
  case "${CHAINED:-}" in before|middle) return 0 ;; esac  # the last step of the guest reports
  if [ ! -e $kmemleak ]; then echo "kmemleak not available in this kernel" > "$OUT/kmemleak.txt"; return; fi
  tl "start kmemleak"
  nap 6
  if ! { echo scan > $kmemleak && echo scan > $kmemleak; } 2>/dev/null; then
    echo "kmemleak scan failed (kmemleak disabled?)" > "$OUT/kmemleak.txt"; return
  fi
  cat $kmemleak > "$OUT/kmemleak.txt"
  tl "stop kmemleak"
}

# The kernel log, once per guest (the last step writes it).
collect_dmesg() {
  case "${CHAINED:-}" in before|middle) return 0 ;; esac
  dmesg > "$OUT/dmesg.txt"
}

# run_prog TAPFILE-FOR-ERRORS NAME CMD... : runs a test program; a non-zero exit is a failure.
run_prog() {
  local f=$1 name=$2; shift 2
  tl "start $name"
  "$@"; local rc=$?
  tl "stop $name"
  [ $rc -eq 0 ] || tap "$f" not "${name}_exit" "rc=$rc" "test program failed"
}

# veth_rdma_up SOFT: two addresses of this guest, each on one end of a veth pair with a soft
# RDMA device (rxe: RoCE v2, siw: iWARP) on it, for RDS over RDMA between them in one guest:
# 192.0.2.1 and fd00::1 on veth0 (SOFT0), 192.0.2.2 and fd00::2 on veth1 (SOFT1). Host
# routes and permanent neighbours send each address's traffic over the pair rather than the
# local loopback; accept_local lets the two ends of one host talk over a wire. IPv4 needs no
# more (a lookup bound to veth0, as rdma_cm's and rxe's are, skips the local route of veth1's
# address); IPv6 prefers local routes whatever the bound device, so policy rules bound to each
# end's device route the other end's address over the pair before the local table is asked
# (moved from preference 0 to 100 for that).
# The ip commands go in batches (one process each for IPv4 and IPv6 instead of two dozen), and
# the sysctls are written directly: on the debug kernel under TCG a process start costs about
# as much as the work of a command.
veth_rdma_up() {
  local soft=$1 k m0 m1
  ip -batch - <<'EOF' || return 1
link add veth0 type veth peer name veth1
link set veth0 up
link set veth1 up
addr add 192.0.2.1/32 dev veth0
addr add 192.0.2.2/32 dev veth1
addr add fd00::1/128 dev veth0 nodad
addr add fd00::2/128 dev veth1 nodad
route add 192.0.2.2/32 dev veth0
route add 192.0.2.1/32 dev veth1
route add fd00::2/128 dev veth0
route add fd00::1/128 dev veth1
route add fd00::2/128 dev veth0 table 100
route add fd00::1/128 dev veth1 table 101
EOF
  ip -6 -batch - <<'EOF' || return 1
rule add pref 10 oif veth0 to fd00::2/128 table 100
rule add pref 11 oif veth1 to fd00::1/128 table 101
rule add pref 100 table local
rule del pref 0 table local
EOF
  for k in all veth0 veth1; do
    echo 1 > "/proc/sys/net/ipv4/conf/$k/accept_local" \
      && echo 0 > "/proc/sys/net/ipv4/conf/$k/rp_filter" || return 1
  done
  m0=$(< /sys/class/net/veth0/address) m1=$(< /sys/class/net/veth1/address)
  ip -batch - <<EOF || return 1
neigh add 192.0.2.2 lladdr $m1 dev veth0 nud permanent
neigh add 192.0.2.1 lladdr $m0 dev veth1 nud permanent
neigh add fd00::2 lladdr $m1 dev veth0 nud permanent
neigh add fd00::1 lladdr $m0 dev veth1 nud permanent
EOF
  rdma link add "${soft}0" type "$soft" netdev veth0 \
    && rdma link add "${soft}1" type "$soft" netdev veth1
}
# veth_rdma_down SOFT: undoes veth_rdma_up (whatever part of it was done).
veth_rdma_down() {
  rdma link delete "${1}0" 2>/dev/null; rdma link delete "${1}1" 2>/dev/null
  ip link delete veth0 2>/dev/null
  ip -6 rule del pref 10 2>/dev/null; ip -6 rule del pref 11 2>/dev/null
  if ! ip -6 rule show pref 0 | grep -q local; then
    ip -6 rule add pref 0 table local && ip -6 rule del pref 100 table local
  fi
  ! ip link show veth0 > /dev/null 2>&1
}
