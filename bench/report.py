#!/usr/bin/env python3
"""The report of `make bench`: reads the guest's bench-raw.txt and writes the results table
as Markdown (and prints it) and a PNG chart.

  report.py --raw FILE --md FILE [--png FILE] [--meta KEY=VALUE]... [--baseline FILE.md]

bench-raw.txt has one line per run: "PASS IMPL SIZE DEPTH REQ/S MEDIAN MB/S RTT-US" (PASS is
main or repeat, IMPL c, rs or unix), or "PASS IMPL SIZE DEPTH FAIL"; and for RDMA over rxe
"ib IMPL KIND SIZE DEPTH REQ/S MB/S" (IMPL c, rs or raw, KIND write, read or send), or
"ib IMPL KIND SIZE DEPTH FAIL". The Markdown file keeps
those lines in a block at its end, so that a later report can compare against it
(--baseline: adds the baseline's rs/C and this run's rs rate against the baseline's).
"""

import argparse
import math
import re
import sys

IMPLS = ("rs", "c", "unix")


def human(b):
    if b >= 1 << 20 and b % (1 << 20) == 0:
        return f"{b >> 20} MiB"
    if b >= 1024 and b % 1024 == 0:
        return f"{b >> 10} KiB"
    return f"{b} B"


def parse_raw(lines):
    """Returns {(pass, impl, size, depth): rate or None (failed)} and the configurations in
    the order they ran, per pass."""
    runs, order = {}, {"main": [], "repeat": []}
    for line in lines:
        f = line.split()
        if len(f) < 5 or f[0] not in order or f[1] not in IMPLS:
            continue
        key = (f[0], f[1], int(f[2]), int(f[3]))
        runs[key] = None if f[4] == "FAIL" else float(f[4])
        cfg = (int(f[2]), int(f[3]))
        if cfg not in order[f[0]]:
            order[f[0]].append(cfg)
    return runs, order


def parse_ib(lines):
    """Returns {(impl, kind, size, depth): (rate, mb) or None (failed)} of the RDMA rows and
    their (kind, size, depth) in order (the raw rows are keyed with depth 1)."""
    runs, order = {}, []
    for line in lines:
        f = line.split()
        if len(f) < 6 or f[0] != "ib":
            continue
        key = (f[1], f[2], int(f[3]), int(f[4]))
        runs[key] = None if f[5] == "FAIL" else (float(f[5]), float(f[6]) if len(f) > 6 else 0.0)
        if f[1] != "raw" and (f[2], int(f[3]), int(f[4])) not in order:
            order.append((f[2], int(f[3]), int(f[4])))
    return runs, order


def ib_table(runs, order):
    """The RDMA table: rates and MB/s of rs, C and raw verbs, and their ratios."""
    head = ["operation", "size", "depth", "rs /s", "C /s", "raw /s", "rs MB/s", "C MB/s",
            "raw MB/s", "rs/C", "rs/raw", "C/raw"]
    t = [head]
    for kind, size, depth in order:
        r = {i: runs.get((i, kind, size, depth)) for i in ("rs", "c")}
        r["raw"] = runs.get(("raw", kind, size, 1))
        rate = {i: (v[0] if v else None) for i, v in r.items()}
        mb = {i: (f"{v[1]:,.1f}" if v else "FAIL") for i, v in r.items()}
        name = {"write": "RDMA write", "read": "RDMA read", "send": "request/ack"}.get(kind, kind)
        t.append([name, human(size), str(depth), fmt_rate(rate["rs"]), fmt_rate(rate["c"]),
                  fmt_rate(rate["raw"]), mb["rs"], mb["c"], mb["raw"],
                  fmt_ratio(ratio(rate["rs"], rate["c"])),
                  fmt_ratio(ratio(rate["rs"], rate["raw"])),
                  fmt_ratio(ratio(rate["c"], rate["raw"]))])
    return t


def raw_block(text):
    """The raw lines kept in a report's ```raw block."""
    m = re.search(r"```raw\n(.*?)```", text, re.S)
    return m.group(1).splitlines() if m else []


def ratio(a, b):
    return a / b if a is not None and b else None


def fmt_rate(v):
    return "FAIL" if v is None else f"{v:,.0f}"


def fmt_ratio(v):
    return "-" if v is None else f"{v:.3f}"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--raw", required=True)
    ap.add_argument("--md", required=True)
    ap.add_argument("--png")
    ap.add_argument("--meta", action="append", default=[], help="KEY=VALUE shown in the report")
    ap.add_argument("--baseline", help="an earlier report (.md) to compare rds_rs against")
    a = ap.parse_args()

    raw = [l.rstrip("\n") for l in open(a.raw) if l.strip()]
    runs, order = parse_raw(raw)
    if not order["main"]:
        sys.exit("report: no runs in " + a.raw)
    meta = dict(m.split("=", 1) for m in a.meta)
    base = None
    if a.baseline:
        base, _ = parse_raw(raw_block(open(a.baseline).read()))

    rows = []
    for size, depth in order["main"]:
        r = {i: runs.get(("main", i, size, depth)) for i in IMPLS}
        row = {
            "size": size, "depth": depth, **r,
            "rs/C": ratio(r["rs"], r["c"]), "rs/unix": ratio(r["rs"], r["unix"]),
            "unix/C": ratio(r["unix"], r["c"]),
        }
        if base is not None:
            b = {i: base.get(("main", i, size, depth)) for i in IMPLS}
            row["base rs/C"] = ratio(b["rs"], b["c"])
            row["rs/base rs"] = ratio(r["rs"], b["rs"])
        rows.append(row)

    head = ["request", "depth", "rs req/s", "C req/s", "unix req/s", "rs/C", "rs/unix", "unix/C"]
    if base is not None:
        head += ["base rs/C", "rs/base rs"]
    table = [head]
    for row in rows:
        cells = [human(row["size"]), str(row["depth"]), fmt_rate(row["rs"]), fmt_rate(row["c"]),
                 fmt_rate(row["unix"]), fmt_ratio(row["rs/C"]), fmt_ratio(row["rs/unix"]),
                 fmt_ratio(row["unix/C"])]
        if base is not None:
            cells += [fmt_ratio(row["base rs/C"]), fmt_ratio(row["rs/base rs"])]
        table.append(cells)

    # Repeatability: configurations run twice in the same guest.
    spread = []
    for size, depth in order["repeat"]:
        for i in IMPLS:
            x, y = runs.get(("main", i, size, depth)), runs.get(("repeat", i, size, depth))
            if x and y:
                spread.append((size, depth, i, x, y, abs(x - y) / ((x + y) / 2) * 100))

    def md_table(t):
        out = ["| " + " | ".join(t[0]) + " |",
               "|" + "|".join("---" if k < 2 else "---:" for k in range(len(t[0]))) + "|"]
        out += ["| " + " | ".join(r) + " |" for r in t[1:]]
        return out

    md = [f"# make bench: {meta.get('date', '')} {meta.get('commit', '')}".rstrip(), ""]
    md += ["Requests per second (both ways) of rds-stress over 127.0.0.1: one client and one "
           "server process with one task each, requests of the given size, 64-byte acks, "
           "`depth` requests outstanding each way; rds_rs (rs), the in-tree C RDS (C) and the "
           "same exchange over AF_UNIX SOCK_SEQPACKET (unix, `rds-stress -U`). One guest, one "
           "vCPU, QEMU `-icount shift=0,sleep=off`: the guest clock counts instructions (1 ns "
           "each), so a rate is a per-instruction cost and repeats from boot to boot.", ""]
    md += md_table(table)
    md.append("")
    ib_runs, ib_order = parse_ib(raw)
    itable = ib_table(ib_runs, ib_order) if ib_order else None
    if itable:
        md += ["RDMA over soft-RoCE in the same guest (an rxe device on each end of a veth pair): "
               "`rds-stress -D SIZE [-Z] -o` (one task each side, 64-byte requests and acks, "
               "`depth` outstanding, each request moving SIZE by RDMA write or read into or out "
               "of memory its request registered) against C RDS/IB and rds_rs; raw: perftest's "
               "`ib_write_bw`/`ib_read_bw` of SIZE over the same devices (its own queue depth, "
               "polling at nice 19). Last row: 64-byte requests at depth 1 (a round trip each), "
               "raw: `ibv_rc_pingpong -e` round trips of 64-byte sends. Ratios are of the rates.",
               ""]
        md += md_table(itable)
        md.append("")
    if spread:
        md.append("Repeatability (the same configuration run again at the end of the guest): "
                  + "; ".join(f"{human(s)} depth {d} {i} {x:,.0f} and {y:,.0f} ({p:.3f}%)"
                              for s, d, i, x, y, p in spread)
                  + f"; largest spread {max(p for *_, p in spread):.3f}%.")
        md.append("")
    if meta:
        md.append("| run | |")
        md.append("|---|---|")
        md += [f"| {k} | {v} |" for k, v in meta.items()]
        md.append("")
    md += ["Per run (pass, implementation, request bytes, depth, requests/s, median of the "
           "one-second rates, MB/s, mean round trip in guest microseconds):", "", "```raw"]
    md += raw
    md += ["```", ""]
    with open(a.md, "w") as f:
        f.write("\n".join(md))

    # The terminal copy: the table in plain columns.
    widths = [max(len(r[k]) for r in table) for k in range(len(head))]
    for r in table:
        print("  ".join(c.rjust(w) for c, w in zip(r, widths)))
    for s, d, i, x, y, p in spread:
        print(f"repeat {human(s)} depth {d} {i}: {x:,.0f} then {y:,.0f} ({p:.3f}%)")
    if itable:
        widths = [max(len(r[k]) for r in itable) for k in range(len(itable[0]))]
        for r in itable:
            print("  ".join(c.rjust(w) for c, w in zip(r, widths)))

    if a.png:
        try:
            chart(rows, meta, a.png)
        except ImportError:
            print("report: no matplotlib (scripts/setup.sh installs python3-matplotlib); "
                  "no chart", file=sys.stderr)


def chart(rows, meta, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels = [f"{human(r['size'])}\ndepth {r['depth']}" for r in rows]
    x = range(len(rows))
    colors = {"rs": "#d9534f", "c": "#5b7db1", "unix": "#8c8c8c"}
    names = {"rs": "rds_rs", "c": "C RDS", "unix": "AF_UNIX"}
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(12, 4.8))
    w = 0.27
    for k, i in enumerate(("rs", "c", "unix")):
        ax1.bar([p + (k - 1) * w for p in x], [r[i] or 0 for r in rows], w,
                label=names[i], color=colors[i])
    ax1.set_yscale("log")
    rates = [r[i] for r in rows for i in IMPLS if r[i]]
    if rates:
        ax1.set_ylim(bottom=10 ** math.floor(math.log10(min(rates))))
    ax1.set_ylabel("requests/s (guest time = instructions)")
    ax1.set_xticks(list(x), labels)
    ax1.set_title("rate")
    ax1.legend()
    w = 0.38
    for k, (key, name, c) in enumerate((("rs/C", "rds_rs / C", colors["rs"]),
                                        ("unix/C", "AF_UNIX / C", colors["unix"]))):
        vals = [r[key] or 0 for r in rows]
        bars = ax2.bar([p + (k - 0.5) * w for p in x], vals, w, label=name, color=c)
        for b, v in zip(bars, vals):
            ax2.annotate(f"{v:.2f}", (b.get_x() + b.get_width() / 2, v), ha="center",
                         va="bottom", fontsize=8)
    ax2.axhline(1.0, color=colors["c"], linestyle="--", linewidth=1, label="C RDS = 1")
    ax2.set_xticks(list(x), labels)
    ax2.set_ylabel("rate relative to C RDS")
    ax2.set_title("relative to C RDS")
    ax2.legend()
    fig.suptitle(f"make bench {meta.get('date', '')} {meta.get('commit', '')}: rds-stress, "
                 "64 B acks, 1 vCPU, QEMU icount")
    fig.tight_layout()
    fig.savefig(path, dpi=100)


if __name__ == "__main__":
    main()
