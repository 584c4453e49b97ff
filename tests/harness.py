#!/usr/bin/env python3
"""Guest test harness for rds-rs.

Boots test kernels with virtme-ng under TCG, runs a guest script, collects its result files and
the kernel log, and judges the run. Every guest runs under a time bound and is killed (its whole
process group, by its own pid) when it overruns.

  harness.py one --kernel KDIR --out DIR [--timeout S] [--cpus N] [--qemu-opts OPTS]
                -- GUEST-COMMAND...
  harness.py two --kernel KDIR --out DIR [--timeout S] --port P --a "CMD" --b "CMD"
  harness.py pool --kernel KDIR --out DIR [--timeout S] [--port P --pair-a "CMD" --pair-b "CMD"]
                [--guest NAME=CMD ...]
  harness.py judge DIR...       (count results of finished runs; used by scripts/test.sh)
  harness.py times DIR...       (where a finished run's time went, from the guests' timelines)

Result files a guest writes into its out directory:
  *.tap         lines "ok NAME OBSERVATION" / "not ok NAME OBSERVATION: WHY"
  dmesg.txt     the kernel log at the end of the run (KUnit KTAP is parsed from it)
  kmemleak.txt  kmemleak's report after the modules were unloaded
The console log (console.txt) is written by the harness itself.
"""

import argparse
import os
import re
import signal
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
CACHE = os.environ.get("RDS_RS_CACHE") or os.path.join(
    os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "rds-rs")
VNG = os.path.join(CACHE, "tools/venv/bin/vng")
BOOT_QEMU = os.path.join(HERE, "guest/boot/qemu")
# vng runs its helpers (virtme-run, ...) and virtiofsd (scripts/setup.sh installs it in the
# tools' bin) from PATH.
os.environ["PATH"] = os.pathsep.join([os.path.dirname(VNG), os.path.join(CACHE, "tools/bin"),
                                      os.environ.get("PATH", "")])

# Kernel log lines that fail a run: crashes, warnings, sanitizer and lockdep reports, leaks,
# hangs. Matched anywhere in a line of the console or dmesg.
BAD_LOG = [
    r"\bBUG[: ]", r"WARNING:", r"\bOops\b", r"Kernel panic", r"kernel BUG at",
    r"general protection fault", r"KASAN:", r"UBSAN:", r"possible circular locking",
    r"possible recursive locking", r"inconsistent lock state", r"suspicious RCU usage",
    r"unreferenced object", r"blocked for more than", r"soft lockup",
    r"hard LOCKUP", r"rust_panic", r"panicked at", r"Call Trace:",
    r"kmemleak: .*disabled", r"Cannot allocate a kmemleak", r"rds_rs: leak:",
]
# Console lines that come from the kernel (vng prints messages of its own there too).
KERNEL_LINE = re.compile(r"^\[\s*\d+\.\d+\]")
BAD_RE = re.compile("|".join(BAD_LOG))


def stamp_start(out):
    """Starts a guest's timeline with the host's clock at its boot."""
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "timeline.txt"), "w") as f:
        f.write(f"{time.time():.3f} - host: guest starts\n")


CLK_TCK = os.sysconf("SC_CLK_TCK")


def group_cpu(pgid):
    """Host CPU seconds (user + system) of the live processes of process group `pgid` (a
    guest's vng and its QEMU)."""
    total = 0
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        # After the command: state ppid pgrp session ... utime (12th) stime (13th).
        if int(fields[2]) == pgid:
            total += int(fields[11]) + int(fields[12])
    return total / CLK_TCK


def run_guests(specs, timeout, listen_port=None, most=None, nice=None):
    """Runs one vng process per (argv, logfile) spec, each in its own process group, at most
    `most` at a time (all at once when None), in the order given, each within `timeout`
    seconds of its start; returns the exit codes (None = killed) and each guest's wall time
    from its start to its exit (written into its timeline as it exits). With `listen_port`,
    the first two specs are the two guests of a socket link: they start together (the second
    once the first's QEMU listens on the port). When a guest exits, the file `guest-exited` appears
    beside its log at once, so that a guest waiting for it (at a meeting of the two-guest
    rounds) stops waiting, and the harness reports each exit as it happens, with the host CPU
    time the guest took. `nice`, a list beside `specs`: the niceness of each one-guest run
    that starts while the pair still runs (its QEMU, vng and virtiofsd inherit it)."""
    n = len(specs)
    most = n if most is None else max(most, 2 if listen_port is not None else 1)
    procs, files, started = [None] * n, [], [None] * n
    codes, secs = [None] * n, [None] * n
    t0 = time.monotonic()

    def out_of(i):
        return os.path.dirname(specs[i][1])

    def start(i):
        argv, log = specs[i]
        stamp_start(out_of(i))
        f = open(log, "wb")
        files.append(f)
        # A one-guest run's niceness holds only beside the pair; one that starts after
        # the pair has ended competes at normal priority (with an unrelated busy process too).
        pair_running = listen_port is not None and n > 1 and i > 1 and any(
            procs[j] is not None and procs[j].returncode is None for j in (0, 1))
        inc = nice[i] if nice and pair_running else 0
        procs[i] = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=f,
                                    stderr=subprocess.STDOUT, start_new_session=True,
                                    preexec_fn=(lambda: os.nice(inc)) if inc else None)
        started[i] = time.monotonic()

    def kill(i, why):
        p = procs[i]
        secs[i] = time.monotonic() - started[i]
        with open(os.path.join(out_of(i), "timeline.txt"), "a") as f:
            f.write(f"{time.time():.3f} - host: cpu {group_cpu(p.pid):.0f}s\n")
            f.write(f"{time.time():.3f} - host: guest killed after {secs[i]:.0f}s\n")
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        p.wait()
        with open(os.path.join(out_of(i), "guest-exited"), "w") as f:
            f.write("killed\n")
        print(f"    guest {os.path.basename(out_of(i))} killed {why}", flush=True)

    try:
        waiting = list(range(n))
        if listen_port is not None and n > 1:
            start(0)
            if not wait_listening(listen_port, time.monotonic() + timeout):
                raise RuntimeError(f"nothing listens on 127.0.0.1:{listen_port}")
            start(1)
            waiting = waiting[2:]
        running = {i for i in range(n) if procs[i] is not None}
        next_sample = 0.0
        while running or waiting:
            if time.monotonic() >= next_sample:
                # Each guest's host CPU so far, every 5 s, into its timeline: `times` reads a
                # step's CPU from the samples around its start and end.
                next_sample = time.monotonic() + 5
                for i in running:
                    with open(os.path.join(out_of(i), "timeline.txt"), "a") as f:
                        f.write(f"{time.time():.3f} - host: cpu-sample "
                                f"{group_cpu(procs[i].pid):.1f}\n")
            while waiting and len(running) < most:
                i = waiting.pop(0)
                start(i)
                running.add(i)
            for i in sorted(running):
                # wait4 rather than poll: its rusage is the CPU time the guest (vng and the QEMU
                # it waited for) took, for `harness.py times`.
                pid, status, usage = os.wait4(procs[i].pid, os.WNOHANG)
                if pid == 0:
                    if time.monotonic() - started[i] > timeout:
                        kill(i, f"at its bound ({timeout}s)")
                        running.discard(i)
                    continue
                code = os.waitstatus_to_exitcode(status)
                procs[i].returncode = code
                running.discard(i)
                codes[i] = code
                cpu = usage.ru_utime + usage.ru_stime
                secs[i] = time.monotonic() - started[i]
                with open(os.path.join(out_of(i), "guest-exited"), "w") as f:
                    f.write(f"{code}\n")
                with open(os.path.join(out_of(i), "timeline.txt"), "a") as f:
                    f.write(f"{time.time():.3f} - host: cpu {cpu:.0f}s\n")
                    f.write(f"{time.time():.3f} - host: guest exited after {secs[i]:.0f}s\n")
                print(f"    guest {os.path.basename(out_of(i))} finished after "
                      f"{time.monotonic() - started[i]:.0f}s (at +{time.monotonic() - t0:.0f}s), "
                      f"{cpu:.0f}s of host CPU (exit {code})", flush=True)
            time.sleep(0.5)
    finally:
        # Every guest still running (the harness itself is being stopped) is killed with its
        # whole process group, by its own pid.
        for i, p in enumerate(procs):
            if p is not None and p.returncode is None and codes[i] is None:
                kill(i, "(the harness stopped)")
        for f in files:
            f.close()
    return codes, secs


def wait_listening(port, deadline):
    """Waits until a TCP socket listens on 127.0.0.1:port (the first guest's QEMU), reading
    /proc/net/tcp rather than connecting: QEMU would take a probe for its one peer."""
    want = f"0100007F:{port:04X}"
    while time.monotonic() < deadline:
        with open("/proc/net/tcp") as f:
            for line in f:
                fields = line.split()
                if len(fields) > 3 and fields[1] == want and fields[3] == "0A":
                    return True
        time.sleep(0.2)
    return False


def vng_argv(kernel, out, command, extra_qemu=None, name="rds-rs", cpus=2, append=(),
             qemu_opts=None, rwdirs=()):
    bz = os.path.join(kernel, "arch/x86/boot/bzImage")
    if not os.path.exists(bz):
        sys.exit(f"harness: no kernel image at {bz}")
    # The judge reads the guest's kernel configuration (which checkers it has) from here.
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "kernel.txt"), "w") as f:
        f.write(os.path.abspath(kernel) + "\n")
    # tests/guest/boot/qemu runs QEMU with tests/guest/boot/init in front of virtme-ng-init,
    # which takes udev and systemd-tmpfiles out of the boot (see there).
    argv = [VNG, "--run", bz, "--disable-kvm", "--cpus", str(cpus), "--memory", "384M", "--name", name,
            "--qemu", BOOT_QEMU, "--rwdir", out, "--verbose", "--append", "kmemleak=on",
            # Soft lockups reported after 60 s without a reschedule rather than 20: under TCG
            # with the debug kernel, siw's transmit thread sending 4 MiB of RDMA read responses
            # through TCP on the one vCPU (the receive side's softirq inline) went 22 s, a
            # length of the guest's slowness, not a lockup. A real one still shows.
            "--append", "watchdog_thresh=30"]
    # The host's root is exported read-only with a guest cache that never revalidates; a
    # directory another guest writes into while this one reads it (the other side of a socket
    # link) is mounted as a read-write directory of its own, which is revalidated.
    for d in rwdirs:
        argv += ["--rwdir", d]
    if not qemu_opts:
        # Guest time from the HPET, which QEMU keeps in step with the host's clock. The TSC's
        # rate is calibrated at boot against the PIT or the HPET, and on a busy host that
        # measurement can be far off (seen: 462 MHz for a 2.44 GHz TSC): the guest's clock then
        # ran five times too fast, and every timeout inside it expired five times too early.
        # (Under `make bench`'s instruction counter guest time is instructions, whatever the
        # clock source; those guests keep the kernel's choice.)
        argv += ["--append", "clocksource=hpet"]
    for arg in append:
        argv += ["--append", arg]
    if extra_qemu:
        argv += ["--disable-microvm", "--qemu-opts=" + extra_qemu]
    elif qemu_opts:
        # Options for QEMU itself (`make bench`: -icount), the machine left as it is.
        argv += ["--qemu-opts=" + qemu_opts]
    argv += ["--exec", command]
    return argv


def shell_join(words):
    return " ".join("'" + w.replace("'", "'\\''") + "'" for w in words)


def cmd_one(a):
    os.makedirs(a.out, exist_ok=True)
    cmd = shell_join(a.command)
    print(f"    guest: {cmd} (bound {a.timeout}s)", flush=True)
    codes, secs = run_guests([(vng_argv(a.kernel, a.out, cmd, append=a.append, cpus=a.cpus,
                                        qemu_opts=a.qemu_opts),
                              os.path.join(a.out, "console.txt"))],
                             a.timeout)
    record_guest_status(a.out, "guest", codes[0], secs[0], a.timeout)


def cmd_two(a):
    specs = pair_specs(a, a.a, a.b)
    codes, secs = run_guests(specs, a.timeout, listen_port=a.port)
    for side, code, s in zip("ab", codes, secs):
        record_guest_status(os.path.join(a.out, side), f"guest_{side}", code, s, a.timeout)


def cmd_pool(a):
    """Guests run side by side, one vCPU each: the two guests of a socket link (a and b, when
    --pair-a/--pair-b are given) and any number of independent one-guest runs (--guest
    NAME=CMD, out directory OUT/NAME). The host's cores are shared among all of them; a guest
    that sleeps or waits leaves its share to the others."""
    specs, names, nice = [], [], []
    if a.pair_a:
        specs += pair_specs(a, a.pair_a, a.pair_b)
        names += ["a", "b"]
        nice += [0, 0]
    kernels = dict(k.partition("=")[::2] for k in a.guest_kernel)
    for g in a.guest:
        name, _, cmd = g.partition("=")
        out = os.path.join(a.out, name)
        os.makedirs(out, exist_ok=True)
        print(f"    guest {name}: {cmd} (bound {a.timeout}s)", flush=True)
        specs.append((vng_argv(kernels.get(name, a.kernel), out, cmd, name=f"rds-rs-{name}",
                               cpus=1, append=a.append),
                      os.path.join(out, "console.txt")))
        names.append(name)
        nice.append(a.nice)
    codes, secs = run_guests(specs, a.timeout, listen_port=a.port if a.pair_a else None,
                             most=a.most, nice=nice)
    for name, code, s in zip(names, codes, secs):
        record_guest_status(os.path.join(a.out, name), f"guest_{name}", code, s, a.timeout)


def pair_specs(a, cmd_a, cmd_b):
    """The vng command lines of the two guests of a socket link: a listens, b connects."""
    specs = []
    for side, cmd, role in (("a", cmd_a, "listen"), ("b", cmd_b, "connect")):
        out = os.path.join(a.out, side)
        os.makedirs(out, exist_ok=True)
        mac = "52:54:00:00:00:0" + ("1" if side == "a" else "2")
        # The only NIC of each guest: a QEMU socket link between the two QEMU processes over
        # 127.0.0.1. Nothing else leaves the host.
        qemu = (f"-netdev socket,id=rl,{role}=127.0.0.1:{a.port} "
                f"-device virtio-net-pci,netdev=rl,mac={mac}")
        print(f"    guest {side}: {cmd} (bound {a.timeout}s)", flush=True)
        # One vCPU each: the two guests share the host's two cores.
        extra = a.append + (a.append_a if side == "a" else [])
        peer = os.path.join(a.out, "b" if side == "a" else "a")
        os.makedirs(peer, exist_ok=True)
        specs.append((vng_argv(a.kernel, out, cmd, qemu, name=f"rds-rs-{side}", cpus=1,
                               append=extra, rwdirs=[peer]),
                      os.path.join(out, "console.txt")))
    return specs


def record_guest_status(out, name, code, secs, bound):
    secs = secs or 0.0
    with open(os.path.join(out, "vm.tap"), "w") as f:
        if code is None:
            f.write(f"not ok {name}_finished killed: did not finish within {bound}s\n")
        elif code != 0:
            f.write(f"not ok {name}_finished exit={code}: guest command failed\n")
        else:
            f.write(f"ok {name}_finished {secs:.0f}s\n")


def parse_ktap(dmesg):
    """Returns (cases, suites): [(ok, name)] for the KUnit cases (indented below their suite)
    and for the suites (top level) in a kernel log. A skipped case counts as not ok: a test
    that did not run has not passed."""
    cases, suites = [], []
    for line in dmesg.splitlines():
        line = re.sub(r"^\[[ 0-9.]+\]\s?", "", line)
        m = re.match(r"^(\s*)(not ok|ok) \d+ (\S+)(.*)$", line)
        if not m:
            continue
        ok = m.group(2) == "ok" and "# SKIP" not in m.group(4).upper()
        (cases if len(m.group(1)) >= 4 else suites).append((ok, m.group(3)))
    return cases, suites


def leak_summary(text):
    """kmemleak's report, shortened for the result line: one line per unreferenced object
    (size, allocating task, age, the first caller outside the allocators), then the first
    objects in full. Every object is counted, so a long report is not cut to its oldest few."""
    objs = re.split(r"(?m)^(?=unreferenced object )", text)
    objs = [o for o in objs if o.startswith("unreferenced object ")]
    if not objs:
        return text[:2000]
    lines = [f"{len(objs)} unreferenced objects"]
    alloc = re.compile(r"kmalloc|kmem_cache|krealloc|__alloc|alloc_pages|vmalloc|"
                       r"kzalloc|kvmalloc|kmemdup|ReallocFunc|Allocator|slab")
    for o in objs[:60]:
        size = re.search(r"\(size (\d+)\)", o)
        who = re.search(r'comm "([^"]*)", pid (\d+), jiffies (\d+)', o)
        comm, pid, jiffies = who.groups() if who else ("?", "?", "?")
        frames = [l.strip() for l in o.splitlines()[1:]
                  if re.match(r"\s+(0x[0-9a-f]+|[A-Za-z_][\w.]*\+0x)", l) and not alloc.search(l)]
        lines.append(f"  size {size.group(1) if size else '?'} comm {comm} pid {pid} "
                     f"jiffies {jiffies}: {' < '.join(frames[:3])}")
    if len(objs) > 60:
        lines.append(f"  ... and {len(objs) - 60} more")
    return "\n".join(lines) + "\n" + "".join(objs[:2])[:3000]


def kernel_has(d, line):
    """Whether the kernel the guest of run directory `d` booted (kernel.txt, written when it
    was started) has `line` in its configuration; true when that is not known."""
    try:
        kdir = open(os.path.join(d, "kernel.txt")).read().strip()
        with open(os.path.join(kdir, ".config")) as f:
            return any(l.strip() == line for l in f)
    except OSError:
        return True


def judge(dirs, expect=()):
    """Counts every result in the given run directories, prints failures, compares the C and
    Rust observations, and returns (passed, failed)."""
    passed = failed = 0
    all_taps = {}  # suite file name -> observations, across all guests (C and Rust may differ)

    def result(ok, name, detail=""):
        nonlocal passed, failed
        if ok:
            passed += 1
        else:
            failed += 1
            print(f"FAIL {name} {detail}".rstrip())

    for d in dirs:
        label = os.path.relpath(d)
        if not os.path.isdir(d):
            result(False, f"{label}", "no results (run did not happen)")
            continue
        taps = {}
        if not os.path.exists(os.path.join(d, "vm.tap")):
            result(False, f"{label}/vm", "the guest was never run (no vm.tap)")
        for fn in sorted(os.listdir(d)):
            if not fn.endswith(".tap"):
                continue
            obs = {}
            for line in open(os.path.join(d, fn), errors="replace"):
                m = re.match(r"^(not ok|ok) (\S+) ?(.*)$", line.rstrip("\n"))
                if not m:
                    continue
                ok, name, rest = m.group(1) == "ok", m.group(2), m.group(3)
                obs[name] = rest.split(":", 1)[0]
                result(ok, f"{label}/{fn[:-4]}/{name}", rest)
            if not obs:
                result(False, f"{label}/{fn[:-4]}", "no results: the test program did not run")
            taps[fn[:-4]] = obs
            if fn.endswith((".c.tap", ".rs.tap")):
                if fn[:-4] in all_taps:
                    result(False, f"{label}/{fn}", "the same suite file came from two guests")
                all_taps[fn[:-4]] = obs
        dmesg_path = os.path.join(d, "dmesg.txt")
        dmesg = open(dmesg_path, errors="replace").read() if os.path.exists(dmesg_path) else ""
        if os.path.exists(os.path.join(d, "kunit.expected")):
            cases, suites = parse_ktap(dmesg)
            want = int(open(os.path.join(d, "kunit.expected")).read().split()[0])
            for ok, name in cases:
                result(ok, f"{label}/kunit/{name}")
            for ok, name in suites:
                if not ok:
                    result(False, f"{label}/kunit/{name}", "suite not ok")
            if len(cases) != want:
                result(False, f"{label}/kunit", f"{len(cases)} KUnit cases ran, expected {want}")
        leaks_path = os.path.join(d, "kmemleak.txt")
        if not kernel_has(d, "CONFIG_DEBUG_KMEMLEAK=y"):
            # A kernel built without kmemleak (the plain kernel) has no leak report to judge:
            # no result either way (the debug kernels' guests check for leaks).
            pass
        elif os.path.exists(leaks_path):
            leaks = open(leaks_path, errors="replace").read().strip()
            result(leaks == "", f"{label}/kmemleak", leak_summary(leaks))
        else:
            result(False, f"{label}/kmemleak", "no kmemleak report collected")
        bad = []
        for fn in ("console.txt", "dmesg.txt"):
            p = os.path.join(d, fn)
            if os.path.exists(p):
                bad += [f"{fn}: {l.strip()}" for l in open(p, errors="replace")
                        if KERNEL_LINE.match(l) and BAD_RE.search(l)]
        result(not bad, f"{label}/kernel_log_clean", "\n  ".join([""] + bad[:40]))
        if not dmesg:
            result(False, f"{label}/dmesg", "no kernel log collected")
    # Differential: every check run against both implementations (in whichever guests) must
    # observe the same.
    for suite in sorted(k[:-2] for k in all_taps if k.endswith(".c")):
        c, rs = all_taps.get(suite + ".c", {}), all_taps.get(suite + ".rs", {})
        for name in sorted(set(c) | set(rs)):
            same = name in c and name in rs and c[name] == rs[name]
            result(same, f"{suite}/{name}/c-vs-rs",
                   f"C={c.get(name, '(missing)')} rs={rs.get(name, '(missing)')}")
    for suite in sorted(k[:-3] for k in all_taps if k.endswith(".rs")):
        if suite + ".c" not in all_taps:
            result(False, f"{suite}/c-vs-rs", "no C run of this suite")

    # Results that must exist: a check that silently did not run has not passed.
    for e in expect:
        path, name = e.rsplit(":", 1)
        found = os.path.exists(path) and any(
            re.match(rf"^(not ok|ok) {re.escape(name)}( |$)", l) for l in open(path, errors="replace"))
        if not found:
            result(False, f"{os.path.relpath(path)}:{name}", "expected result missing")
    return passed, failed


def timeline(d):
    """[(host_time, what)] of a guest's timeline.txt, in order."""
    rows = []
    p = os.path.join(d, "timeline.txt")
    if not os.path.exists(p):
        return rows
    for line in open(p, errors="replace"):
        parts = line.rstrip("\n").split(" ", 2)
        if len(parts) == 3:
            try:
                rows.append((float(parts[0]), parts[2]))
            except ValueError:
                pass
    return rows


def cmd_times(a):
    """Prints, per guest, each step's length in wall time and in host CPU time (from the
    harness's samples of the guest's CPU, interpolated), the gaps between steps (the time no
    test program ran: boots, set-up, sleeps, waits for the other guest), and the guest's
    totals."""
    t_first = min((r[0][0] for r in map(timeline, a.dirs) if r), default=0.0)
    for d in a.dirs:
        rows = timeline(d)
        if not rows:
            print(f"{d}: no timeline")
            continue
        samples = [(t, float(w.split()[2])) for t, w in rows if w.startswith("host: cpu-sample")]
        final = [float(w.split()[2].rstrip("s")) for t, w in rows
                 if w.startswith("host: cpu ")]
        if final:
            samples.append((max(t for t, _ in rows), final[-1]))

        samples.insert(0, (rows[0][0], 0.0))

        def cpu_at(t):
            for (t0, c0), (t1, c1) in zip(samples, samples[1:]):
                if t0 <= t <= t1:
                    return c0 + (c1 - c0) * ((t - t0) / (t1 - t0) if t1 > t0 else 0)
            return samples[-1][1]

        def span(t0, t1):
            return f"{t1 - t0:7.1f}s {cpu_at(t1) - cpu_at(t0):6.1f}s cpu"

        print(f"{os.path.relpath(d)}: from +{rows[0][0] - t_first:.0f}s to +{rows[-1][0] - t_first:.0f}s"
              f" ({rows[-1][0] - rows[0][0]:.0f}s wall, {final[-1] if final else 0:.0f}s host CPU)")
        steps, scripts, last = {}, {}, rows[0][0]
        for t, what in rows:
            kind, _, name = what.partition(" ")
            if what.startswith("host: cpu"):
                continue
            if kind in ("start", "begin") and not steps and t - last >= 1:
                print(f"  {span(last, t)}  (no test program running)")
            if kind == "start":
                steps[name] = t
            elif kind == "begin":
                scripts[name] = t
                last = t
            elif kind == "stop" and name in steps:
                print(f"  {span(steps.pop(name), t)}  {name}")
                last = t
            elif kind == "end" and name in scripts:
                if t - last >= 1:
                    print(f"  {span(last, t)}  (no test program running)")
                print(f"  {span(scripts.pop(name), t)}  = script {name}")
                last = t
            elif kind == "host:":
                if "starts" not in name:
                    print(f"  {span(last, t)}  (after the last script: {name})")
                last = t
            else:
                print(f"  {'':7}   {what}")


def cmd_judge(a):
    passed, failed = judge(a.dirs, a.expect)
    print(f"guest: {passed} passed, {failed} failed")
    with open(a.counts, "w") as f:
        f.write(f"{passed} {failed}\n")


def stop_on_signal(signum, _frame):
    """SIGTERM, SIGINT and SIGHUP end the harness through its `finally` blocks, which kill the
    guests it started (a background job's SIGINT is ignored unless set here)."""
    raise SystemExit(f"harness: stopped by signal {signum}")


def main():
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, stop_on_signal)
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="mode", required=True)
    one = sub.add_parser("one")
    one.add_argument("--kernel", required=True)
    one.add_argument("--out", required=True)
    one.add_argument("--timeout", type=int, default=600)
    one.add_argument("--append", action="append", default=[], help="extra kernel argument")
    one.add_argument("--cpus", type=int, default=2)
    one.add_argument("--qemu-opts", default=None,
                     help='extra QEMU options, e.g. "-icount shift=0,sleep=off"')
    one.add_argument("command", nargs="+")
    two = sub.add_parser("two")
    two.add_argument("--kernel", required=True)
    two.add_argument("--out", required=True)
    two.add_argument("--timeout", type=int, default=600)
    two.add_argument("--port", type=int, required=True)
    two.add_argument("--append", action="append", default=[], help="extra kernel argument")
    two.add_argument("--append-a", action="append", default=[],
                     help="extra kernel argument for guest a only")
    two.add_argument("--a", required=True)
    two.add_argument("--b", required=True)
    pool = sub.add_parser("pool")
    pool.add_argument("--kernel", required=True)
    pool.add_argument("--out", required=True)
    pool.add_argument("--timeout", type=int, default=600)
    pool.add_argument("--port", type=int)
    pool.add_argument("--append", action="append", default=[], help="extra kernel argument")
    pool.add_argument("--append-a", action="append", default=[],
                      help="extra kernel argument for guest a only")
    pool.add_argument("--pair-a", help="guest a's command (listens on --port)")
    pool.add_argument("--pair-b", help="guest b's command (connects to a)")
    pool.add_argument("--guest", action="append", default=[], help="NAME=CMD: a one-guest run")
    pool.add_argument("--guest-kernel", action="append", default=[],
                      help="NAME=KDIR: the kernel of guest NAME (default --kernel)")
    pool.add_argument("--most", type=int, default=None,
                      help="at most this many guests at a time (default: all); the others wait "
                           "in the order given")
    pool.add_argument("--nice", type=int, default=0,
                      help="niceness of the one-guest runs (--guest) that start while the pair "
                           "runs: they take what the pair leaves of the cores, and little of "
                           "what it needs")
    jd = sub.add_parser("judge")
    jd.add_argument("--counts", required=True)
    jd.add_argument("--expect", action="append", default=[],
                    help="DIR/FILE.tap:NAME that must be present (repeatable)")
    jd.add_argument("dirs", nargs="+")
    tm = sub.add_parser("times")
    tm.add_argument("dirs", nargs="+")
    a = ap.parse_args()
    {"one": cmd_one, "two": cmd_two, "pool": cmd_pool, "judge": cmd_judge,
     "times": cmd_times}[a.mode](a)


if __name__ == "__main__":
    main()
