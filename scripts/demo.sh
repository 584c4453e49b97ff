#!/usr/bin/env bash
# `make demo`: boot a guest on the plain kernel, load rds_rs.ko, and show what it does today:
# its socket checks next to the in-tree C RDS, then traffic against rds_rs and against C RDS:
# rds-stress, rds-ping and rds-info over 127.0.0.1 and over soft-RoCE (rxe on a veth pair in
# the guest, RDMA writes and reads), and the rate ratios, measured under QEMU's instruction
# counter so that they mean something. Fails (non-zero exit) if an exchange did not happen.
# The guest has one vCPU (DEMO_CPUS changes it): with two, wake-ups across vCPUs depend on the
# host's scheduler and the rates swing tenfold between runs, which would make the ratio noise.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/.." && pwd)
. "$here/lib.sh"
cd "$top"
t0=$SECONDS
bash "$here/setup.sh"
kdir=$(bash "$here/kernel.sh" plain)
module=$(bash "$here/module.sh" "$kdir")
cargo build --release --quiet -p rds-tests -p rds-tools
out=$top/target/demo
rm -rf "$out"; mkdir -p "$out"
step "booting a guest (TCG, plain kernel) and running tests/guest/demo.sh"
# Under QEMU's instruction counter, as `make bench`: the guest clock counts instructions, so
# the rates are per-instruction costs and their ratios repeat from run to run.
python3 tests/harness.py one --kernel "$kdir" --out "$out" --timeout 600 --cpus "${DEMO_CPUS:-1}" \
  "--qemu-opts=-icount shift=0,sleep=off" -- \
  "$top/tests/guest/demo.sh" "$out" "$kdir" "$module" "$top/target/release/rds-tests" \
  "$top/target/release"
cat "$out/demo.txt" 2>/dev/null || die "the guest wrote no demo output (see $out/console.txt)"
info "(make demo took $((SECONDS - t0))s; output in $out)"
for ex in "loop rs" "loop c" "write rs" "write c" "read rs" "read c"; do
  grep -q "^exchange $ex ok " "$out/demo-result.txt" 2>/dev/null \
    || die "the rds-stress exchange '$ex' did not happen (see $out/demo.txt)"
done
grep -q '^ok ' "$out/vm.tap" || die "the guest did not finish cleanly (see $out/console.txt)"
