#!/usr/bin/env bash
# `make demo`: boot a guest on the plain kernel, load rds_rs.ko, and show what it does today.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/.." && pwd)
. "$here/lib.sh"
cd "$top"
bash "$here/setup.sh"
kdir=$(bash "$here/kernel.sh" plain)
module=$(bash "$here/module.sh" "$kdir")
cargo build --release --quiet -p rds-tests
out=$top/target/demo
rm -rf "$out"; mkdir -p "$out"
step "booting a guest (TCG, plain kernel) and running tests/guest/demo.sh"
python3 tests/harness.py one --kernel "$kdir" --out "$out" --timeout 300 -- \
  "$top/tests/guest/demo.sh" "$out" "$kdir" "$module" "$top/target/release/rds-tests"
cat "$out/demo.txt" 2>/dev/null || die "the guest wrote no demo output (see $out/console.txt)"
grep -q '^ok ' "$out/vm.tap" || die "the guest did not finish cleanly (see $out/console.txt)"
