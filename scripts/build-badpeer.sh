#!/usr/bin/env bash
# Builds tests/peer/badpeer.c, the misbehaving RDS/IB peer of tests/guest/ib-bad.sh, into
# target/badpeer (host build; the guests see the host's filesystem and its rdma-core
# libraries) and prints the binary's path. Needs libibverbs-dev and librdmacm-dev
# (scripts/setup.sh). Warnings fail the build.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
src=$root/tests/peer/badpeer.c
out=$root/target/badpeer
mkdir -p "$root/target"
if [ ! -x "$out" ] || [ "$src" -nt "$out" ] || [ "$0" -nt "$out" ]; then
  gcc -std=gnu11 -O2 -Wall -Wextra -Werror -o "$out.tmp" "$src" -libverbs -lrdmacm
  mv "$out.tmp" "$out"
fi
echo "$out"
