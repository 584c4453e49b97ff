#!/bin/bash
# rds_rs against rds_rs over TCP in N network namespaces of one guest, a full mesh
# (tcp-mesh.py: every ordered pair exchanges a numbered stream at once, then every namespace
# is deleted with traffic in flight, then a fresh pair exchanges), then the module is
# unloaded: the namespaces took their listeners and connections with them, so nothing may
# keep it (a leak shows in kmemleak, which the last step of the guest reads).
#   tcp-mesh.sh OUT KDIR MODULE TESTS-BIN [N [M [BOUND]]]
# N namespaces (32), M messages per ordered pair (8), BOUND seconds for each phase (900).
# Results: tcp-mesh.tap (tcp_mesh_*), tcp-mesh.err (the script's progress), mesh-counters.txt.
set -u
OUT=$1 KDIR=$2 MODULE=$3 TESTS=$4 N=${5:-32} M=${6:-8} BOUND=${7:-900}
. "$(dirname "$0")/common.sh"
cd "$OUT" || exit 1
f=tcp-mesh.tap
kmemleak_clear
load_rs || { tap harness.tap not load_rs failed "insmod failed"; kmemleak_report; collect_dmesg; exit 1; }
tl "start tcp_mesh"
# The script's phases are bounded by BOUND (at most 2.25 BOUND in all); this bound is the last resort.
timeout $((BOUND * 3 + 120)) python3 -u "$(dirname "$0")/tcp-mesh.py" "$N" "$M" "$BOUND" "$(dirname "$TESTS")/rds-info" \
  >> "$OUT/$f" 2> "$OUT/tcp-mesh.err"
rc=$?
tl "stop tcp_mesh"
[ $rc -eq 0 ] || tap $f not tcp_mesh_exit "rc=$rc" "$(tail -3 "$OUT/tcp-mesh.err")"
"$(dirname "$TESTS")/rds-info" -c > "$OUT/mesh-counters.txt" 2>&1
# Whatever a failed run left (the script deletes every namespace it made).
for ns in /var/run/netns/m*; do
  [ -e "$ns" ] || continue
  echo "left behind: $ns" >> "$OUT/tcp-mesh.err"; ip netns del "${ns##*/}"
done
tl "start rmmod"
if unload_rs; then
  tap $f ok tcp_mesh_rmmod "rds_rs unloaded after the namespaces went"
else
  tap $f not tcp_mesh_rmmod failed "rmmod rds_rs failed after the mesh"
fi
tl "stop rmmod"
kunit_expected
kmemleak_report
collect_dmesg
