#!/usr/bin/env bash
# The short edit-build-test loop: one guest (debug kernel, the test build of rds_rs.ko) runs
# one or more `rds-tests` suites against rds_rs (or the in-tree C RDS) and the result is judged
# as `make test` judges (kernel log, kmemleak, every check). `make test` stays the complete run.
#   scripts/quick.sh [rs|c] SUITE[,SUITE...] [ARGS...]
# e.g. `scripts/quick.sh rdma`, `scripts/quick.sh c sendrecv,poll`,
# `scripts/quick.sh faults load 20000 600`. QUICK_TIMEOUT bounds the guest (default 900 s);
# results go to target/quick/IMPL-SUITES (QUICK_OUT overrides), so runs of different suites may
# overlap.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/.." && pwd)
. "$here/lib.sh"
cd "$top"
impl=rs
case "${1:-}" in rs|c) impl=$1; shift ;; esac
[ $# -ge 1 ] || die "usage: scripts/quick.sh [rs|c] SUITE[,SUITE...] [ARGS...]"
suites=$1; shift
bash "$here/setup.sh"
kdir=$(bash "$here/kernel.sh" debug)
module=$(bash "$here/module.sh" "$kdir" test)
cargo build --release --quiet -p rds-tests
tests_bin=$(cargo metadata --format-version 1 --no-deps | python3 -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])')/release/rds-tests
out=${QUICK_OUT:-$top/target/quick/$impl-${suites//,/_}}
rm -rf "$out"; mkdir -p "$out"
q() { printf '%q ' "$@"; }
python3 tests/harness.py one --kernel "$kdir" --out "$out" --timeout "${QUICK_TIMEOUT:-900}" --cpus 1 -- \
  "$top/tests/guest/quick.sh" "$out" "$kdir" "$module" "$tests_bin" "$impl" "$suites" "$@" || true
python3 tests/harness.py judge --counts "$out/counts" "$out"
grep -h '^not ok' "$out"/*.tap 2>/dev/null | head -40 || true
read -r p f < "$out/counts"
[ "$f" -eq 0 ] && [ "$p" -gt 0 ]
