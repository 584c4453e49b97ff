#!/usr/bin/env python3
"""Hostile peers against rds_rs's TCP transport, from a raw TCP socket.

Two namespaces joined by a veth pair (made by the caller): net0 with 10.0.0.1, net1 with
10.0.0.2, where rds_rs listens on 16385. A raw TCP client in net0 (the smaller address, so the
listener takes its connection as the RDS connection 10.0.0.2 <- 10.0.0.1) sends what no RDS
peer would, and each case checks the outcome:

- a header announcing more than 1 MiB: the connection is dropped at once, counted in
  rs_tcp_bad_stream;
- garbage (a header whose length field is huge): dropped, counted the same way;
- a truncated header, then the end of the stream: the connection goes, nothing is delivered;
- a header announcing 1 MiB, then silence: the connection holds, until the peer goes;
- a connection that sends nothing at all, then goes.

After every case a real RDS exchange between the two namespaces (AF_RDS sockets, both ways)
must still work: the connection the hostile peer took is made again. Output: TAP lines.

    tcp-hostile.py RDS-INFO
"""
import ctypes
import os
import socket
import struct
import subprocess
import sys
import time

RDS_INFO = sys.argv[1]
PORT = 16385
A, B = "10.0.0.1", "10.0.0.2"


LIBC = ctypes.CDLL("libc.so.6", use_errno=True)
CLONE_NEWNET = 0x40000000


def in_ns(name):
    """Moves this process into network namespace `name` (Python 3.11 has no os.setns)."""
    fd = os.open(f"/var/run/netns/{name}", os.O_RDONLY)
    if LIBC.setns(fd, CLONE_NEWNET) != 0:
        raise OSError(ctypes.get_errno(), f"setns {name}")
    os.close(fd)


def counter(name):
    out = subprocess.run(["ip", "netns", "exec", "net1", RDS_INFO, "-c"], capture_output=True,
                         text=True).stdout
    for line in out.splitlines():
        f = line.split()
        if len(f) == 2 and f[0] == name:
            return int(f[1])
    return None


def header(seq, length, sport=4000, dport=4001):
    # struct rds_header: sequence, ack (be64), len (be32), sport, dport (be16), flags,
    # credit (u8), padding[4], csum (be16), exthdr[16].
    return struct.pack(">QQIHHBB4sH16s", seq, 0, length, sport, dport, 0, 0, b"\0" * 4, 0,
                       b"\0" * 16)


def raw_peer():
    """A TCP socket of net0 connected to rds_rs's listener in net1."""
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.bind((A, 0))
    s.settimeout(10)
    s.connect((B, PORT))
    return s


def closed_by_peer(s, within):
    """Whether the other end closes the connection (EOF or reset) within `within` seconds."""
    s.settimeout(within)
    try:
        while True:
            d = s.recv(65536)
            if not d:
                return True
    except ConnectionResetError:
        return True
    except socket.timeout:
        return False


def rds_exchange(tag):
    """One message each way between RDS sockets of the two namespaces (each bound in its own
    namespace), the sender retrying while the connection is made again."""
    socks = []
    # Sockets made in the namespaces by child processes (as the kernel's selftest does).
    for ns, addr in (("net0", A), ("net1", B)):
        u0, u1 = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        pid = os.fork()
        if pid == 0:
            try:
                in_ns(ns)
                s = socket.socket(socket.AF_RDS, socket.SOCK_SEQPACKET)
                socket.send_fds(u0, [b"s"], [s.fileno()])
            finally:
                os._exit(0)
        _, fds, _, _ = socket.recv_fds(u1, 1, 1)
        os.waitpid(pid, 0)
        s = socket.fromfd(fds[0], socket.AF_RDS, socket.SOCK_SEQPACKET)
        os.close(fds[0])
        s.bind((addr, 7000))
        s.settimeout(1)
        socks.append(s)
    ok = True
    for src, dst, daddr in ((socks[0], socks[1], B), (socks[1], socks[0], A)):
        msg = f"{tag} to {daddr}".encode()
        got = None
        t0 = time.time()
        while time.time() - t0 < 30 and got is None:
            try:
                src.sendto(msg, (daddr, 7000))
            except OSError:
                time.sleep(0.2)
                continue
            try:
                while True:
                    d, _ = dst.recvfrom(1024)
                    if d == msg:
                        got = d
                        break
            except socket.timeout:
                pass
        ok = ok and got is not None
    for s in socks:
        s.close()
    return ok


def tap(ok, name, detail):
    print(f"{'ok' if ok else 'not ok'} {name} {detail}", flush=True)


def main():
    def case(name, fn):
        pid = os.fork()
        if pid == 0:
            try:
                in_ns("net0")
                ok, detail = fn()
            except Exception as e:  # the case's own failure, reported as such
                ok, detail = False, f"{type(e).__name__}: {e}"
            try:
                print(f"{'ok' if ok else 'not ok'} tcp_hostile_{name} {detail}", flush=True)
            finally:
                os._exit(0)
        os.waitpid(pid, 0)
        ex = rds_exchange(name)
        tap(ex, f"tcp_hostile_{name}_rds_after", "both ways" if ex else "no exchange")

    def dropped_counted(data):
        """`data` makes rds_rs drop the connection at once, counted in rs_tcp_bad_stream."""
        before = counter("rs_tcp_bad_stream")
        s = raw_peer()
        s.sendall(data)
        closed = closed_by_peer(s, 10)
        s.close()
        after = counter("rs_tcp_bad_stream")
        ok = closed and before is not None and after == before + 1
        return ok, f"closed={closed} rs_tcp_bad_stream {before}->{after}"

    def too_long():
        return dropped_counted(header(1, (1 << 20) + 1))

    def garbage():
        return dropped_counted(b"\xff" * 4096)

    def truncated():
        s = raw_peer()
        s.sendall(header(1, 100)[:20])
        s.shutdown(socket.SHUT_WR)
        closed = closed_by_peer(s, 10)
        s.close()
        return closed, f"closed={closed}"

    def announce_and_stop():
        s = raw_peer()
        s.sendall(header(1, 1 << 20) + b"\0" * 1000)
        held = not closed_by_peer(s, 3)
        s.close()
        return held, f"held={held}"

    def silent():
        s = raw_peer()
        held = not closed_by_peer(s, 3)
        s.close()
        return held, f"held={held}"

    for name, fn in (("h_len_over_1mib", too_long), ("garbage", garbage),
                     ("truncated_header", truncated), ("announce_1mib_then_silence", announce_and_stop),
                     ("silent", silent)):
        case(name, fn)


if __name__ == "__main__":
    main()
