#!/usr/bin/env python3
"""Zero-copy send (MSG_ZEROCOPY) over RDS/TCP, against rds_rs or C's rds_tcp (the same cases
for both, which must agree; the last is rds_rs's own bound).

Two namespaces joined by a veth pair, made here: zc0 with 10.0.1.1, zc1 with 10.0.1.2.

- data: 40 zero-copy sends of 1 B to 256 KiB from buffers at odd offsets, from zc0 to zc1:
  every message arrives intact, and the sender's non-blocking recvmsg reports each cookie
  exactly once, in RDS_CMSG_ZCOPY_COMPLETION control messages of at most 8;
- errors: MSG_ZEROCOPY without a cookie, a cookie without MSG_ZEROCOPY, MSG_ZEROCOPY on a
  socket without SO_ZEROCOPY, a cookie shorter than 4 bytes, a zero-length zero-copy send:
  EINVAL each;
- local: a zero-copy send between two sockets of zc0 (over loopback, the socket bound to TCP):
  it arrives and its completion is reported;
- ring_full (rds_rs only): 1024 zero-copy sends whose completions are not read; the next one
  fails with ENOBUFS (counted in rs_zcopy_full), and once the completions are read sending
  works again.

    tcp-zcopy.py IMPL RDS-INFO      (IMPL: rs or c; TAP lines on stdout)
"""
import ctypes
import errno
import os
import socket
import struct
import subprocess
import sys
import threading
import time

IMPL, RDS_INFO = sys.argv[1], sys.argv[2]
AF_RDS = 21
SOL_RDS = 276
RDS_CMSG_ZCOPY_COOKIE = 12
RDS_CMSG_ZCOPY_COMPLETION = 13
SO_ZEROCOPY = 60
MSG_ZEROCOPY = 0x4000000
SO_SNDBUFFORCE = 32
SO_RCVBUFFORCE = 33
A, B = "10.0.1.1", "10.0.1.2"

LIBC = ctypes.CDLL("libc.so.6", use_errno=True)
CLONE_NEWNET = 0x40000000


def tap(ok, name, detail):
    print(f"{'ok' if ok else 'not ok'} tcp_zcopy_{IMPL}_{name} {detail}", flush=True)


def sh(cmd):
    subprocess.run(cmd, shell=True, check=True)


def rds_socket(ns, addr, port, zerocopy=True):
    """An RDS socket made in namespace `ns` (by a child, as the kernel's selftest does), bound
    to (addr, port)."""
    u0, u1 = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    pid = os.fork()
    if pid == 0:
        try:
            fd = os.open(f"/var/run/netns/{ns}", os.O_RDONLY)
            if LIBC.setns(fd, CLONE_NEWNET) != 0:
                os._exit(1)
            s = socket.socket(AF_RDS, socket.SOCK_SEQPACKET)
            socket.send_fds(u0, [b"s"], [s.fileno()])
        finally:
            os._exit(0)
    _, fds, _, _ = socket.recv_fds(u1, 1, 1)
    os.waitpid(pid, 0)
    u0.close()
    u1.close()
    s = socket.fromfd(fds[0], AF_RDS, socket.SOCK_SEQPACKET)
    os.close(fds[0])
    s.setsockopt(socket.SOL_SOCKET, SO_SNDBUFFORCE, 4 << 20)
    s.setsockopt(socket.SOL_SOCKET, SO_RCVBUFFORCE, 4 << 20)
    if zerocopy:
        s.setsockopt(socket.SOL_SOCKET, SO_ZEROCOPY, 1)
    s.bind((addr, port))
    s.settimeout(20)
    return s


def cookie_cmsg(cookie):
    return [(SOL_RDS, RDS_CMSG_ZCOPY_COOKIE, struct.pack("I", cookie))]


def zsend(s, data, dest, cookie):
    return s.sendmsg([data], cookie_cmsg(cookie), MSG_ZEROCOPY, dest)


def reap(s, want, within=20):
    """Cookies reported to `s` by non-blocking recvmsg until `want` of them came (or
    `within` seconds): the list, and whether every control message held 1 to 8."""
    got, ok = [], True
    t0 = time.time()
    while len(got) < want and time.time() - t0 < within:
        try:
            _, anc, _, _ = s.recvmsg(1, socket.CMSG_SPACE(36) * 4, socket.MSG_DONTWAIT)
        except BlockingIOError:
            time.sleep(0.01)
            continue
        for level, kind, data in anc:
            if level == SOL_RDS and kind == RDS_CMSG_ZCOPY_COMPLETION:
                num = struct.unpack_from("I", data)[0]
                ok = ok and 1 <= num <= 8
                got += list(struct.unpack_from(f"{num}I", data, 4))
    return got, ok


def pattern(i, n):
    return bytes((i * 7 + k) & 0xFF for k in range(min(n, 256))) * (n // 256 + 1)


def errno_of(fn):
    try:
        fn()
        return 0
    except OSError as e:
        return e.errno


def counter(name):
    out = subprocess.run(["ip", "netns", "exec", "zc0", RDS_INFO, "-c"], capture_output=True,
                         text=True).stdout
    for line in out.splitlines():
        f = line.split()
        if len(f) == 2 and f[0] == name:
            return int(f[1])
    return None


def case_data():
    tx = rds_socket("zc0", A, 5000)
    rx = rds_socket("zc1", B, 5001, zerocopy=False)
    sizes = [1, 100, 4095, 4096, 5000, 65536, 100001, 262144]
    n = 40
    sent = {}
    bad = []

    def receive():
        for _ in range(n):
            try:
                data, _ = rx.recvfrom(1 << 20)
            except OSError as e:
                bad.append(f"recv: {e}")
                return
            i = data[0] if data else -1
            size = sizes[i % len(sizes)] if i >= 0 else 0
            if data != bytes([i]) + pattern(i, size)[:size - 1]:
                bad.append(f"message {i}: {len(data)} bytes, not the {size} sent")

    t = threading.Thread(target=receive)
    t.start()
    for i in range(n):
        size = sizes[i % len(sizes)]
        buf = bytearray(size + 3)
        buf[3:] = bytes([i]) + pattern(i, size)[:size - 1]
        zsend(tx, memoryview(buf)[3:], (B, 5001), 1000 + i)
        sent[1000 + i] = buf  # kept untouched until its completion
    t.join(60)
    got, batches_ok = reap(tx, n)
    tx.close()
    rx.close()
    once = sorted(got) == sorted(sent) and len(set(got)) == len(got)
    ok = not bad and once and batches_ok
    tap(ok, "data", f"{n} messages, {len(got)} cookies, each once={once}, batches of 1-8="
        f"{batches_ok} {'; '.join(bad[:3])}")


def case_errors():
    tx = rds_socket("zc0", A, 5010)
    plain = rds_socket("zc0", A, 5011, zerocopy=False)
    rx = rds_socket("zc1", B, 5012, zerocopy=False)
    dest = (B, 5012)
    got = {
        "no_cookie": errno_of(lambda: tx.sendmsg([b"x"], [], MSG_ZEROCOPY, dest)),
        "cookie_without_flag": errno_of(lambda: tx.sendmsg([b"x"], cookie_cmsg(1), 0, dest)),
        "no_so_zerocopy": errno_of(lambda: zsend(plain, b"x", dest, 2)),
        "short_cookie": errno_of(lambda: tx.sendmsg(
            [b"x"], [(SOL_RDS, RDS_CMSG_ZCOPY_COOKIE, b"\0\0")], MSG_ZEROCOPY, dest)),
        "empty": errno_of(lambda: zsend(tx, b"", dest, 3)),
    }
    for s in (tx, plain, rx):
        s.close()
    ok = all(e == errno.EINVAL for e in got.values())
    tap(ok, "errors", " ".join(f"{k}={errno.errorcode.get(v, v)}" for k, v in got.items()))


def case_local():
    tx = rds_socket("zc0", A, 5020)
    rx = rds_socket("zc0", A, 5021, zerocopy=False)
    data = pattern(5, 9000)[:9000]
    zsend(tx, data, (A, 5021), 77)
    got, _ = rx.recvfrom(1 << 16)
    cookies, _ = reap(tx, 1)
    tx.close()
    rx.close()
    ok = got == data and cookies == [77]
    tap(ok, "local", f"arrived={got == data} cookies={cookies}")


def case_ring_full():
    tx = rds_socket("zc0", A, 5030)
    rx = rds_socket("zc1", B, 5031, zerocopy=False)
    n = 1024
    stop = threading.Event()

    def drain():
        rx.settimeout(0.5)
        while not stop.is_set():
            try:
                rx.recvfrom(64)
            except OSError:
                pass

    t = threading.Thread(target=drain, daemon=True)
    t.start()
    try:
        before = counter("rs_zcopy_full")
        sent = 0
        first_err = 0
        for i in range(n + 1):
            try:
                zsend(tx, b"z", (B, 5031), i)
                sent += 1
            except OSError as e:
                first_err = e.errno if e.errno is not None else str(e)
                break
        after = counter("rs_zcopy_full")
        got, _ = reap(tx, sent)
        again = errno_of(lambda: zsend(tx, b"z", (B, 5031), 5000))
        more, _ = reap(tx, 1)
    finally:
        stop.set()
        t.join(5)
        tx.close()
        rx.close()
    ok = (sent == n and first_err == errno.ENOBUFS and None not in (before, after)
          and after == before + 1 and len(got) == n and again == 0 and more == [5000])
    tap(ok, "ring_full", f"sent={sent} then {errno.errorcode.get(first_err, first_err)} "
        f"rs_zcopy_full {before}->{after} reaped={len(got)} then send={again} cookies={more}")


def main():
    sh("ip netns add zc0 && ip netns add zc1 && "
       "ip link add zv0 netns zc0 type veth peer name zv1 netns zc1 && "
       f"ip -n zc0 addr add {A}/24 dev zv0 && ip -n zc1 addr add {B}/24 dev zv1 && "
       "ip -n zc0 link set zv0 up && ip -n zc1 link set zv1 up && "
       "ip -n zc0 link set lo up && ip -n zc1 link set lo up")
    cases = [("data", case_data), ("errors", case_errors), ("local", case_local)]
    if IMPL == "rs":
        cases.append(("ring_full", case_ring_full))
    for name, fn in cases:
        try:
            fn()
        except Exception as e:  # the case's own failure, reported as such
            tap(False, name, f"{type(e).__name__}: {e}")
    sh("ip netns del zc0; ip netns del zc1")


if __name__ == "__main__":
    main()
