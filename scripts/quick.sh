#!/usr/bin/env bash
# The short edit-build-test loop: one guest (debug kernel, the test build of rds_rs.ko) runs
# one or more `rds-tests` suites against rds_rs (or the in-tree C RDS) and the result is judged
# as `make test` judges (kernel log, kmemleak, every check). `make test` stays the complete run.
#   scripts/quick.sh [rs|c] SUITE[,SUITE...] [ARGS...]
#   scripts/quick.sh guest SCRIPT   (tests/guest/SCRIPT.sh OUT KDIR MODULE TESTS-BIN: ib-one,
#                                    ib-faults, ib-bad, tcp-neutral)
#   scripts/quick.sh pair           (two guests: C RDS/IB against rds_rs, tests/guest/rdma-pair.sh)
#   scripts/quick.sh busy MODE...   (any of the above, or `test` for all of `make test`, with
#                                    one host core kept busy meanwhile by an unrelated busy loop
#                                    at normal priority: the harness's own test under load;
#                                    `scripts/quick.sh busy pair` is its short form;
#                                    PAIR_RDMA_OPS=N gives the pair's RDMA round N operations
#                                    each way instead of 30)
# e.g. `scripts/quick.sh rdma`, `scripts/quick.sh c sendrecv,poll`,
# `scripts/quick.sh faults load 20000 600`. QUICK_TIMEOUT bounds the guest (default 900 s);
# results go to target/quick/IMPL-SUITES (QUICK_OUT overrides), so runs of different suites may
# overlap.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/.." && pwd)
. "$here/lib.sh"
cd "$top"
if [ "${1:-}" = busy ]; then
  shift
  # The load: one process spinning at normal priority for as long as the run lasts, ended by
  # its own pid whatever way the run ends.
  bash -c 'while :; do :; done' & busy=$!
  trap 'kill $busy 2>/dev/null' EXIT
  info "busy loop (pid $busy) on one core for the whole run"
  t=$SECONDS
  rc=0
  if [ "${1:-}" = test ]; then bash "$here/test.sh" || rc=$?; else bash "$here/quick.sh" "$@" || rc=$?; fi
  info "with the busy loop: exit $rc after $((SECONDS - t))s"
  exit $rc
fi
impl=rs
case "${1:-}" in rs|c|guest|pair) impl=$1; shift ;; esac
if [ "$impl" = pair ]; then suites=rdma; else
  [ $# -ge 1 ] || die "usage: scripts/quick.sh [rs|c|guest] SUITE[,SUITE...] [ARGS...] | pair"
  suites=$1; shift
fi
bash "$here/setup.sh"
kdir=$(bash "$here/kernel.sh" debug)
module=$(bash "$here/module.sh" "$kdir" test)
cargo build --release --quiet -p rds-tests -p rds-tools
bash "$here/build-badpeer.sh" > /dev/null
tests_bin=$(cargo metadata --format-version 1 --no-deps | python3 -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])')/release/rds-tests
out=${QUICK_OUT:-$top/target/quick/$impl-${suites//,/_}}
rm -rf "$out"; mkdir -p "$out"
if [ "$impl" = pair ]; then
  q() { printf '%q ' "$@"; }
  pair=$top/tests/guest/rdma-pair.sh
  mkdir -p "$out/a" "$out/b"
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
  python3 tests/harness.py two --kernel "$kdir" --out "$out" --timeout "${QUICK_TIMEOUT:-1200}" \
    --port "$port" --append-a lockdep.prove_locking=0 \
    --a "$(q "$pair" a "$out/a" "$kdir" "$module" "$tests_bin" 192.0.2.1 192.0.2.2 fd01::1 fd01::2 rxe "$out/b" "${PAIR_RDMA_OPS:-30}")" \
    --b "$(q "$pair" b "$out/b" "$kdir" "$module" "$tests_bin" 192.0.2.2 192.0.2.1 fd01::2 fd01::1 rxe "$out/a" "${PAIR_RDMA_OPS:-30}")" || true
  # Guest a's rdma-reg.c.tap pairs with the rds_rs suite half, which this mode does not run.
  mv -f "$out/a/rdma-reg.c.tap" "$out/a/rdma-reg.c.unpaired" 2>/dev/null || true
  python3 tests/harness.py judge --counts "$out/counts" "$out/a" "$out/b"
  grep -h '^not ok' "$out"/*/*.tap 2>/dev/null | head -40 || true
  read -r p f < "$out/counts"
  [ "$f" -eq 0 ] && [ "$p" -gt 0 ]
  exit
elif [ "$impl" = guest ]; then
  cmd=("$top/tests/guest/$suites.sh" "$out" "$kdir" "$module" "$tests_bin")
else
  cmd=("$top/tests/guest/quick.sh" "$out" "$kdir" "$module" "$tests_bin" "$impl" "$suites" "$@")
fi
python3 tests/harness.py one --kernel "$kdir" --out "$out" --timeout "${QUICK_TIMEOUT:-900}" --cpus 1 -- \
  "${cmd[@]}" || true
python3 tests/harness.py judge --counts "$out/counts" "$out"
grep -h '^not ok' "$out"/*.tap 2>/dev/null | head -40 || true
read -r p f < "$out/counts"
[ "$f" -eq 0 ] && [ "$p" -gt 0 ]
