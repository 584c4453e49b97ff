#!/usr/bin/env python3
"""Injects TCP resets into this host's RDS/TCP connections with a peer, as a middlebox would.

    tcp-rst.py NIC ME PEER COUNT GAP BOUND

Watches the IPv4 segments that arrive on NIC from PEER to ME on an RDS/TCP connection (port
16385 at either end) and answers COUNT of them with a forged reset: a segment from PEER to ME
with RST set and the sequence number the local socket expects next (the arriving segment's
sequence number plus its length), delivered into this host's own stack through a raw socket.
The local TCP socket is reset as if PEER had sent it; the implementation of RDS above it (C's
rds_tcp or rds_rs) must drop the connection, reconnect and resend what TCP never delivered,
and the receiver must drop what it already had.

A reset counts once its connection has left ESTABLISHED in /proc/net/tcp. A forged sequence
number can be stale (another segment arrived first): the reset is then out of the window and
ignored, and the next segment is tried. After a reset took, the next waits GAP seconds. Gives
up after BOUND seconds. Prints one line per reset and a summary; exit 0 when COUNT resets
took, 1 otherwise.
"""

import os
import select
import socket
import struct
import sys
import time

RDS_TCP_PORT = 16385
ETH_P_IP = 0x0800


def csum(data: bytes) -> int:
    if len(data) % 2:
        data += b"\0"
    s = sum(struct.unpack(f"!{len(data) // 2}H", data))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return ~s & 0xFFFF


def rst_packet(src: str, dst: str, sport: int, dport: int, seq: int) -> bytes:
    s, d = socket.inet_aton(src), socket.inet_aton(dst)
    # TCP header: ports, seq, ack 0, data offset 5 words, flags RST, window 0, csum, urg.
    tcp = struct.pack("!HHIIBBHHH", sport, dport, seq, 0, 5 << 4, 0x04, 0, 0, 0)
    pseudo = s + d + struct.pack("!BBH", 0, socket.IPPROTO_TCP, len(tcp))
    tcp = tcp[:16] + struct.pack("!H", csum(pseudo + tcp)) + tcp[18:]
    # IPv4 header; the kernel fills in the total length and the checksum (IP_HDRINCL).
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(tcp), 0, 0x4000, 64,
                     socket.IPPROTO_TCP, 0, s, d)
    return ip + tcp


def established(me: str, lport: int, peer: str, rport: int) -> bool:
    def hexaddr(a: str, p: int) -> str:
        return "%08X:%04X" % (struct.unpack("<I", socket.inet_aton(a))[0], p)
    want = (hexaddr(me, lport), hexaddr(peer, rport))
    with open("/proc/net/tcp") as f:
        for line in f.readlines()[1:]:
            fields = line.split()
            if (fields[1], fields[2]) == want and fields[3] == "01":
                return True
    return False


def main() -> int:
    if len(sys.argv) != 7:
        print(__doc__, file=sys.stderr)
        return 2
    nic, me, peer = sys.argv[1:4]
    count, gap, bound = int(sys.argv[4]), float(sys.argv[5]), float(sys.argv[6])
    # The forged segment enters through lo with PEER's source: no reverse-path filter there.
    for name in ("all", "lo"):
        with open(f"/proc/sys/net/ipv4/conf/{name}/rp_filter", "w") as f:
            f.write("0")
    sniff = socket.socket(socket.AF_PACKET, socket.SOCK_DGRAM, socket.htons(ETH_P_IP))
    sniff.bind((nic, 0))
    raw = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_RAW)
    peer_b, me_b = socket.inet_aton(peer), socket.inet_aton(me)
    start = time.monotonic()
    took = tries = 0
    quiet_until = 0.0
    while took < count:
        left = bound - (time.monotonic() - start)
        if left <= 0:
            break
        r, _, _ = select.select([sniff], [], [], min(left, 1.0))
        if not r:
            continue
        pkt, addr = sniff.recvfrom(65535)
        if addr[2] != socket.PACKET_HOST or len(pkt) < 40 or pkt[9] != socket.IPPROTO_TCP:
            continue
        if pkt[12:16] != peer_b or pkt[16:20] != me_b:
            continue
        ihl = (pkt[0] & 0xF) * 4
        tot = struct.unpack("!H", pkt[2:4])[0]
        sport, dport, seq = struct.unpack("!HHI", pkt[ihl:ihl + 8])
        doff = (pkt[ihl + 12] >> 4) * 4
        flags = pkt[ihl + 13]
        if RDS_TCP_PORT not in (sport, dport) or flags & 0x06:  # RST or SYN
            continue
        if time.monotonic() < quiet_until:
            continue
        nxt = (seq + tot - ihl - doff + (flags & 0x01)) & 0xFFFFFFFF
        raw.sendto(rst_packet(peer, me, sport, dport, nxt), (me, 0))
        tries += 1
        time.sleep(0.1)
        if not established(me, dport, peer, sport):
            took += 1
            print(f"# reset {me}:{dport} <- {peer}:{sport} seq {nxt} "
                  f"at {time.monotonic() - start:.1f}s", flush=True)
            quiet_until = time.monotonic() + gap
    print(f"# {took} of {count} resets took ({tries} forged) in "
          f"{time.monotonic() - start:.1f}s", flush=True)
    return 0 if took >= count else 1


if __name__ == "__main__":
    sys.exit(main())
