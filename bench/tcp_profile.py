#!/usr/bin/env python3
"""Compares the perf profiles of one TCP row of `make bench` (BENCH_TCP_PROFILE), C against
rds_rs: instructions per request spent in (inclusive) and at (leaf) chosen kernel functions.

    tcp_profile.py DIR SIZE DEPTH RATE-C RATE-RS [PERIOD SECONDS]

DIR holds profile-tcp-{c,rs}-SIZE-DEPTH.folded[.gz] (bench/steps.py fold's format: count, comm
and the stack leaf first, tab-separated); RATE-C and RATE-RS are the rates the profile runs
measured ("tcp profile IMPL ..." lines of bench-raw.txt); PERIOD is perf's sampling period in
instructions (default 4,000,000: the plain kernel's tick) and SECONDS the profile run's guest
time (default 30). A sample stands for PERIOD instructions; divided by the requests of the run
(RATE x SECONDS), a function's samples give its instructions per request.
"""
import collections
import gzip
import os
import re
import sys

FUNCS = [
    "default_idle", "__sys_sendmsg", "__sys_recvmsg", "net_rx_action", "tcp_v4_rcv",
    "tcp_rcv_established", "tcp_ack", "tcp_data_queue", "tcp_write_xmit", "tcp_sendmsg_locked",
    "__tcp_transmit_skb", "ip_finish_output2", "tcp_check_space", "__tcp_read_sock",
    "pskb_extract", "skb_release_data", "free_unref_page", "_copy_from_iter", "_copy_to_iter",
    "memcpy_orig", "skb_copy_bits", "schedule", "process_one_work",
]


def short(sym):
    """A Rust symbol's last two path segments (legacy-free v0 mangling, read loosely)."""
    if sym.startswith("_R"):
        parts = re.findall(r"\d+([A-Za-z_][A-Za-z_0-9]*)", sym)
        if parts:
            return "::".join(parts[-2:])
    return sym


def load(path):
    opener = gzip.open if path.endswith(".gz") else open
    incl, leaf, total = collections.Counter(), collections.Counter(), 0
    with opener(path, "rt") as f:
        for line in f:
            n, _comm, stack = line.rstrip("\n").split("\t")
            n = int(n)
            frames = [short(s) for s in stack.split(";")]
            total += n
            leaf[frames[0]] += n
            for fr in set(frames):
                incl[fr] += n
    return total, incl, leaf


def find(d, impl, size, depth):
    for ext in (".folded", ".folded.gz"):
        p = os.path.join(d, f"profile-tcp-{impl}-{size}-{depth}{ext}")
        if os.path.exists(p):
            return p
    sys.exit(f"no profile-tcp-{impl}-{size}-{depth}.folded[.gz] in {d}")


def main():
    if len(sys.argv) not in (6, 8):
        sys.exit(__doc__)
    d, size, depth = sys.argv[1], sys.argv[2], sys.argv[3]
    rates = {"c": float(sys.argv[4]), "rs": float(sys.argv[5])}
    period = float(sys.argv[6]) if len(sys.argv) == 8 else 4e6
    secs = float(sys.argv[7]) if len(sys.argv) == 8 else 30.0
    data = {}
    for impl in ("rs", "c"):
        per = period / (rates[impl] * secs)
        total, incl, leaf = load(find(d, impl, size, depth))
        data[impl] = (per, total, incl, leaf)
    print("| function (inclusive) | rs instr/request | C instr/request |")
    print("|---|---:|---:|")
    print(f"| all samples | {data['rs'][1] * data['rs'][0]:,.0f} | {data['c'][1] * data['c'][0]:,.0f} |")
    for fn in FUNCS:
        a = data["rs"][2][fn] * data["rs"][0]
        b = data["c"][2][fn] * data["c"][0]
        if a or b:
            print(f"| `{fn}` | {a:,.0f} | {b:,.0f} |")
    for impl in ("rs", "c"):
        per, _, _, leaf = data[impl]
        print(f"\n{impl}: the 15 biggest leaf functions (instructions per request)\n")
        for fn, n in leaf.most_common(15):
            print(f"- `{fn}` {n * per:,.0f}")


if __name__ == "__main__":
    main()
