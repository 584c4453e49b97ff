#!/usr/bin/env bash
# `make test`: every test of rds-rs, ending with one line "N passed, N failed".
#   1. set-up (idempotent), 2. host: lints and cargo tests, 3. the debug kernel and rds_rs.ko,
#   4. guests: the one-guest suite (KUnit, C-vs-Rust socket tests, load exclusion, leaks) and
#      the two-guest RDS/IB ping-pong over the in-tree C rds_rdma on soft-RoCE.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/.." && pwd)
. "$here/lib.sh"
cd "$top"
t0=$SECONDS
passed=0 failed=0
res=$top/target/test-run
rm -rf "$res"; mkdir -p "$res"

count() { # count NAME STATUS
  if [ "$2" -eq 0 ]; then passed=$((passed + 1)); else failed=$((failed + 1)); echo "FAIL $1"; fi
}
finish() {
  echo "(make test took $((SECONDS - t0))s; results in $res)"
  echo "$passed passed, $failed failed"
  [ "$failed" -eq 0 ]
  exit
}

bash "$here/setup.sh" || { count setup 1; finish; }

step "host: formatting and lints"
cargo fmt --all --check > "$res/fmt.log" 2>&1; count cargo_fmt $? ; [ -s "$res/fmt.log" ] && head -20 "$res/fmt.log"
# The module's own sources, formatted as the kernel's rustfmt config asks (generated code aside).
rustfmt --check --edition 2021 --config-path "$top/rustfmt.toml" rds/*.rs bindings/*.rs > "$res/kfmt.log" 2>&1
count module_rustfmt $?; [ -s "$res/kfmt.log" ] && head -20 "$res/kfmt.log"
cargo clippy --workspace --all-targets --quiet -- -D warnings > "$res/clippy.log" 2>&1
count cargo_clippy $?; grep -m20 -E '^(warning|error)' "$res/clippy.log"

step "host: cargo test"
cargo test --workspace --quiet --no-fail-fast > "$res/cargo-test.log" 2>&1; rc=$?
hp=$(sed -n 's/^test result: .* \([0-9]*\) passed; \([0-9]*\) failed.*/\1/p' "$res/cargo-test.log" | paste -sd+ | bc)
hf=$(sed -n 's/^test result: .* \([0-9]*\) passed; \([0-9]*\) failed.*/\2/p' "$res/cargo-test.log" | paste -sd+ | bc)
passed=$((passed + ${hp:-0})); failed=$((failed + ${hf:-0}))
echo "    host: ${hp:-0} passed, ${hf:-0} failed"
if [ $rc -ne 0 ] && [ "${hf:-0}" -eq 0 ]; then count cargo_test_build $rc; tail -30 "$res/cargo-test.log"; fi
grep -E '^(---- |thread .* panicked)' "$res/cargo-test.log" | head -20

kdir=$(bash "$here/kernel.sh" debug) || { count kernel_build 1; finish; }
module=$(bash "$here/module.sh" "$kdir") || { count module_build 1; finish; }
count module_build 0
cargo build --release --quiet -p rds-tests || { count test_programs_build 1; finish; }
tests_bin=$(cargo metadata --format-version 1 --no-deps | python3 -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])')/release/rds-tests
[ -x "$tests_bin" ] || { count test_programs_present 1; finish; }

# The one-guest suite and the two-guest pair run at the same time: much of a guest's run is
# waiting (kmemleak's object age, the peer handshake), so together they take far less than
# one after the other. Each has its own bound.
step "guest: one-guest suite (C RDS and rds_rs) and two-guest RDS/IB pair, debug kernel"
python3 tests/harness.py one --kernel "$kdir" --out "$res/one" --timeout 420 --cpus 1 -- \
  "$top/tests/guest/suite.sh" "$res/one" "$kdir" "$module" "$tests_bin" &
one_pid=$!

# Two guests: ping-pong over the in-tree C rds_rdma on soft-RoCE.
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
pair=$top/tests/guest/rdma-pair.sh
mkdir -p "$res/pair/a" "$res/pair/b"
side() { printf '%q ' "$pair" "$1" "$res/pair/$2" "$kdir" "$tests_bin" "$3" "$4" 4000 20 rxe "$res/pair/$5"; }
# lockdep.prove_locking=0: the C reference modules trip lockdep on every RDS/IB accept in 6.12
# (Documentation/c-rds-findings.md). Only runs of the C modules alone get this; KASAN, kmemleak
# and the other detectors stay on. Runs of rds_rs keep lockdep on.
python3 tests/harness.py two --kernel "$kdir" --out "$res/pair" --timeout 420 --port "$port" \
  --append lockdep.prove_locking=0 \
  --a "$(side server a 192.0.2.1 192.0.2.2 b)" --b "$(side client b 192.0.2.2 192.0.2.1 a)" \
  || count harness_two $?
wait "$one_pid" || count harness_one $?

step "judging guest results"
# Results that must be there, whatever else the guests wrote.
expect=()
for impl in c rs; do
  for name in socket_seqpacket socket_dgram socket_seqpacket_protocol_1 socket_many_open; do
    expect+=(--expect "$res/one/socket.$impl.tap:$name")
  done
  for name in bind_loopback bind_in_use bind_after_close connect_loopback getsockname6_bound; do
    expect+=(--expect "$res/one/bind.$impl.tap:$name")
  done
done
for name in rmmod_with_open_socket load_rs_while_c_loaded load_rs_after_c_unloaded; do
  expect+=(--expect "$res/one/exclusion.tap:$name")
done
expect+=(--expect "$res/pair/a/pingpong-c-rxe.tap:pingpong_server"
         --expect "$res/pair/b/pingpong-c-rxe.tap:pingpong_client")
python3 tests/harness.py judge --counts "$res/guest-counts" "${expect[@]}" \
  "$res/one" "$res/pair/a" "$res/pair/b"
if read -r gp gf < "$res/guest-counts"; then
  passed=$((passed + gp)); failed=$((failed + gf))
else
  count guest_judge 1
fi
finish
