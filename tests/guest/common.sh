# Helpers for guest-side test scripts (sourced). Runs inside the QEMU guest.
# Result lines go to TAP files in $OUT; see tests/harness.py for the format.

kmemleak=/sys/kernel/debug/kmemleak
mountpoint -q /sys/kernel/debug || mount -t debugfs none /sys/kernel/debug

# tap FILE ok|not NAME OBSERVATION [WHY]
tap() {
  local f=$1 res=$2 name=$3 obs=$4 why=${5:-}
  if [ "$res" = ok ]; then echo "ok $name $obs" >> "$OUT/$f"
  else echo "not ok $name $obs: $why" >> "$OUT/$f"; fi
}

loaded() { [ -d "/sys/module/$1" ]; }

# The harness never has two RDS implementations loaded: refuse to load one while the other is.
load_c() {
  loaded rds_rs && { echo "refusing to load C RDS while rds_rs is loaded" >&2; return 1; }
  insmod "$KDIR/net/rds/rds.ko" && insmod "$KDIR/net/rds/rds_tcp.ko" \
    && { [ "${1:-}" != rdma ] || insmod "$KDIR/net/rds/rds_rdma.ko"; }
}
unload_c() {
  local m
  for m in rds_rdma rds_tcp rds; do loaded "$m" && rmmod "$m"; done
  ! loaded rds
}
load_rs() {
  loaded rds && { echo "refusing to load rds_rs while C RDS is loaded" >&2; return 1; }
  insmod "$MODULE" && rs_loads=$((${rs_loads:-0} + 1))
}
unload_rs() { rmmod rds_rs && ! loaded rds_rs; }

kmemleak_clear() { [ -e $kmemleak ] && echo clear > $kmemleak; }
# Reports objects leaked since kmemleak_clear; kmemleak only reports objects older than 5 s.
kmemleak_report() {
  if [ ! -e $kmemleak ]; then echo "kmemleak not available in this kernel" > "$OUT/kmemleak.txt"; return; fi
  sleep 6
  echo scan > $kmemleak; echo scan > $kmemleak
  cat $kmemleak > "$OUT/kmemleak.txt"
}
