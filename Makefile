# rds-rs. A newcomer needs two commands:
#   make demo   boot a guest, load rds_rs, show it working
#   make test   run every test (host, KUnit, guests); ends with "N passed, N failed"
# Both set up what they need (Debian packages, bindgen-cli, virtme-ng, the kernels) on first use
# and cache the kernel builds in ~/.cache/rds-rs.
.PHONY: demo test bench bench-profile soak setup kernel module fmt clean

demo:
	@bash scripts/demo.sh

# rds-stress and rds-pingpong against C RDS, rds_rs and AF_UNIX side by side (plain kernel,
# one guest), rds-stress over TCP between two namespaces, then over soft-RoCE: tables of rates
# and ratios. BENCH_SECS, BENCH_CONFIGS, BENCH_PINGPONG, BENCH_TCP, ... adjust it (see
# scripts/bench.sh).
bench:
	@bash scripts/bench.sh

# make bench plus the step profile: perf in the guest during rds-pingpong's 64 B depth 1 and
# 1 KiB depth 8 exchanges over loopback and 64 B depth 1 over soft-RoCE, instructions per
# exchange step by step for rds_rs and C.
bench-profile:
	@BENCH_PROFILE=$${BENCH_PROFILE:-1} BENCH_IB_PROFILE=$${BENCH_IB_PROFILE-64:1} bash scripts/bench.sh

# `rds-tests load 1000000` against rds_rs on the debug kernel (SOAK_COUNT, SOAK_TIMEOUT).
soak:
	@bash scripts/bench.sh --soak

test:
	@bash scripts/test.sh

setup:
	@bash scripts/setup.sh

# The debug kernel and the test build of rds_rs.ko for it (what `make test` loads).
module: setup
	@bash scripts/module.sh "$$(bash scripts/kernel.sh debug)" test

fmt:
	cargo fmt --all
	rustfmt --edition 2021 --config-path rustfmt.toml rds/*.rs rds_loop/*.rs rds_ib/*.rs rds_ib/ib/*.rs rds_tcp/*.rs rds_tcp/tcp/*.rs bindings/*.rs bindings/ib/*.rs

clean:
	rm -rf target
