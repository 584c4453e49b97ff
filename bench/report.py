#!/usr/bin/env python3
"""The report of `make bench`: reads the guest's bench-raw.txt and writes the results tables
as Markdown (and prints them) and PNG charts.

  report.py --raw FILE --md FILE [--png FILE] [--meta KEY=VALUE]... [--baseline FILE.md]
            [--profile DIR --period NS]

bench-raw.txt has one line per run: "PASS IMPL SIZE DEPTH REQ/S MEDIAN MB/S RTT-US" (PASS is
main or repeat, IMPL c, rs or unix), or "PASS IMPL SIZE DEPTH FAIL" (rds-stress); "pp PASS
IMPL SIZE DEPTH REQ/S" or "pp PASS IMPL SIZE DEPTH FAIL" (rds-pingpong; PASS main, repeat,
profile or ib); and for RDMA over rxe "ib IMPL KIND SIZE DEPTH REQ/S MB/S" (IMPL c, rs or raw,
KIND write, read or send), or "ib IMPL KIND SIZE DEPTH FAIL"; over TCP between two
namespaces "tcp PASS IMPL SIZE DEPTH TASKS REQ/S MEDIAN MB/S RTT-US CONNS" (CONNS "-" for
unix), or "tcp PASS IMPL SIZE DEPTH TASKS FAIL". The Markdown file keeps
those lines in a block at its end, so that a later report can compare against it
(--baseline: adds the baseline's rs/C and this run's rs rate against the baseline's).
--profile: the folded call chains of the profile runs (profile-IMPL-SIZE-DEPTH.folded[.gz],
bench/steps.py) become the step table.
"""

import argparse
import gzip
import math
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import steps  # noqa: E402

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


def parse_pp(lines):
    """Returns {(pass, impl, size, depth): rate or None (failed)} of the rds-pingpong lines
    and their configurations in the order they ran, per pass."""
    runs, order = {}, {"main": [], "repeat": [], "profile": [], "ib": [], "ibprofile": []}
    for line in lines:
        f = line.split()
        if len(f) < 6 or f[0] != "pp" or f[1] not in order:
            continue
        key = (f[1], f[2], int(f[3]), int(f[4]))
        runs[key] = None if f[5] == "FAIL" else float(f[5])
        cfg = (int(f[3]), int(f[4]))
        if cfg not in order[f[1]]:
            order[f[1]].append(cfg)
    return runs, order


def parse_tcp(lines):
    """Returns {(pass, impl, size, depth, tasks): (rate, conns) or None (failed)} of the rows
    over TCP ("tcp PASS IMPL SIZE DEPTH TASKS REQ/S MEDIAN MB/S RTT-US CONNS"; conns is None
    for unix) and their (size, depth, tasks) in the order they ran, per pass."""
    runs, order = {}, {"main": [], "repeat": []}
    for line in lines:
        f = line.split()
        if len(f) < 7 or f[0] != "tcp" or f[1] not in order or f[2] not in IMPLS:
            continue
        cfg = (int(f[3]), int(f[4]), int(f[5]))
        if f[6] == "FAIL":
            runs[(f[1], f[2]) + cfg] = None
        else:
            conns = int(f[10]) if len(f) > 10 and f[10].isdigit() else None
            runs[(f[1], f[2]) + cfg] = (float(f[6]), conns)
        if cfg not in order[f[1]]:
            order[f[1]].append(cfg)
    return runs, order


def tcp_table(runs, order, base):
    """The TCP table: rates of rs, C and unix, their ratios and the RDS TCP connections of
    rs and C (and against a baseline's, when given). Returns the rows and the table."""
    rows = []
    rate = lambda v: v[0] if v else None  # noqa: E731
    for size, depth, tasks in order:
        r = {i: runs.get(("main", i, size, depth, tasks)) for i in IMPLS}
        v = {i: rate(r[i]) for i in IMPLS}
        row = {"size": size, "depth": depth, "tasks": tasks, **v,
               "conns": {i: (r[i][1] if r[i] else None) for i in ("rs", "c")},
               "rs/C": ratio(v["rs"], v["c"]), "rs/unix": ratio(v["rs"], v["unix"]),
               "unix/C": ratio(v["unix"], v["c"])}
        if base is not None:
            b = {i: rate(base.get(("main", i, size, depth, tasks))) for i in IMPLS}
            row["base rs/C"] = ratio(b["rs"], b["c"])
            row["rs/base rs"] = ratio(v["rs"], b["rs"])
        rows.append(row)
    head = ["request", "depth", "tasks", "rs req/s", "C req/s", "unix req/s", "rs/C",
            "rs/unix", "unix/C", "rs conns", "C conns"]
    if base is not None:
        head += ["base rs/C", "rs/base rs"]
    table = [head]
    for row in rows:
        cells = [human(row["size"]), str(row["depth"]), str(row["tasks"]), fmt_rate(row["rs"]),
                 fmt_rate(row["c"]), fmt_rate(row["unix"]), fmt_ratio(row["rs/C"]),
                 fmt_ratio(row["rs/unix"]), fmt_ratio(row["unix/C"])]
        cells += ["-" if row["conns"][i] is None else str(row["conns"][i]) for i in ("rs", "c")]
        if base is not None:
            cells += [fmt_ratio(row["base rs/C"]), fmt_ratio(row["rs/base rs"])]
        table.append(cells)
    return rows, table


def tcp_spread(runs, order):
    """spread_of's tuples for the TCP configurations run twice (the tool named with its
    tasks when more than one)."""
    out = []
    for size, depth, tasks in order:
        for i in IMPLS:
            x = runs.get(("main", i, size, depth, tasks))
            y = runs.get(("repeat", i, size, depth, tasks))
            if x and y:
                tool = "rds-stress over TCP" + (f" {tasks} tasks" if tasks > 1 else "")
                out.append((tool, size, depth, i, x[0], y[0],
                            abs(x[0] - y[0]) / ((x[0] + y[0]) / 2) * 100))
    return out


def loop_table(runs, order, base, pass_="main"):
    """The loopback table of one tool: rates of rs, C and unix and their ratios (and against
    a baseline's, when given). Returns the rows (dicts) and the table (lists of cells)."""
    rows = []
    for size, depth in order:
        r = {i: runs.get((pass_, i, size, depth)) for i in IMPLS}
        row = {
            "size": size, "depth": depth, **r,
            "rs/C": ratio(r["rs"], r["c"]), "rs/unix": ratio(r["rs"], r["unix"]),
            "unix/C": ratio(r["unix"], r["c"]),
        }
        if base is not None:
            b = {i: base.get((pass_, i, size, depth)) for i in IMPLS}
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
    return rows, table


def spread_of(runs, order, tool):
    """[(tool, size, depth, impl, first, second, spread %)] of the configurations run twice."""
    out = []
    for size, depth in order:
        for i in IMPLS:
            x, y = runs.get(("main", i, size, depth)), runs.get(("repeat", i, size, depth))
            if x and y:
                out.append((tool, size, depth, i, x, y, abs(x - y) / ((x + y) / 2) * 100))
    return out


def ib_pp_table(pp, order, ib_runs, base):
    """rds-pingpong over rxe: rs and C, and the raw-verbs round trips for 64 B."""
    head = ["request", "depth", "rs req/s", "C req/s", "raw req/s", "rs/C", "rs/raw", "C/raw"]
    if base is not None:
        head += ["base rs/C", "rs/base rs"]
    t = [head]
    for size, depth in order:
        rs, c = pp.get(("ib", "rs", size, depth)), pp.get(("ib", "c", size, depth))
        raw = ib_runs.get(("raw", "send", size, 1)) if depth == 1 else None
        raw = raw[0] if raw else None
        cells = [human(size), str(depth), fmt_rate(rs), fmt_rate(c),
                 "-" if raw is None else fmt_rate(raw), fmt_ratio(ratio(rs, c)),
                 fmt_ratio(ratio(rs, raw)), fmt_ratio(ratio(c, raw))]
        if base is not None:
            brs, bc = base.get(("ib", "rs", size, depth)), base.get(("ib", "c", size, depth))
            cells += [fmt_ratio(ratio(brs, bc)), fmt_ratio(ratio(rs, brs))]
        t.append(cells)
    return t


def folded_path(d, impl, size, depth, prefix=""):
    for ext in (".folded", ".folded.gz"):
        p = os.path.join(d, f"profile-{prefix}{impl}-{size}-{depth}{ext}")
        if os.path.exists(p):
            return p
    return None


def profile_section(d, pp, order, ib=False):
    """The step tables (Markdown lines) of the profile runs in pp, from the folded files in
    d, and the biggest leaf functions of each (ib: the runs over rxe)."""
    md = []
    main_pass, prof_pass, prefix = ("ib", "ibprofile", "ib-") if ib else ("main", "profile", "")
    for size, depth in order:
        name = f"{human(size)} depth {depth}" + (" over rxe" if ib else "")
        per, info, leaves = {}, {}, {}
        for impl in ("rs", "c") if ib else ("rs", "c", "unix"):
            path = folded_path(d, impl, size, depth, prefix)
            if impl == "unix" and path is None:
                continue  # results from before AF_UNIX was profiled
            rate = pp.get((main_pass, impl, size, depth))
            prate = pp.get((prof_pass, impl, size, depth))
            if path is None or not rate or not prate:
                per[impl] = None
                info[impl] = "FAIL (no profile, or a failed run)"
                continue
            counts = steps.attribute(path, impl)
            total = sum(counts[s] for s in steps.ORDER)
            if total == 0:
                per[impl] = None
                info[impl] = "FAIL (no samples)"
                continue
            ipe = 1e9 / rate
            per[impl] = {s: counts[s] / total * ipe for s in steps.ORDER}
            per[impl]["total"] = ipe
            info[impl] = (f"{total:,} samples of the exchange ({counts['idle']:,} idle and "
                          f"{counts['perf']:,} of perf left out); "
                          f"{prate:,.0f} req/s under perf, {rate:,.0f} without "
                          f"({1e9 / prate:,.0f} and {ipe:,.0f} instructions per exchange)")
            leaves[impl] = top_leaves(path, impl, ipe, total)
        md += [f"Instructions per exchange (a {human(size)} request and its 64-byte answer, "
               f"{depth} outstanding{', over rxe' if ib else ''}), step by step:", ""]
        unix = "unix" in per
        head = ["step", "rs", "C", "rs - C"] + (["unix", "rs - unix"] if unix else [])
        t = [head]

        def diff(a, b):
            return "-" if a is None or b is None else f"{a - b:+,.0f}"

        for s in steps.ORDER + ["total"]:
            v = {i: (per[i][s] if per[i] else None) for i in per}
            if s != "total" and all(not x for x in v.values()):
                continue  # a step none of them has (rxe's, over loopback)
            row = [f"**{s}**" if s == "total" else s, fmt_rate(v["rs"]), fmt_rate(v["c"]),
                   diff(v["rs"], v["c"])]
            if unix:
                row += [fmt_rate(v["unix"]), diff(v["rs"], v["unix"])]
            t.append(row)
        md += md_table(t)
        md.append("")
        md += [f"- rs: {info['rs']}", f"- C: {info['c']}"]
        md += [f"- unix: {info['unix']}"] if unix else []
        md.append("")
        for impl, label in (("rs", "rds_rs"), ("c", "C RDS"), ("unix", "AF_UNIX")):
            if leaves.get(impl):
                md.append(f"Biggest leaf functions, {label}, {name} (instructions per exchange, "
                          "step): " + "; ".join(f"`{f}` {n:,.0f} ({st})"
                                                 for f, n, st in leaves[impl]) + ".")
                md.append("")
    return md


def top_leaves(path, impl, ipe, total, n=12):
    """The n leaf functions with the most instructions per exchange, with their main step."""
    cmap = steps.compile_map(impl)
    by = {}
    for cnt, comm, frames in steps.read_folded(path):
        st = steps.step_of(comm, frames, cmap)
        if st in steps.EXCLUDED:
            continue
        leaf = frames[0] if frames else "[none]"
        e = by.setdefault(leaf, {})
        e[st] = e.get(st, 0) + cnt
    rows = sorted(by.items(), key=lambda kv: -sum(kv[1].values()))[:n]
    return [(steps.pretty(f), sum(v.values()) / total * ipe, max(v, key=v.get)) for f, v in rows]


def md_table(t):
    out = ["| " + " | ".join(t[0]) + " |",
           "|" + "|".join("---" if k < 2 else "---:" for k in range(len(t[0]))) + "|"]
    out += ["| " + " | ".join(r) + " |" for r in t[1:]]
    return out


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


def print_table(t):
    widths = [max(len(r[k]) for r in t) for k in range(len(t[0]))]
    for r in t:
        print("  ".join(c.rjust(w) for c, w in zip(r, widths)))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--raw", required=True)
    ap.add_argument("--md", required=True)
    ap.add_argument("--png")
    ap.add_argument("--meta", action="append", default=[], help="KEY=VALUE shown in the report")
    ap.add_argument("--baseline", help="an earlier report (.md) to compare rds_rs against")
    ap.add_argument("--profile", help="the folded call chains of the profile runs (a folder)")
    ap.add_argument("--period", type=int, default=0, help="perf's sampling period (ns)")
    a = ap.parse_args()

    raw = [l.rstrip("\n") for l in open(a.raw) if l.strip()]
    runs, order = parse_raw(raw)
    pp, pp_order = parse_pp(raw)
    ib_runs, ib_order = parse_ib(raw)
    tcp, tcp_order = parse_tcp(raw)
    if not order["main"] and not pp_order["main"] and not tcp_order["main"]:
        sys.exit("report: no runs in " + a.raw)
    meta = dict(m.split("=", 1) for m in a.meta)
    base = base_pp = base_tcp = None
    if a.baseline:
        braw = raw_block(open(a.baseline).read())
        base, _ = parse_raw(braw)
        base_pp, _ = parse_pp(braw)
        base_tcp, _ = parse_tcp(braw)

    rows, table = loop_table(runs, order["main"], base)
    pp_rows, pp_table = loop_table(pp, pp_order["main"], base_pp)
    # Repeatability: configurations run twice in the same guest.
    spread = spread_of(pp, pp_order["repeat"], "rds-pingpong")
    spread += spread_of(runs, order["repeat"], "rds-stress")
    tcp_rows, tcp_tab = tcp_table(tcp, tcp_order["main"], base_tcp)
    spread += tcp_spread(tcp, tcp_order["repeat"])
    itable = ib_table(ib_runs, ib_order) if ib_order else None
    pp_itable = ib_pp_table(pp, pp_order["ib"], ib_runs, base_pp) if pp_order["ib"] else None

    md = [f"# make bench: {meta.get('date', '')} {meta.get('commit', '')}".rstrip(), ""]
    md += ["One guest, one vCPU, QEMU `-icount shift=0,sleep=off`: the guest clock counts "
           "instructions (1 ns each), so a rate is a per-instruction cost and repeats from boot "
           "to boot. rs: rds_rs; C: the in-tree C RDS (net/rds of the same kernel); unix: the "
           "same exchange over AF_UNIX SOCK_SEQPACKET.", ""]
    sections = [
        (pp_table, "**rds-pingpong** over 127.0.0.1 (`tools/src/bin/rds-pingpong.rs`): one "
         "client and one server process, blocking `sendto`/`recv`, requests of the given size, "
         "64-byte answers, `depth` requests outstanding, nothing verified; requests answered "
         "per second of guest time (one second of warm-up after the first exchange not "
         "counted). For unix, a connected socket pair."),
        (table, "**rds-stress** over 127.0.0.1: requests per second (both ways), one client "
         "and one server process with one task each, requests of the given size, 64-byte "
         "acks, `depth` requests outstanding each way, every message verified (its header, "
         "sequence and payload bytes); unix is `rds-stress -U`."),
        (tcp_tab, "**rds-stress over TCP** between two network namespaces of the guest "
         "joined by a veth pair (server 10.0.0.1, client 10.0.0.2): C RDS with `rds_tcp.ko` "
         "and rds_rs with its TCP transport; the exchange of rds-stress over 127.0.0.1 "
         "(both sides sending requests of the given size, 64-byte acks, `depth` outstanding "
         "from each task to each task of the other side, every message verified), `tasks` "
         "tasks each side (one RDS socket each, on ports of their own). unix: the same "
         "exchange over AF_UNIX in one namespace (`rds-stress -U`): no network, the cost of "
         "the tool and the system calls. conns: the RDS TCP connections (port 16385) "
         "established in the client's namespace after the run (multipath: more than one "
         "between the two addresses)."),
        (pp_itable, "**rds-pingpong over soft-RoCE** in the same guest (an rxe device on each "
         "end of a veth pair, client 192.0.2.2, server 192.0.2.1): C RDS/IB (rds.ko + "
         "rds_rdma.ko) and rds_rs; raw: `ibv_rc_pingpong -e` round trips of 64-byte sends over "
         "the same devices (the floor for 64 B depth 1)."),
        (itable, "RDMA over soft-RoCE in the same guest (an rxe device on each end of a veth "
         "pair): `rds-stress -D SIZE [-Z] -o` (one task each side, 64-byte requests and acks, "
         "`depth` outstanding, each request moving SIZE by RDMA write or read into or out of "
         "memory its request registered) against C RDS/IB and rds_rs; raw: perftest's "
         "`ib_write_bw`/`ib_read_bw` of SIZE over the same devices (its own queue depth, "
         "polling at nice 19). Last row: 64-byte requests at depth 1 (a round trip each), raw: "
         "`ibv_rc_pingpong -e` round trips of 64-byte sends. Ratios are of the rates."),
    ]
    for t, text in sections:
        if t and len(t) > 1:
            md += [text, ""] + md_table(t) + [""]
    if spread:
        md.append("Repeatability (the same configuration run again at the end of the guest): "
                  + "; ".join(f"{t} {human(s)} depth {d} {i} {x:,.0f} and {y:,.0f} ({p:.3f}%)"
                              for t, s, d, i, x, y, p in spread)
                  + f"; largest spread {max(p for *_, p in spread):.3f}%.")
        md.append("")
    if a.profile and (pp_order["profile"] or pp_order["ibprofile"]):
        md += ["## Step profile", ""]
        md += profile_method(a.period)
        md += profile_section(a.profile, pp, pp_order["profile"])
        md += profile_section(a.profile, pp, pp_order["ibprofile"], ib=True)
    if meta:
        md.append("| run | |")
        md.append("|---|---|")
        md += [f"| {k} | {v} |" for k, v in meta.items()]
        md.append("")
    md += ["Per run: rds-stress lines (pass, implementation, request bytes, depth, requests/s, "
           "median of the one-second rates, MB/s, mean round trip in guest microseconds); "
           "`tcp` lines: rds-stress over TCP (pass, implementation, request bytes, depth, "
           "tasks, then as rds-stress, then the RDS TCP connections); "
           "`pp` lines: rds-pingpong (pass, implementation, request bytes, depth, requests/s); "
           "`ib` lines: over rxe (implementation, operation, bytes, depth, rate/s, MB/s):",
           "", "```raw"]
    md += raw
    md += ["```", ""]
    with open(a.md, "w") as f:
        f.write("\n".join(md))

    # The terminal copy: the tables in plain columns.
    for t, title in ((pp_table, "rds-pingpong, loopback"), (table, "rds-stress, loopback"),
                     (tcp_tab, "rds-stress, TCP between two namespaces"),
                     (pp_itable, "rds-pingpong, rxe"), (itable, "RDMA, rxe")):
        if t and len(t) > 1:
            print(title)
            print_table(t)
    for t, s_, d, i, x, y, p in spread:
        print(f"repeat {t} {human(s_)} depth {d} {i}: {x:,.0f} then {y:,.0f} ({p:.3f}%)")

    if a.png:
        try:
            if rows:
                chart(rows, meta, a.png, "rds-stress")
            if pp_rows:
                chart(pp_rows, meta, re.sub(r"(\.png)?$", "-pingpong.png", a.png, count=1),
                      "rds-pingpong")
            if tcp_rows:
                chart(tcp_rows, meta, re.sub(r"(\.png)?$", "-tcp.png", a.png, count=1),
                      "rds-stress over TCP (veth, two namespaces)")
        except ImportError:
            print("report: no matplotlib (scripts/setup.sh installs python3-matplotlib); "
                  "no chart", file=sys.stderr)


def profile_method(period):
    return [
        "How: each configuration of the table ran once more for rds_rs and C (and, in newer "
        "runs, AF_UNIX) under "
        f"`perf record -a -g -e cpu-clock -c {period}` in the same guest. Under the instruction "
        f"counter a cpu-clock sample every {period} ns of guest time is a sample every "
        f"{period} instructions, so a step's samples are proportional to its instructions. "
        "Each sample's call chain is walked from the leaf towards the root and the first "
        "function that the implementation's map in `bench/steps.py` names decides the step "
        "(helpers such as the allocator, locks and user copies count for the step that called "
        "them). send: the family's sendmsg up to queuing (C `rds_sendmsg`); transmit: the "
        "transmit loop and the transport's xmit (C `rds_send_xmit`, `rds_loop_xmit`); "
        "deliver: handing the message to the receiving socket (C `rds_recv_incoming`); "
        "ack/settle: settling the sent message (C `rds_send_drop_acked`); recvmsg: the "
        "family's recvmsg (C `rds_recvmsg`); scheduler: wake-ups and context switches "
        "wherever they are called from; syscall: system-call entry and exit and the socket "
        "layer above the family; user: the benchmark program and libc; other: the rest "
        "(interrupts, timers, unrelated kworkers). AF_UNIX (where profiled) has two steps "
        "of its own: send (`unix_dgram_sendmsg`, which also queues on the peer) and recvmsg "
        "(`unix_dgram_recvmsg`). Over rxe two steps more: completions (getting a work "
        "completion to its handler: the CQ's event, the poll work item or softirq or C's "
        "tasklet) and rxe/net (the soft device's verbs and tasks, and the UDP and veth "
        "under it); the transports' own functions count for transmit (posting, acks), "
        "deliver (receive completions) and ack/settle (send completions). "
        "Idle and perf's own samples are left "
        "out. Each step's share of the remaining samples is multiplied by the instructions per "
        "exchange measured without perf (1e9 / the rds-pingpong rate above), so the steps add "
        "up to that total. One exchange is two messages (the request and its answer), each of "
        "which goes through every step. Inlined functions count for their caller (the maps "
        "name functions that exist as symbols); a sample in an interrupts-off section counts "
        "where interrupts come back on, in the same function. **Caveat: aliasing.** The "
        "sampling period is fixed (the tick) and under the instruction counter the exchange "
        "repeats almost exactly, so samples can fall on a few phases of it: the total per "
        "exchange is exact (it comes from the rate), a step's share is an estimate that may "
        "be biased (in the 16 KiB profiles of 2026-11-28 the copy into the kernel got 1.7 "
        "(rs) to 5.5 (C) times the samples of the copy out of it, the same bytes through "
        "the same routine). Compare steps between runs only where the difference is large. "
        "The folded call chains are in "
        "the `.profile/` folder beside this file (`bench/steps.py show FILE IMPL` lists the "
        "biggest with their steps).", ""]


def chart(rows, meta, path, tool):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels = [f"{human(r['size'])}\ndepth {r['depth']}"
              + (f"\n{r['tasks']} tasks" if r.get("tasks", 1) > 1 else "") for r in rows]
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
    fig.suptitle(f"make bench {meta.get('date', '')} {meta.get('commit', '')}: {tool}, "
                 "64 B answers, 1 vCPU, QEMU icount")
    fig.tight_layout()
    fig.savefig(path, dpi=100)


if __name__ == "__main__":
    main()
