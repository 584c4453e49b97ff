#!/usr/bin/env python3
"""The step profile of `make bench` (BENCH_PROFILE): where one request/answer exchange's
instructions go, step by step, for rds_rs, the in-tree C RDS and AF_UNIX SOCK_SEQPACKET.

  steps.py fold < perf-script-output > FILE.folded      (in the guest, after a run)
  steps.py show FILE.folded IMPL [N]                    (the N biggest stacks with their step)

`fold` reads `perf script -F comm,ip,sym,dso` of a `perf record -a -g -e cpu-clock` run and
writes one line per distinct call chain: "COUNT<TAB>COMM<TAB>FRAME;FRAME;..." with the leaf
first; a kernel frame is its symbol, the user-space part of a chain is one "[user]" frame.

`attribute()` (used by report.py) gives each sample a step by walking its chain from the leaf
towards the root and taking the first frame that the implementation's map names (STEPS below):
a sample in `kmalloc` called from `rds_sendmsg` counts for "send", one in `_copy_to_user`
called from `rds_recvmsg` for "recvmsg". The maps name each step's entry points, not every
function, so that helpers (allocator, locks, copies) count for the step that called them.
Wake-ups and context switches are "scheduler" wherever they are called from; the system-call
entry and exit and the socket layer above the family's sendmsg/recvmsg are "syscall";
samples whose chain reaches user space without a kernel frame are "user" (the benchmark
program and its C library). A chain that none of these names is "other" (interrupts, timers,
kworkers doing something else). Samples of the idle task and of perf itself are counted apart
("idle", "perf") and are not part of the exchange.

Under QEMU's instruction counter (-icount shift=0, sleep=off) guest time advances one
nanosecond per instruction, so a cpu-clock sample every PERIOD ns is a sample every PERIOD
instructions: the samples of a step are proportional to its instructions. The profile run's
own rate is lower (perf's sampling interrupt and its process cost instructions too), so the
report scales each step's share of the exchange's samples by the instructions per exchange of
the run without perf (1e9 / requests per second).

A cpu-clock sample cannot land where interrupts are off: an irqsave section's instructions
are counted at the instruction that turns interrupts back on, which is in the same function
as the section, so in the same step.
"""

import collections
import gzip
import re
import sys

# Step names in report order; IDLE and PERF are not part of the exchange.
ORDER = ["send", "transmit", "deliver", "ack/settle", "recvmsg", "completions", "rxe/net",
         "syscall", "scheduler", "user", "other"]
EXCLUDED = ["idle", "perf"]

# What both implementations share: the kernel around the socket family.
COMMON = [
    # wake-ups and switches, wherever they come from
    ("scheduler", r"(__)?schedule(_timeout|_idle|_preempt_disabled)?|preempt_schedule\w*|"
                  r"try_to_wake_up|wake_up_process|wake_up_q|__wake_up\w*|"
                  r"autoremove_wake_function|default_wake_function|woken_wake_function|"
                  r"finish_task_switch\w*|__switch_to\w*|ttwu_\w+"),
    # IB (over rxe): getting a work completion to its handler, the CQ's event and its poll
    # (a work item with IB_POLL_WORKQUEUE, a softirq with IB_POLL_SOFTIRQ, C's tasklets); the
    # handlers themselves are the implementation's steps
    ("completions", r"__ib_process_cq|ib_cq_poll_work|ib_poll_handler|irq_poll_softirq|"
                    r"ib_cq_completion_\w+|rds_rs_ib_wc|rds_ib_cq_comp_handler_\w+|"
                    r"tasklet_action\w*|irq_poll_sched"),
    # IB (over rxe): the soft device's verbs and tasks and the network under it (the UDP
    # encapsulation over the veth pair), entered from the implementation's posts and polls
    ("rxe/net", r"rxe_\w+|do_task|do_work|net_rx_action|__netif_receive_skb\w*|"
                r"netif_receive_skb\w*|process_backlog|__dev_queue_xmit|dev_hard_start_xmit|"
                r"veth_xmit|ip_finish_output2|ip_local_out|__ip_local_out|udp_tunnel_xmit_skb|"
                r"udp_rcv|__udp4_lib_rcv|ib_poll_cq|ib_post_\w+|ib_req_notify_cq"),
    # the system call and the socket layer down to the family
    ("syscall", r"do_syscall_64|entry_SYSCALL_64\w*|syscall_exit_to_user_mode\w*|"
                r"__x64_sys_\w+|__sys_\w+|__sock_sendmsg|sock_sendmsg|sock_recvmsg\w*|"
                r"____sys_\w+|___sys_\w+|sockfd_lookup_light|fdget\w*|fput\w*"),
]

# C RDS (net/rds): rds_sendmsg queues and calls rds_send_xmit inline; over loopback
# rds_loop_xmit hands the message to rds_recv_incoming and settles it with
# rds_send_drop_acked at once.
C_STEPS = [
    ("send", r"rds_sendmsg"),
    ("transmit", r"rds_send_xmit|rds_loop_xmit|rds_send_worker|rds_ib_xmit\w*|"
                 r"rds_ib_send_ack|rds_ib_attempt_ack"),
    ("deliver", r"rds_recv_incoming|rds_ib_recv\w*|rds_ib_process_recv|rds_ib_tasklet_fn_recv"),
    ("ack/settle", r"rds_send_drop_acked|rds_send_path_drop_acked|rds_ib_send_cqe_handler|"
                   r"rds_ib_tasklet_fn_send|rds_ib_send_unmap\w*"),
    ("recvmsg", r"rds_recvmsg"),
]

# rds_rs: Rust symbols are matched by their path (see pretty()). The socket family's
# callbacks lead into send::sendmsg and recv::recvmsg (inlined into Family::sendmsg and
# Family::recvmsg); Conn::xmit drains the send queue into the loopback transport's xmit, which
# parses the frame and hands it to recv::incoming (arrive() is inlined into LoopConn's xmit,
# so its header parsing counts as transmit); the receiving side's record comes from the
# SlotCache; xmit_complete sends the ack, ack_received settles. Issue 18's loopback path:
# Conn::send_now hands a message straight to recv::queue_for, which queues it on the bound
# receiver (no frame, no ack: what loopback skips), so they are transmit and deliver.
LOOP = r"rds_core::rds_loop::loopback::LoopConn::transport::ConnTransport::"
RS_STEPS = [
    ("send", r"rds_core::bindings::net::sendmsg_callback::.*|"
             r"rds_core::socket::Rds::bindings::net::Family::sendmsg"),
    ("transmit", r"rds_core::conn::Conn::(xmit|kick|next_message|send_now)|" + LOOP + "xmit|"
                 r"rds_core::conn::Conn::kernel::workqueue::WorkItem::.*run"),
    ("deliver", r"rds_core::recv::(incoming|queue_for)|rds_core::conn::Conn::rx_data|"
                r"rds_core::message::SlotCache::take_or_alloc"),
    ("ack/settle", LOOP + r"xmit_complete|rds_core::conn::Conn::ack_received|"
                   r"rds_core::send::(settle|op_complete)"),
    ("recvmsg", r"rds_core::bindings::net::recvmsg_callback::.*|"
                r"rds_core::socket::Rds::bindings::net::Family::recvmsg"),
    # IB: the transport's xmit and acks, its receive and send completions (the completion
    # handler, Path::done, with the receive path inlined into it: deliver)
    ("transmit", r"rds_core::rds_ib::ib::.*::(xmit|post|post_op|reserve|send_ack|attempt_ack)|"
                 r"rds_core::rds_ib::ib::conn::IbConn::.*::xmit"),
    ("deliver", r"rds_core::rds_ib::ib::.*::(recv_done|deliver|rx_failed|try_for_each)|"
                r"rds_core::rds_ib::ib::conn::Path::.*::done"),
    ("ack/settle", r"rds_core::rds_ib::ib::.*::(send_done|sent)|"
                   r"rds_core::conn::Conn::(recycle_later|recycle_settled)"),
]

# AF_UNIX SOCK_SEQPACKET (the floor): unix_dgram_sendmsg allocates the skb, copies the data
# in and queues it on the peer (deliver and transmit are part of it: one step, send); the
# receiver's unix_dgram_recvmsg dequeues, copies out and frees it.
UNIX_STEPS = [
    ("send", r"unix_seqpacket_sendmsg|unix_dgram_sendmsg"),
    ("recvmsg", r"unix_seqpacket_recvmsg|unix_dgram_recvmsg|__unix_dgram_recvmsg"),
]

IMPL_STEPS = {"c": C_STEPS, "rs": RS_STEPS, "unix": UNIX_STEPS}
IDLE = re.compile(r"do_idle|cpu_startup_entry|default_idle\w*|\w*safe_halt|cpuidle\w*")


def compile_map(impl):
    return [(step, re.compile(pat)) for step, pat in IMPL_STEPS[impl] + COMMON]


def step_of(comm, frames, cmap):
    """The step of one sample (its chain leaf first)."""
    if comm.startswith("perf"):
        return "perf"
    if comm.startswith("swapper") or any(IDLE.fullmatch(f) for f in frames):
        return "idle"
    for f in frames:
        if f == "[user]":
            return "user"
        name = pretty(f)
        for step, rx in cmap:
            if rx.fullmatch(name):
                return step
    return "other"


def read_folded(path):
    """[(count, comm, [frames leaf first])] of a folded file (gzipped if it ends in .gz)."""
    out = []
    with (gzip.open(path, "rt") if path.endswith(".gz") else open(path)) as f:
        for line in f:
            parts = line.rstrip("\n").split("\t")
            if len(parts) != 3:
                continue
            out.append((int(parts[0]), parts[1], parts[2].split(";") if parts[2] else []))
    return out


def attribute(path, impl):
    """{step: samples} of a folded file (ORDER and EXCLUDED steps, zero where none)."""
    cmap = compile_map(impl)
    counts = collections.Counter({s: 0 for s in ORDER + EXCLUDED})
    for n, comm, frames in read_folded(path):
        counts[step_of(comm, frames, cmap)] += n
    return counts


def pretty(sym):
    """A readable name for a frame: a v0-mangled Rust symbol as its path of identifiers
    (`_RNvNtCs1a_6rds_rs4send7sendmsg` as `rds_rs::send::sendmsg`; disambiguators, back
    references and generic arguments dropped), anything else as it is."""
    if not sym.startswith("_R"):
        return sym
    names, k, body = [], 0, sym[2:]
    base62 = re.compile(r"[0-9a-zA-Z]*_")
    while k < len(body):
        c = body[k]
        if c.isdigit():
            m = re.compile(r"(\d+)").match(body, k)
            n, k = int(m.group(1)), m.end()
            if k < len(body) and body[k] == "_":
                k += 1
            names.append(body[k:k + n])
            k += n
        elif c in "sB":
            m = base62.match(body, k + 1)
            k = m.end() if m else k + 1
        else:
            k += 1
    return "::".join(names) or sym


FRAME = re.compile(r"^\s+([0-9a-f]+)\s+(.*?)\s+\((.*)\)\s*$")


def fold(inp, out):
    """perf script output (comm line, then frames) to folded stacks."""
    stacks = collections.Counter()
    comm, frames = None, []

    def flush():
        if comm is not None:
            stacks[(comm, ";".join(frames))] += 1

    for line in inp:
        line = line.rstrip("\n")
        if not line.strip():
            flush()
            comm, frames = None, []
            continue
        m = FRAME.match(line)
        if m and comm is not None:
            sym, dso = m.group(2), m.group(3)
            sym = re.sub(r"\+0x[0-9a-f]+$", "", sym)
            kernel = dso.startswith("[") and dso != "[unknown]" or int(m.group(1), 16) >= 1 << 63
            if not kernel:
                if not frames or frames[-1] != "[user]":
                    frames.append("[user]")
            else:
                frames.append(sym if sym and sym != "[unknown]" else "[unknown]")
        elif not line.startswith((" ", "\t")):
            flush()
            comm, frames = line.strip(), []
    flush()
    for (c, fr), n in stacks.most_common():
        out.write(f"{n}\t{c}\t{fr}\n")


def main():
    if len(sys.argv) >= 2 and sys.argv[1] == "fold":
        fold(sys.stdin, sys.stdout)
    elif len(sys.argv) >= 4 and sys.argv[1] == "show":
        cmap = compile_map(sys.argv[3])
        rows = read_folded(sys.argv[2])
        for n, comm, frames in rows[: int(sys.argv[4]) if len(sys.argv) > 4 else 40]:
            print(f"{n:7} {step_of(comm, frames, cmap):10} {comm:14} {';'.join(frames[:8])}")
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
