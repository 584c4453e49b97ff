#!/usr/bin/env python3
"""rds_rs against rds_rs over TCP in many network namespaces of one guest: a full mesh.

N namespaces (32 by default) m0..m{N-1}, each joined to the initial namespace by a veth pair
(`eth0` in the namespace, `mhI` outside) and addressed 10.1.0.(I+1)/32; the initial namespace
routes between them (IPv4 forwarding, a host route and a permanent neighbour per namespace;
each namespace reaches 10.1.0.0/24 through the gateway 10.1.1.254 on its veth, also a
permanent neighbour: no ARP anywhere). Each namespace has one AF_RDS socket bound to its
address (port 4000), so every destination is another namespace and the TCP transport
carries everything (loopback only serves destinations of the same namespace).

1. Every ordered pair exchanges a numbered stream of M messages at once (one process,
   non-blocking sockets and poll): message Q from I to J has a size and content that are a
   function of (I, J, Q): 0 B, 1-19 B, up to 1 KiB, 1-9 KiB and 64 KiB, each with a header
   (magic, source, destination, sequence number, a CRC32 of the rest) when it has room for
   one. Each receiver checks every message against the one it expects next from that
   sender: exactly once, in order, intact. Most sockets have large buffers; every eighth
   keeps the default, so that ports congest (ENOBUFS, retried) as well. Then each namespace's `RDS_INFO_CONNECTIONS` must
   list its N-1 peers, up, over `tcp`, and the counters (`RDS_INFO_COUNTERS`, global) must
   show no drop, and as many deliveries as messages.
2. Traffic again, every pair, without end; once it runs, the namespaces are deleted one by
   one while it goes on (their mount removed, as `ip netns del` does), in four ways by
   I % 4: the socket closed first (0), or the namespace deleted first and the socket kept
   sending (and receiving, 1; or no longer receiving, 3) until every namespace is deleted,
   then closed; 2: the socket stops reading, then is closed with messages unread, then the
   namespace deleted. Each namespace goes away with its listener and its connections, with
   messages in flight both ways (counted as each one's socket closes, between it and the
   namespaces still there; none counted is a failure).
   What arrives meanwhile must still be in order, once and intact (only a stream's tail
   may be lost). The namespaces must then be gone (their veth ends disappear from the
   initial namespace, within a bound).
3. A fresh pair of namespaces (the names and addresses of m0 and m1 again) exchanges a
   stream both ways, checked as in 1; then they go too.

The caller then unloads rds_rs (no connection may be left) and reads kmemleak. Output: TAP
lines on stdout (tcp_mesh_*), progress on stderr.

    tcp-mesh.py [N] [M] [BOUND] [RDS-INFO]
"""
import ctypes
import errno
import os
import random
import select
import socket
import struct
import subprocess
import sys
import time
import zlib

N = int(sys.argv[1]) if len(sys.argv) > 1 else 32
M = int(sys.argv[2]) if len(sys.argv) > 2 else 8
BOUND = float(sys.argv[3]) if len(sys.argv) > 3 else 900.0  # each phase's bound, seconds
RDS_INFO = sys.argv[4] if len(sys.argv) > 4 else "rds-info"  # for the state of a stall
PORT = 4000
AF_RDS = 21
SOL_RDS = 276
RDS_INFO_COUNTERS = 10000
RDS_INFO_CONNECTIONS = 10001
CONNECTED = 0x04
SO_SNDBUFFORCE = 32
SO_RCVBUFFORCE = 33
CLONE_NEWNET = 0x40000000
MS_BIND = 4096
MNT_DETACH = 2
LIBC = ctypes.CDLL("libc.so.6", use_errno=True)
ROOT_NS = os.open("/proc/self/ns/net", os.O_RDONLY)
T0 = time.monotonic()

# Counters that must not move in phase 1 (no message may be dropped between live sockets).
DROPS = ("recv_drop_bad_checksum", "recv_drop_no_sock", "recv_drop_dead_sock",
         "rs_recv_drop_bad_header", "rs_recv_drop_replay", "rs_tcp_bad_stream",
         "rs_tcp_accept_failed")
# Counters shown with the results.
SHOWN = ("conn_reset", "recv_drop_old_seq", "rs_send_retransmitted", "tcp_connect_raced",
         "rs_tcp_accept_refused", "rs_tcp_rx_nomem", "cong_send_error", "cong_update_queued",
         "cong_send_blocked", "send_queue_full",
         "recv_delivered")


def log(*a):
    print(f"[{time.monotonic() - T0:7.1f}s]", *a, file=sys.stderr, flush=True)


def tap(ok, name, detail):
    detail = " ".join(str(detail).split())
    print(f"{'ok' if ok else 'not ok'} tcp_mesh_{name} {detail}", flush=True)


def check(ret, what):
    if ret != 0:
        e = ctypes.get_errno()
        raise OSError(e, f"{what}: {os.strerror(e)}")


def addr_of(i):
    return f"10.1.0.{i + 1}"


def mac(side, i):
    return f"02:00:00:0{side}:00:{i:02x}"


# --- namespaces -------------------------------------------------------------------------

def ns_create(i):
    """Makes network namespace m{i} (as `ip netns add`: a new namespace kept by a bind mount
    of it on /var/run/netns/m{i}), from this process, which returns to the initial one."""
    os.makedirs("/var/run/netns", exist_ok=True)
    path = f"/var/run/netns/m{i}"
    os.close(os.open(path, os.O_RDONLY | os.O_CREAT | os.O_EXCL, 0))
    check(LIBC.unshare(CLONE_NEWNET), "unshare")
    try:
        check(LIBC.mount(b"/proc/self/ns/net", path.encode(), b"none", MS_BIND, None),
              f"mount {path}")
    finally:
        check(LIBC.setns(ROOT_NS, CLONE_NEWNET), "setns back")


def ns_delete(i):
    """`ip netns del m{i}`: the mount goes; the namespace goes with its last user."""
    path = f"/var/run/netns/m{i}"
    check(LIBC.umount2(path.encode(), MNT_DETACH), f"umount {path}")
    os.unlink(path)


def rds_socket_in(i):
    """An AF_RDS socket of namespace m{i}, bound to its address, non-blocking."""
    fd = os.open(f"/var/run/netns/m{i}", os.O_RDONLY)
    try:
        check(LIBC.setns(fd, CLONE_NEWNET), f"setns m{i}")
        try:
            s = socket.socket(AF_RDS, socket.SOCK_SEQPACKET)
        finally:
            check(LIBC.setns(ROOT_NS, CLONE_NEWNET), "setns back")
    finally:
        os.close(fd)
    if i % 8 != 7:
        # Room for a burst from every peer: with the default buffers (as namespaces 7, 15, ...
        # keep, so that congestion happens too) a receiver's port congests and clears again
        # and again, and every change is a congestion map update to each of its peers.
        s.setsockopt(socket.SOL_SOCKET, SO_RCVBUFFORCE, 4 << 20)
        s.setsockopt(socket.SOL_SOCKET, SO_SNDBUFFORCE, 1 << 20)
    s.bind((addr_of(i), PORT))
    s.setblocking(False)
    return s


def run(argv, stdin=None):
    p = subprocess.run(argv, input=stdin, capture_output=True, text=True, timeout=120)
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)}: rc={p.returncode} {p.stderr.strip()[:300]}")


def net_up(idxs):
    """The namespaces of `idxs`, their veths, addresses, routes and neighbours."""
    # The initial namespace routes between the namespaces (set before the veths exist: a new
    # device takes the defaults).
    for k, v in (("ip_forward", 1), ("conf/all/rp_filter", 0), ("conf/default/rp_filter", 0)):
        with open(f"/proc/sys/net/ipv4/{k}", "w") as f:
            f.write(f"{v}\n")
    for i in idxs:
        ns_create(i)
    root = []
    for i in idxs:
        root += [f"link add mh{i} address {mac(1, i)} type veth peer name eth0 address {mac(2, i)} netns m{i}",
                 f"link set mh{i} up",
                 f"route add {addr_of(i)}/32 dev mh{i}",
                 f"neigh replace {addr_of(i)} lladdr {mac(2, i)} dev mh{i} nud permanent"]
    run(["ip", "-batch", "-"], "\n".join(root) + "\n")
    for i in idxs:
        run(["ip", "-n", f"m{i}", "-batch", "-"],
            "link set lo up\nlink set eth0 up\n"
            f"addr add {addr_of(i)}/32 dev eth0\n"
            f"neigh replace 10.1.1.254 lladdr {mac(1, i)} dev eth0 nud permanent\n"
            "route add 10.1.0.0/24 via 10.1.1.254 dev eth0 onlink\n")


def veths_left(idxs):
    return [i for i in idxs if os.path.exists(f"/sys/class/net/mh{i}")]


# --- messages ---------------------------------------------------------------------------

BLOB = random.Random(20261129).randbytes(256 * 1024)
HDR = struct.Struct(">4sHHII")  # magic, source, destination, sequence, CRC32 of the rest


def size_of(s, d, q):
    """The size of message q from s to d: in every 8 one of 0 B, one of 1-19 B (shorter than
    the header: known only by its place in the stream), one of 1-9 KiB, the rest up to 1 KiB;
    64 KiB in one position of 64 on an eighth of the pairs (the first at 6)."""
    h = (s * 131 + d * 29 + q * 7919) & 0xFFFF
    r = q % 8
    if r == 1:
        return 0
    if r == 3:
        return h % 20
    if r == 5:
        return HDR.size + 1024 + h % 8192
    if q % 64 == 6 and (s * 31 + d * 7) % 8 == 0:
        return 65536
    return HDR.size + h % 1024


def content(magic, s, d, q):
    n = size_of(s, d, q)
    if n == 0:
        return b""
    off = (s * 7919 + d * 104729 + q * 4099) % (len(BLOB) - 65536)
    rest = BLOB[off:off + max(0, n - HDR.size)]
    return (HDR.pack(magic, s, d, q, zlib.crc32(rest)) + rest)[:n]


class Streams:
    """Numbered streams between the nodes (namespace index -> socket), every ordered pair,
    `m` messages each (None: without end). Receivers check each message against the one
    expected next from its sender."""

    def __init__(self, socks, m, magic, budget=8):
        self.socks = dict(socks)
        self.budget = budget   # messages a sender sends in one round
        self.m, self.magic = m, magic
        self.idx = sorted(self.socks)
        self.by_addr = {addr_of(i): i for i in self.idx}
        self.sent = {(s, d): 0 for s in self.idx for d in self.idx if s != d}
        self.got = dict.fromkeys(self.sent, 0)
        self.rr = dict.fromkeys(self.idx, -1)
        self.errors = []
        self.bad = {"lost": 0, "duplicate": 0, "corrupt": 0, "unknown": 0}
        self.send_errors = {}
        self.sending = set(self.idx)   # nodes that send
        self.targets = set(self.idx)   # nodes sent to
        self.reading = set(self.idx)   # nodes that read
        self.received = 0
        self.bytes = 0

    def total(self):
        return len(self.sent) * self.m

    def complete(self):
        return self.received == self.total()

    def error(self, what):
        if len(self.errors) < 20:
            self.errors.append(what)

    def send_some(self, s):
        """Up to `budget` messages from s, round robin over its destinations; True if any."""
        sock = self.socks[s]
        budget = self.budget
        dsts = [d for d in self.idx if d != s and d in self.targets
                and (self.m is None or self.sent[(s, d)] < self.m)]
        if not dsts:
            return False
        last = self.rr[s]  # where the last round of s stopped: this one goes on from there
        did = False
        for d in [d for d in dsts if d > last] + [d for d in dsts if d <= last]:
            if budget == 0:
                break
            q = self.sent[(s, d)]
            try:
                sock.sendto(content(self.magic, s, d, q), (addr_of(d), PORT))
            except OSError as e:
                if e.errno == errno.ENOBUFS:      # d's port congested: the next destination
                    continue
                if e.errno == errno.EAGAIN:       # send buffer full
                    break
                self.send_errors[e.errno] = self.send_errors.get(e.errno, 0) + 1
                break
            self.sent[(s, d)] = q + 1
            self.rr[s] = d
            budget -= 1
            did = True
        return did

    def recv_some(self, d, most=256):
        """Reads what d has (at most `most`), checking each message; the number read."""
        sock = self.socks[d]
        n = 0
        while n < most:
            try:
                data, (a, port) = sock.recvfrom(65536 + 64, socket.MSG_DONTWAIT)
            except BlockingIOError:
                break
            except OSError as e:
                self.error(f"recv m{d}: {e}")
                break
            n += 1
            s = self.by_addr.get(a)
            if s is None or port != PORT or s == d:
                self.bad["unknown"] += 1
                self.error(f"m{d}: {len(data)} B from unknown {a}:{port}")
                continue
            q = self.got[(s, d)]
            if (self.m is None or q < self.m) and data == content(self.magic, s, d, q):
                self.got[(s, d)] = q + 1
                self.received += 1
                self.bytes += len(data)
                continue
            # Not the next one: which one is it?
            if len(data) >= HDR.size:
                magic, hs, hd, hq, crc = HDR.unpack_from(data)
                intact = (magic == self.magic and (hs, hd) == (s, d)
                          and data == content(self.magic, s, d, hq))
                if intact and hq < q:
                    self.bad["duplicate"] += 1
                    self.error(f"m{s}->m{d}: #{hq} again (expected #{q})")
                    continue
                if intact and hq > q:
                    self.bad["lost"] += hq - q
                    self.error(f"m{s}->m{d}: #{hq} arrived, #{q}..#{hq - 1} missing")
                    self.got[(s, d)] = hq + 1
                    self.received += 1
                    continue
                self.bad["corrupt"] += 1
                self.error(f"m{s}->m{d}: {len(data)} B not #{q} (header {magic!r} {hs} {hd} "
                           f"#{hq}, crc ok={zlib.crc32(data[HDR.size:]) == crc})")
                continue
            self.bad["corrupt"] += 1
            self.error(f"m{s}->m{d}: {len(data)} B where #{q} "
                       f"({size_of(s, d, q) if self.m is None or q < self.m else 'past the end'}"
                       f" B) was expected")
        return n

    def step(self, wait_ms=50):
        """One round: every sender sends some, every reader reads what it has. Waits up to
        `wait_ms` in poll when nothing moved."""
        moved = False
        for s in self.idx:
            if s in self.sending and self.send_some(s):
                moved = True
        for d in self.idx:
            if d in self.reading and self.recv_some(d):
                moved = True
        if not moved:
            p = select.poll()
            for d in self.reading:
                p.register(self.socks[d].fileno(), select.POLLIN)
            p.poll(wait_ms)
        return moved

    def ok(self):
        return not any(self.bad.values()) and not self.errors and not self.send_errors

    def summary(self):
        incomplete = [(s, d, self.got[(s, d)]) for (s, d) in self.got
                      if self.m is not None and self.got[(s, d)] < self.m]
        out = (f"{self.received}/{self.total() if self.m is not None else '-'} messages "
               f"{self.bytes} B; lost={self.bad['lost']} duplicate={self.bad['duplicate']} "
               f"corrupt={self.bad['corrupt']} unknown={self.bad['unknown']}")
        if self.send_errors:
            out += f"; send errors {{{', '.join(f'{errno.errorcode.get(k, k)}: {v}' for k, v in self.send_errors.items())}}}"
        if incomplete:
            out += (f"; {len(incomplete)} streams incomplete, e.g. "
                    + ", ".join(f"m{s}->m{d} {g}/{self.m} sent {self.sent[(s, d)]}"
                                for s, d, g in incomplete[:6]))
        if self.errors:
            out += "; first: " + " | ".join(self.errors[:6])
        return out


def run_streams(st, bound):
    """Runs the streams until all arrived or `bound` seconds passed (or too many errors).
    After 30 s without a message the state of the first namespaces is written down
    (OUT/mesh-stall.txt), once."""
    t = time.monotonic()
    last = moved = t
    seen = 0
    stalled = False
    while not st.complete() and time.monotonic() - t < bound and len(st.errors) < 20:
        st.step()
        now = time.monotonic()
        if st.received != seen:
            seen, moved = st.received, now
        elif now - moved > 30 and not stalled:
            stalled = True
            log("no progress for 30 s: state in mesh-stall.txt")
            stall_dump(list(st.socks)[:2])
        if now - last > 10:
            last = now
            log(f"{st.received}/{st.total()} received, {sum(st.sent.values())} sent, "
                f"send errors {st.send_errors}")
    return time.monotonic() - t


def stall_dump(idxs):
    with open("mesh-stall.txt", "a") as f:
        for argv in [["ip", "route"], ["ip", "-s", "link"], ["ip", "neigh"]]:
            f.write(f"== {' '.join(argv)}\n")
            f.flush()
            subprocess.run(argv, stdout=f, stderr=f, timeout=60)
        for i in idxs:
            for argv in [["ip", "addr"], ["ip", "route"], ["ip", "neigh"], ["ip", "-s", "link"],
                         ["ss", "-tnie"], [RDS_INFO, "-c", "-C", "-s", "-T", "-k"]]:
                f.write(f"== m{i}: {' '.join(argv)}\n")
                f.flush()
                subprocess.run(["ip", "netns", "exec", f"m{i}"] + argv, stdout=f, stderr=f,
                               timeout=60)


# --- info ---------------------------------------------------------------------------------

def info(sock, opt):
    """An `RDS_INFO_*` table of the socket's namespace (by ctypes: Python's getsockopt takes
    at most 1024 bytes); the buffer grown to the length the kernel asks for."""
    size = 1 << 16
    for _ in range(8):
        buf = ctypes.create_string_buffer(size)
        ln = ctypes.c_uint32(size)
        if LIBC.getsockopt(sock.fileno(), SOL_RDS, opt, buf, ctypes.byref(ln)) >= 0:
            return buf.raw[:ln.value]
        e = ctypes.get_errno()
        if e != errno.ENOSPC:
            raise OSError(e, f"getsockopt RDS_INFO {opt}: {os.strerror(e)}")
        size = max(ln.value, size * 2)
    raise OSError(errno.ENOSPC, "RDS_INFO table keeps growing")


def counters(sock):
    raw = info(sock, RDS_INFO_COUNTERS)
    out = {}
    for k in range(0, len(raw) - 39, 40):
        name, value = struct.unpack_from("<32sQ", raw, k)
        out[name.split(b"\0")[0].decode()] = value
    return out


def connections(sock):
    """[(laddr, faddr, transport, flags)] of the socket's namespace (struct
    rds_info_connection, 42 bytes)."""
    raw = info(sock, RDS_INFO_CONNECTIONS)
    out = []
    for k in range(0, len(raw) - 41, 42):
        _tx, _rx, la, fa, tr, flags, _tos = struct.unpack_from("<QQ4s4s16sBB", raw, k)
        out.append((socket.inet_ntoa(la), socket.inet_ntoa(fa), tr.split(b"\0")[0].decode(),
                    flags))
    return out


def mesh_connections_ok(socks):
    bad = []
    for i, s in socks.items():
        conns = connections(s)
        peers = {fa for la, fa, tr, fl in conns if la == addr_of(i) and tr == "tcp" and fl & CONNECTED}
        want = {addr_of(j) for j in socks if j != i}
        if not want <= peers:
            bad.append(f"m{i}: {len(want - peers)} peers not up over tcp "
                       f"(listed: {[(fa, tr, fl) for la, fa, tr, fl in conns][:4]})")
    return bad


def delta(before, after, names):
    return {n: after.get(n, 0) - before.get(n, 0) for n in names}


def main():
    log(f"{N} namespaces, {M} messages per ordered pair, bound {BOUND:.0f}s")
    root_sock = socket.socket(AF_RDS, socket.SOCK_SEQPACKET)  # for the (global) counters
    idx = list(range(N))
    try:
        t = time.monotonic()
        net_up(idx)
        socks = {i: rds_socket_in(i) for i in idx}
        tap(True, "setup", f"{N} namespaces, {N * (N - 1)} ordered pairs, in {time.monotonic() - t:.1f}s")
    except Exception as e:  # noqa: BLE001: reported as the failure it is
        tap(False, "setup", f"{type(e).__name__}: {e}")
        return 1
    log("set up")

    # 1. The mesh: every ordered pair, M messages, at once.
    c0 = counters(root_sock)
    st = Streams(socks, M, b"MESH")
    secs = run_streams(st, BOUND)
    c1 = counters(root_sock)
    log(f"phase 1: {secs:.1f}s {st.summary()}")
    tap(st.complete(), "all_delivered",
        f"{st.received}/{st.total()} in {secs:.1f}s (bound {BOUND:.0f}s): {st.summary()}")
    tap(st.ok() and st.received > 0, "exactly_once_in_order", st.summary())
    bad = mesh_connections_ok(socks)
    tap(not bad, "connections_tcp", f"each namespace's {N - 1} peers up over tcp" if not bad
        else "; ".join(bad[:4]))
    drops = delta(c0, c1, DROPS)
    shown = delta(c0, c1, SHOWN)
    tap(st.received > 0 and not any(drops.values()) and shown["recv_delivered"] == st.received,
        "counters",
        f"drops {drops}; {shown}; expected recv_delivered={st.received}")

    # 2. Traffic again, and every namespace deleted while it flows.
    st2 = Streams(socks, None, b"MSH2", budget=2)
    t = time.monotonic()
    # Running: until every pair has had a message through, at most a quarter of the bound.
    while (min(st2.got.values()) < 1 and time.monotonic() - t < BOUND / 4
           and len(st2.errors) < 20):
        st2.step()
    warm = time.monotonic() - t
    log(f"phase 2 running after {warm:.1f}s: {st2.received} received")
    in_flight = 0
    alive = set(idx)   # sockets open: their namespaces are there
    open_after = []
    deleted = 0
    del_errors = []

    def close(i):
        """Closes i's socket, its namespace's last user once its mount is gone: counts what is
        in flight between i and the namespaces still there, sent and not (yet) received."""
        nonlocal in_flight
        in_flight += sum(st2.sent[(s, d)] - st2.got[(s, d)] for (s, d) in st2.sent
                         if (s == i and d in alive) or (d == i and s in alive))
        alive.discard(i)
        st2.sending.discard(i)
        st2.reading.discard(i)
        st2.targets.discard(i)
        st2.socks[i].close()

    for i in idx:
        try:
            mode = i % 4
            if mode == 0:      # the socket closed, then the namespace deleted
                close(i)
                ns_delete(i)
            elif mode == 2:    # reading stops; closed with messages unread; then deleted
                st2.reading.discard(i)
                st2.step(wait_ms=10)
                close(i)
                ns_delete(i)
            else:              # deleted while its socket sends on (1: and reads; 3: not)
                ns_delete(i)
                if mode == 3:
                    st2.reading.discard(i)
                open_after.append(i)
            deleted += 1
        except Exception as e:  # noqa: BLE001: reported below
            del_errors.append(f"m{i}: {type(e).__name__}: {e}")
        st2.step(wait_ms=10)  # traffic goes on between deletions
    for i in open_after:
        close(i)
        for _ in range(2):
            st2.step(wait_ms=10)
    secs2 = time.monotonic() - t
    c2 = counters(root_sock)
    log(f"phase 2: deleted {deleted}, {in_flight} in flight, {st2.summary()}")
    tap(deleted == N and not del_errors and in_flight > 0, "netns_deleted_in_flight",
        f"{deleted}/{N} deleted in {secs2 - warm:.1f}s with traffic running ({st2.received} "
        f"messages through before and meanwhile, {in_flight} sent and not yet received as "
        f"each namespace went) {'; '.join(del_errors[:3])}")
    # Only a stream's tail may be lost: what arrived is in order, once, intact.
    # (sendto reports no network error for a peer that went: a message waits on its connection)
    tap(st2.received > 0 and st2.ok(), "in_flight_arrivals_in_order", st2.summary())
    t = time.monotonic()
    while veths_left(idx) and time.monotonic() - t < BOUND / 4:
        time.sleep(0.5)
    left = veths_left(idx)
    tap(not left, "netns_gone",
        f"every namespace gone {time.monotonic() - t:.1f}s after the last socket closed" if not left
        else f"still there after {BOUND / 4:.0f}s: {['m%d' % i for i in left]} (their veth ends remain)")
    log("phase 2 done, counters " + str(delta(c1, c2, DROPS + SHOWN)))

    # 3. A fresh pair of namespaces, the addresses of m0 and m1 again.
    pair = [0, 1]
    try:
        net_up(pair)
        psocks = {i: rds_socket_in(i) for i in pair}
        st3 = Streams(psocks, 8 * M, b"MSH3")
        secs3 = run_streams(st3, BOUND / 2)
        bad = mesh_connections_ok(psocks)
        tap(st3.complete() and st3.ok() and not bad, "fresh_pair",
            f"{secs3:.1f}s {st3.summary()} {'; '.join(bad)}")
        for s in psocks.values():
            s.close()
        for i in pair:
            ns_delete(i)
        t = time.monotonic()
        while veths_left(pair) and time.monotonic() - t < BOUND / 4:
            time.sleep(0.5)
        tap(not veths_left(pair), "fresh_pair_gone", f"{time.monotonic() - t:.1f}s")
    except Exception as e:  # noqa: BLE001
        tap(False, "fresh_pair", f"{type(e).__name__}: {e}")
    c3 = counters(root_sock)
    log("all counters since the start: " + str(delta(c0, c3, DROPS + SHOWN)))
    root_sock.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
