//! Faults (rds_rs only: the test hooks of its test build, `/sys/kernel/debug/rds_rs`): frames
//! whose header fails validation, the retransmit list across a connection reset, and RDMA
//! operations in flight while connections reset. Results go to the unpaired file
//! `faults-rs.tap`.
//!
//! - Header validation: frames written into the `inject` hook arrive on an existing loopback
//!   connection as if they came off the wire. Each corruption (checksum, `h_len` above 1 MiB,
//!   `h_len` not the payload's length, congestion-map frames of the wrong shape, a known
//!   extension header running past the end of `h_exthdr`) is refused with `EBADMSG`, counted
//!   once under its counter, delivers nothing, and drops the connection, which reconnects and
//!   carries ordinary traffic again. Controls: frames with a correct checksum, with checksum 0,
//!   with an `RDMA_DEST` extension and with unknown extension types are delivered, from the
//!   address of the connection's local end and the port in the header.
//! - Retransmission: with acknowledgements held (`loop_ack_hold`), `RDS_INFO_CONNECTIONS`,
//!   `RDS_INFO_RETRANS_MESSAGES` and their `RDS6_` forms record by record; a reset (`reset`)
//!   sends the unacknowledged messages again (`RDS_FLAG_RETRANSMITTED`), the receiver drops the
//!   duplicates by sequence number; once acknowledgements flow, the list is empty.
//! - RDMA at resets: with connections reset every few frames (`loop_reset_every`, and once more
//!   with delivery from softirq context and a small ring, `loop_softirq` / `loop_ring`), every
//!   RDMA operation is reported exactly once, `SUCCESS` (its data in place, its message
//!   delivered) or `DROPPED` (its target untouched, its message never delivered), the barrier
//!   passes every operation, and plain messages sent meanwhile arrive exactly once, in order.
//!
//! Every knob changed is set back to 0 when its guard ([`Knob`]) goes, also on failure.
//!
//! Ports 4930-4969 on 127.0.0.1, 127.0.0.2, 127.0.0.3 and ::1.

use crate::rdma::{big, rdma_op, recv_notes, Op, LO};
use crate::util::{
    addr_obs, arrival_bound, bound, err_name, in_new_netns, ip_obs, nothing_within, pattern,
    res_obs, v4, v6_lo, wait_msg_for, Counters,
};
use crate::Report;
use librds::info::{
    ConnectionInfo, MessageInfo, RDS6_INFO_RETRANS_MESSAGES, RDS6_INFO_SEND_MESSAGES,
    RDS_INFO_RETRANS_MESSAGES, RDS_INFO_SEND_MESSAGES,
};
use librds::rdma::{RDS_RDMA_DROPPED, RDS_RDMA_NOTIFY_ME, RDS_RDMA_READWRITE, RDS_RDMA_SUCCESS};
use librds::{RdmaMem, RdsIovec, RdsSocket};
use rds_proto::{
    make_cookie, Ext, Header, Stat, CONG_MAP_BYTES, EXTHDR_RDMA, EXTHDR_VERSION, FLAG_CONG_BITMAP,
    HEADER_LEN, MAX_FRAME_LEN,
};
use std::collections::BTreeMap;
use std::io::{self, Write};
use std::net::IpAddr;
use std::time::{Duration, Instant};

/// The test hooks of rds_rs's test build.
pub(crate) const DEBUGFS: &str = "/sys/kernel/debug/rds_rs";

/// Writes `v` to the test hook `name` (one `write`, to an existing file).
pub(crate) fn write_hook(name: &str, v: &[u8]) -> io::Result<()> {
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .open(format!("{DEBUGFS}/{name}"))?;
    let n = f.write(v)?;
    if n != v.len() {
        return Err(io::Error::other(format!("short write {n} of {}", v.len())));
    }
    Ok(())
}

/// A knob of the test hooks set to a value while this lives; set back to 0 when dropped.
pub(crate) struct Knob(&'static str);

impl Knob {
    /// Sets knob `name` to `v`.
    pub(crate) fn set(name: &'static str, v: u32) -> Result<Self, String> {
        write_hook(name, v.to_string().as_bytes())
            .map_err(|e| format!("writing {DEBUGFS}/{name}: {e}"))?;
        Ok(Self(name))
    }
}

impl Drop for Knob {
    fn drop(&mut self) {
        if let Err(e) = write_hook(self.0, b"0") {
            eprintln!("rds-tests: could not reset {DEBUGFS}/{}: {e}", self.0);
        }
    }
}

/// The errno name of a result, `EBADMSG` included (which `crate::errno_name` does not know).
fn obs<T>(r: &io::Result<T>) -> String {
    match r {
        Err(e) if e.raw_os_error() == Some(libc::EBADMSG) => "EBADMSG".into(),
        _ => res_obs(r),
    }
}

/// An IPv4 address as the 16-byte IPv4-mapped IPv6 form the hooks take.
fn mapped(a: [u8; 4]) -> [u8; 16] {
    let mut m = [0u8; 16];
    m[10] = 0xff;
    m[11] = 0xff;
    m[12..].copy_from_slice(&a);
    m
}

/// Writes a frame into the `inject` hook: it arrives on the loopback connection (`laddr`,
/// `faddr`, TOS 0) of the initial namespace, for the socket bound to `faddr` and the header's
/// `h_dport`.
fn inject(
    laddr: [u8; 4],
    faddr: [u8; 4],
    hdr: &[u8; HEADER_LEN],
    payload: &[u8],
) -> io::Result<()> {
    let mut buf = Vec::with_capacity(33 + HEADER_LEN + payload.len());
    buf.extend_from_slice(&mapped(laddr));
    buf.extend_from_slice(&mapped(faddr));
    buf.push(0);
    buf.extend_from_slice(hdr);
    buf.extend_from_slice(payload);
    write_hook("inject", &buf)
}

/// One part of the suite.
type Part = fn(&mut Report) -> Result<(), String>;

/// Builds an injected frame (header and payload) for a sequence number.
type Make = Box<dyn Fn(u64) -> (Header, Vec<u8>)>;

pub(crate) fn run(r: &mut Report) -> Result<(), String> {
    let present: Vec<&str> = [
        "inject",
        "reset",
        "loop_ack_hold",
        "loop_reset_every",
        "loop_softirq",
        "loop_ring",
    ]
    .into_iter()
    .filter(|f| !std::path::Path::new(&format!("{DEBUGFS}/{f}")).exists())
    .collect();
    r.expect(
        "faults_test_hooks",
        &if present.is_empty() {
            "present".to_string()
        } else {
            format!("missing={}", present.join(","))
        },
        "present",
    );
    // Whatever an earlier run left, nothing is held or reset.
    for k in [
        "loop_hold",
        "loop_ack_hold",
        "loop_reset_every",
        "loop_softirq",
        "loop_ring",
    ] {
        let _ = write_hook(k, b"0");
    }
    let parts: [(&str, Part); 5] = [
        ("faults_reap", reaping),
        ("faults_inject", inject_frames),
        ("faults_retrans", retrans_lists),
        ("faults_rdma_resets", |r| {
            rdma_at_resets(r, "faults_rdma_resets", false, 4950)
        }),
        ("faults_rdma_softirq_resets", |r| {
            rdma_at_resets(r, "faults_rdma_softirq_resets", true, 4960)
        }),
    ];
    for (name, part) in parts {
        if let Err(e) = part(r) {
            r.check(name, "none", Err(e));
        }
    }
    Ok(())
}

// --- header validation -------------------------------------------------------------------

/// The addresses of the injection connection: `PEER` sends to `TARGET`, so the connection
/// (`PEER`, `TARGET`) exists; frames injected on it go to the socket bound at `TARGET`.
const PEER: [u8; 4] = [127, 0, 0, 3];
const TARGET: [u8; 4] = LO;
const PEER_PORT: u16 = 4930;
const TARGET_PORT: u16 = 4931;
/// The source port injected frames name (bound by nobody: the receiver learns it from the
/// header alone).
const INJ_SPORT: u16 = 4939;

/// The next sequence number the connection (`laddr`, `faddr`) expects, from
/// `RDS_INFO_CONNECTIONS`.
fn next_rx(s: &RdsSocket, laddr: [u8; 4], faddr: [u8; 4]) -> Result<u64, String> {
    let l = s
        .connections(false)
        .map_err(|e| format!("RDS_INFO_CONNECTIONS: {}", err_name(&e)))?;
    l.iter()
        .find(|c| {
            c.laddr == IpAddr::from(laddr) && c.faddr == IpAddr::from(faddr) && c.tos == Some(0)
        })
        .map(|c| c.next_rx_seq)
        .ok_or_else(|| "no injection connection".to_string())
}

/// An ordinary data header from [`INJ_SPORT`] to [`TARGET_PORT`], without a checksum.
fn data_header(seq: u64, len: usize) -> Header {
    Header {
        sequence: seq,
        ack: 0,
        len: len as u32,
        sport: INJ_SPORT,
        dport: TARGET_PORT,
        flags: 0,
        credit: 0,
        csum: 0,
        exthdr: [0; 16],
    }
}

/// The counters a bad frame may move: `csum=+N header=+N`.
fn bad_counters(after: &Counters, before: &Counters) -> String {
    format!(
        "csum={} header={}",
        after.delta_obs(before, Stat::RecvDropBadChecksum.name()),
        after.delta_obs(before, Stat::RsRecvDropBadHeader.name())
    )
}

/// Receives one message on `t` within [`arrival_bound`]: `got=PAYLOAD from=ADDR` (and the
/// `RDMA_DEST` cookie when there is one), or what went wrong.
fn arrival(t: &RdsSocket) -> String {
    if !wait_msg_for(t, arrival_bound()) {
        return "nothing".into();
    }
    let mut buf = vec![0u8; 1 << 16];
    match t.recv_msg(&mut buf, 256, libc::MSG_DONTWAIT) {
        Ok(m) => {
            let from = m.from.map_or_else(|| "none".to_string(), |a| addr_obs(&a));
            let mut o = format!(
                "got={} from={from}",
                String::from_utf8_lossy(&buf[..m.len.min(buf.len())])
            );
            if let Some(c) = m.cmsgs.iter().find_map(|c| c.rdma_dest()) {
                o.push_str(&format!(" cookie={c:#x}"));
            }
            o
        }
        Err(e) => err_name(&e),
    }
}

fn inject_frames(r: &mut Report) -> Result<(), String> {
    let peer_addr = v4(PEER, PEER_PORT);
    let target_addr = v4(TARGET, TARGET_PORT);
    let peer = bound(peer_addr)?;
    let target = bound(target_addr)?;
    // The connection (PEER, TARGET) comes up with a first message.
    let first = res_obs(&peer.send_to(b"prime", target_addr));
    r.expect(
        "faults_inject_connection",
        &format!("{first} {}", arrival(&target)),
        "OK got=prime from=127.0.0.3/4930",
    );
    let from = format!("{}/{INJ_SPORT}", ip_obs(&IpAddr::from(PEER)));

    // Refusals that are not about the frame.
    let h = data_header(1, 1).encode();
    r.expect(
        "faults_inject_no_connection",
        &obs(&inject([127, 0, 0, 9], TARGET, &h, b"x")),
        "ENOENT",
    );
    r.expect(
        "faults_inject_too_short",
        &obs(&write_hook("inject", &[0u8; 40])),
        "EINVAL",
    );

    // Controls: frames that are delivered.
    let good: Vec<(&str, Make, String)> = vec![
        (
            "faults_inject_good_checksum",
            Box::new(|seq| (data_header(seq, 9).with_checksum(), b"good-csum".to_vec())),
            format!("OK got=good-csum from={from}"),
        ),
        (
            "faults_inject_csum_0",
            Box::new(|seq| (data_header(seq, 6), b"csum-0".to_vec())),
            format!("OK got=csum-0 from={from}"),
        ),
        (
            "faults_inject_rdma_dest_ext",
            Box::new(|seq| {
                let mut h = data_header(seq, 4);
                let _ = h.add_ext(Ext::RdmaDest {
                    rkey: 0x1234,
                    offset: 0x56,
                });
                (h.with_checksum(), b"dest".to_vec())
            }),
            format!(
                "OK got=dest from={from} cookie={:#x}",
                make_cookie(0x1234, 0x56)
            ),
        ),
        (
            // Type 4 is unknown to C too and has no payload: the walk goes on over it (to a
            // well-formed version header).
            "faults_inject_ext_type_4",
            Box::new(|seq| {
                let mut h = data_header(seq, 4);
                h.exthdr[0] = 4;
                h.exthdr[1] = EXTHDR_VERSION;
                h.exthdr[2..6].copy_from_slice(&3u32.to_be_bytes());
                (h.with_checksum(), b"ext4".to_vec())
            }),
            format!("OK got=ext4 from={from}"),
        ),
        (
            "faults_inject_ext_type_9",
            Box::new(|seq| {
                let mut h = data_header(seq, 4);
                h.exthdr[0] = 9;
                h.exthdr[1] = 9;
                (h.with_checksum(), b"ext9".to_vec())
            }),
            format!("OK got=ext9 from={from}"),
        ),
        (
            // 16 and above end the walk: what follows is never looked at (here an RDMA
            // header that would run past the end).
            "faults_inject_ext_type_200",
            Box::new(|seq| {
                let mut h = data_header(seq, 6);
                h.exthdr[0] = 200;
                h.exthdr[1..15].fill(0xa5);
                h.exthdr[15] = EXTHDR_RDMA;
                (h.with_checksum(), b"ext200".to_vec())
            }),
            format!("OK got=ext200 from={from}"),
        ),
    ];
    for (name, make, want) in &good {
        let seq = next_rx(&peer, PEER, TARGET)?;
        let (h, payload) = make(seq);
        let before = Counters::take(&peer)?;
        let res = obs(&inject(PEER, TARGET, &h.encode(), &payload));
        let got = arrival(&target);
        let after = Counters::take(&peer)?;
        let extra = if nothing_within(&target, Duration::from_millis(200))? {
            ""
        } else {
            " +more"
        };
        r.expect(
            name,
            &format!("{res} {got}{extra} {}", bad_counters(&after, &before)),
            &format!("{want} csum=+0 header=+0"),
        );
    }

    // Corruptions: refused, counted once, nothing delivered, the connection reset; then
    // ordinary traffic flows again.
    let bad_csum = |seq| {
        let mut h = data_header(seq, 8).with_checksum();
        h.csum = h.csum.wrapping_add(1).max(1);
        (h, b"bad-csum".to_vec())
    };
    let big_len = MAX_FRAME_LEN as usize + 1;
    let bad: Vec<(&str, Make, &str)> = vec![
        (
            "faults_inject_bad_checksum",
            Box::new(bad_csum),
            "csum=+1 header=+0",
        ),
        (
            "faults_inject_len_above_1m",
            Box::new(move |seq| {
                (
                    data_header(seq, big_len).with_checksum(),
                    vec![0x5a; big_len],
                )
            }),
            "csum=+0 header=+1",
        ),
        (
            "faults_inject_len_above_payload",
            Box::new(|seq| (data_header(seq, 10).with_checksum(), b"only-nine".to_vec())),
            "csum=+0 header=+1",
        ),
        (
            "faults_inject_len_below_payload",
            Box::new(|seq| (data_header(seq, 3).with_checksum(), b"four".to_vec())),
            "csum=+0 header=+1",
        ),
        (
            "faults_inject_cong_map_ports",
            Box::new(|seq| {
                let mut h = data_header(seq, CONG_MAP_BYTES);
                h.flags = FLAG_CONG_BITMAP;
                h.dport = 0;
                (h.with_checksum(), vec![0; CONG_MAP_BYTES])
            }),
            "csum=+0 header=+1",
        ),
        (
            "faults_inject_cong_map_dport",
            Box::new(|seq| {
                let mut h = data_header(seq, CONG_MAP_BYTES);
                h.flags = FLAG_CONG_BITMAP;
                h.sport = 0;
                (h.with_checksum(), vec![0; CONG_MAP_BYTES])
            }),
            "csum=+0 header=+1",
        ),
        (
            "faults_inject_cong_map_length",
            Box::new(|seq| {
                let mut h = data_header(seq, 100);
                h.flags = FLAG_CONG_BITMAP;
                h.sport = 0;
                h.dport = 0;
                (h.with_checksum(), vec![0; 100])
            }),
            "csum=+0 header=+1",
        ),
        (
            // Three version headers (15 bytes), then an RDMA header with no room for its
            // 4-byte r_key.
            "faults_inject_rdma_ext_truncated",
            Box::new(|seq| {
                let mut h = data_header(seq, 5);
                for i in 0..3 {
                    h.exthdr[i * 5] = EXTHDR_VERSION;
                    h.exthdr[i * 5 + 1..i * 5 + 5].copy_from_slice(&3u32.to_be_bytes());
                }
                h.exthdr[15] = EXTHDR_RDMA;
                (h.with_checksum(), b"trunc".to_vec())
            }),
            "csum=+0 header=+1",
        ),
        (
            // Unknown types 4..15 carry nothing and do not end the walk: the RDMA header
            // after them is still too long for the area.
            "faults_inject_ext_4_then_truncated_rdma",
            Box::new(|seq| {
                let mut h = data_header(seq, 5);
                h.exthdr[..15].fill(4);
                h.exthdr[15] = EXTHDR_RDMA;
                (h.with_checksum(), b"trunc".to_vec())
            }),
            "csum=+0 header=+1",
        ),
    ];
    for (i, (name, make, counters)) in bad.iter().enumerate() {
        let seq = next_rx(&peer, PEER, TARGET)?;
        let (h, payload) = make(seq);
        let before = Counters::take(&peer)?;
        let res = obs(&inject(PEER, TARGET, &h.encode(), &payload));
        let nothing = if nothing_within(&target, Duration::from_millis(300))? {
            "nothing"
        } else {
            "delivered"
        };
        let mid = Counters::take(&peer)?;
        // The connection was dropped: it reconnects and carries the next message.
        let after_msg = format!("after{i}");
        let sent = res_obs(&peer.send_to(after_msg.as_bytes(), target_addr));
        let got = arrival(&target);
        let after = Counters::take(&peer)?;
        r.expect(
            name,
            &format!(
                "{res} {} {nothing} send={sent} {got} conn_reset={}",
                bad_counters(&mid, &before),
                after.delta_obs(&before, Stat::ConnReset.name())
            ),
            &format!(
                "EBADMSG {counters} nothing send=OK got={after_msg} from=127.0.0.3/4930 conn_reset=+1"
            ),
        );
    }
    Ok(())
}

// --- the retransmit list across a reset ----------------------------------------------------

/// A message record: `laddr/lport>faddr/fport len=N seq=N flags=N tos=N`.
fn msg_obs(m: &MessageInfo) -> String {
    format!(
        "{}/{}>{}/{} len={} seq={} flags={} tos={}",
        ip_obs(&m.laddr),
        m.lport,
        ip_obs(&m.faddr),
        m.fport,
        m.len,
        m.seq,
        m.flags,
        m.tos
    )
}

/// A message list, grouped by connection in address order, each in the kernel's order.
fn msgs_obs(s: &RdsSocket, opt: i32) -> String {
    match s.messages(opt) {
        Ok(mut l) => {
            if l.is_empty() {
                return "empty".into();
            }
            l.sort_by_key(|m| (m.laddr, m.faddr));
            l.iter().map(msg_obs).collect::<Vec<_>>().join(",")
        }
        Err(e) => err_name(&e),
    }
}

/// A connection record: `laddr>faddr tx=N rx=N flags=N [tos=N] transport`.
fn conn_obs(c: &ConnectionInfo) -> String {
    let tos = c.tos.map_or_else(String::new, |t| format!(" tos={t}"));
    format!(
        "{}>{} tx={} rx={} flags={}{tos} {}",
        ip_obs(&c.laddr),
        ip_obs(&c.faddr),
        c.next_tx_seq,
        c.next_rx_seq,
        c.flags,
        c.transport
    )
}

fn conns_obs(s: &RdsSocket, v6: bool) -> String {
    match s.connections(v6) {
        Ok(mut l) => {
            if l.is_empty() {
                return "empty".into();
            }
            l.sort_by_key(|c| (c.laddr, c.faddr));
            l.iter().map(conn_obs).collect::<Vec<_>>().join(",")
        }
        Err(e) => err_name(&e),
    }
}

/// Receives up to `n` messages on `s` (each within [`arrival_bound`]), then looks 200 ms for more:
/// their payloads, `,none` for one missing, `,+more` for extras.
fn payloads(s: &RdsSocket, n: usize) -> String {
    let mut v = Vec::new();
    let mut buf = vec![0u8; 1 << 16];
    for _ in 0..n {
        if !wait_msg_for(s, arrival_bound()) {
            v.push("none".to_string());
            return v.join(",");
        }
        match s.recv(&mut buf, libc::MSG_DONTWAIT) {
            Ok(len) => v.push(String::from_utf8_lossy(&buf[..len]).into_owned()),
            Err(e) => {
                v.push(err_name(&e));
                return v.join(",");
            }
        }
    }
    if wait_msg_for(s, Duration::from_millis(200)) {
        v.push("+more".into());
    }
    crate::util::joined_or_none(&v, ",")
}

/// A check computed in the namespace's thread: name, observation, and the expected
/// observation (`expect`) or the verdict (`check`).
type Obs = (&'static str, String, Result<(), String>, Option<String>);

fn retrans_lists(r: &mut Report) -> Result<(), String> {
    let results = in_new_netns(|| {
        let mut out: Vec<Obs> = Vec::new();
        let push = |out: &mut Vec<Obs>, name, got: String, want: String| {
            out.push((name, got, Ok(()), Some(want)));
        };
        let (a_rx, a_tx) = (v4(LO, 4940), v4([127, 0, 0, 2], 4941));
        let (b_rx, b_tx) = (v6_lo(4942), v6_lo(4943));
        let rx = bound(a_rx)?;
        let tx = bound(a_tx)?;
        let rx6 = bound(b_rx)?;
        let tx6 = bound(b_tx)?;
        let held = Knob::set("loop_ack_hold", 1)?;
        let mut sent = Vec::new();
        for (s, d, p) in [
            (&tx, a_rx, "m10-------"),
            (&tx6, b_rx, "m40-------------------------------------"),
            (&tx, a_rx, "m20-----------------"),
            (&tx, a_rx, "m30---------------------------"),
            (
                &tx6,
                b_rx,
                "m50-----------------------------------------------",
            ),
        ] {
            sent.push(res_obs(&s.send_to(p.as_bytes(), d)));
        }
        push(
            &mut out,
            "faults_retrans_sent_delivered",
            format!(
                "sent={} rx={} rx6={}",
                sent.join(","),
                payloads(&rx, 3),
                payloads(&rx6, 2)
            ),
            format!(
                "sent=OK,OK,OK,OK,OK rx={},{},{} rx6={},{}",
                "m10-------",
                "m20-----------------",
                "m30---------------------------",
                "m40-------------------------------------",
                "m50-----------------------------------------------"
            ),
        );
        let v4c = "127.0.0.2>127.0.0.1";
        let v6c = "__1>__1";
        let m4c = "__ffff_127.0.0.2>__ffff_127.0.0.1";
        push(
            &mut out,
            "faults_retrans_info_connections",
            conns_obs(&tx, false),
            format!("{v4c} tx=4 rx=4 flags=4 tos=0 loopback"),
        );
        push(
            &mut out,
            "faults_retrans_info6_connections",
            conns_obs(&tx, true),
            format!("{v6c} tx=3 rx=3 flags=4 loopback,{m4c} tx=4 rx=4 flags=4 loopback"),
        );
        let a = "127.0.0.2/4941>127.0.0.1/4940";
        let b = "__1/4943>__1/4942";
        let ma = "__ffff_127.0.0.2/4941>__ffff_127.0.0.1/4940";
        let list4 = |flags: u8| {
            [(10, 1), (20, 2), (30, 3)]
                .iter()
                .map(|(l, q)| format!("{a} len={l} seq={q} flags={flags} tos=0"))
                .collect::<Vec<_>>()
                .join(",")
        };
        let list6 = |flags: u8| {
            let mut v: Vec<String> = [(40, 1), (50, 2)]
                .iter()
                .map(|(l, q)| format!("{b} len={l} seq={q} flags={flags} tos=0"))
                .collect();
            v.extend(
                [(10, 1), (20, 2), (30, 3)]
                    .iter()
                    .map(|(l, q)| format!("{ma} len={l} seq={q} flags={flags} tos=0")),
            );
            v.join(",")
        };
        push(
            &mut out,
            "faults_retrans_info_unacked",
            format!(
                "retrans={} send={}",
                msgs_obs(&tx, RDS_INFO_RETRANS_MESSAGES),
                msgs_obs(&tx, RDS_INFO_SEND_MESSAGES)
            ),
            format!("retrans={} send=empty", list4(0)),
        );
        push(
            &mut out,
            "faults_retrans_info6_unacked",
            format!(
                "retrans={} send={}",
                msgs_obs(&tx, RDS6_INFO_RETRANS_MESSAGES),
                msgs_obs(&tx, RDS6_INFO_SEND_MESSAGES)
            ),
            format!("retrans={} send=empty", list6(0)),
        );

        // A reset with acknowledgements still held: everything unacknowledged goes again,
        // marked RETRANSMITTED (and ACK_REQUIRED), and the receiver drops it as old.
        let before = Counters::take(&tx)?;
        let reset = obs(&write_hook("reset", b"1"));
        let want6 = list6(6);
        let t0 = Instant::now();
        let mut again = msgs_obs(&tx, RDS6_INFO_RETRANS_MESSAGES);
        while again != want6 && t0.elapsed() < arrival_bound() {
            std::thread::sleep(Duration::from_millis(20));
            again = msgs_obs(&tx, RDS6_INFO_RETRANS_MESSAGES);
        }
        // Settled: wait a moment for anything still on its way.
        std::thread::sleep(Duration::from_millis(100));
        let after = Counters::take(&tx)?;
        push(
            &mut out,
            "faults_retrans_after_reset",
            format!(
                "reset={reset} retrans={} send={}",
                msgs_obs(&tx, RDS_INFO_RETRANS_MESSAGES),
                msgs_obs(&tx, RDS_INFO_SEND_MESSAGES)
            ),
            format!("reset=OK retrans={} send=empty", list4(6)),
        );
        push(
            &mut out,
            "faults_retrans6_after_reset",
            format!(
                "retrans={} send={}",
                msgs_obs(&tx, RDS6_INFO_RETRANS_MESSAGES),
                msgs_obs(&tx, RDS6_INFO_SEND_MESSAGES)
            ),
            format!("retrans={want6} send=empty"),
        );
        push(
            &mut out,
            "faults_retrans_connections_after_reset",
            conns_obs(&tx, true),
            format!("{v6c} tx=3 rx=3 flags=4 loopback,{m4c} tx=4 rx=4 flags=4 loopback"),
        );
        push(
            &mut out,
            "faults_retrans_received_once",
            format!(
                "rx={} rx6={} old_seq={} retransmitted={}",
                payloads(&rx, 0),
                payloads(&rx6, 0),
                after.delta_obs(&before, Stat::RecvDropOldSeq.name()),
                after.delta_obs(&before, Stat::RsSendRetransmitted.name())
            ),
            "rx=none rx6=none old_seq=+5 retransmitted=+5".into(),
        );
        let resets = after.delta(&before, Stat::ConnReset.name());
        out.push((
            "faults_retrans_conn_reset",
            format!(
                "conn_reset={}",
                after.delta_obs(&before, Stat::ConnReset.name())
            ),
            match resets {
                Some(n) if n >= 2 => Ok(()),
                _ => Err("both connections were reset: at least +2".into()),
            },
            None,
        ));

        // Acknowledgements flow again: the next message on each connection takes everything
        // before it off the list.
        drop(held);
        let k4 = res_obs(&tx.send_to(b"flush4", a_rx));
        let k6 = res_obs(&tx6.send_to(b"flush6", b_rx));
        let rx_after = payloads(&rx, 1);
        let rx6_after = payloads(&rx6, 1);
        let t0 = Instant::now();
        let mut left = msgs_obs(&tx, RDS6_INFO_RETRANS_MESSAGES);
        while left != "empty" && t0.elapsed() < arrival_bound() {
            std::thread::sleep(Duration::from_millis(20));
            left = msgs_obs(&tx, RDS6_INFO_RETRANS_MESSAGES);
        }
        push(
            &mut out,
            "faults_retrans_acked",
            format!(
                "kick={k4},{k6} rx={rx_after} rx6={rx6_after} retrans={} retrans6={left} send6={}",
                msgs_obs(&tx, RDS_INFO_RETRANS_MESSAGES),
                msgs_obs(&tx, RDS6_INFO_SEND_MESSAGES)
            ),
            "kick=OK,OK rx=flush4 rx6=flush6 retrans=empty retrans6=empty send6=empty".to_string(),
        );
        push(
            &mut out,
            "faults_retrans_connections_acked",
            conns_obs(&tx, true),
            format!("{v6c} tx=4 rx=4 flags=4 loopback,{m4c} tx=5 rx=5 flags=4 loopback"),
        );
        Ok(out)
    });
    for (name, got, res, want) in results? {
        match want {
            Some(w) => r.expect(name, &got, &w),
            None => r.check(name, &got, res),
        }
    }
    Ok(())
}

// --- RDMA operations at resets ---------------------------------------------------------------

/// Operations issued per run.
const OPS: usize = 300;
/// Bytes each operation moves.
const SLOT: usize = 64;

/// What operation `i` is: every fourth a read.
fn is_read(i: usize) -> bool {
    i % 4 == 3
}

/// The data write `i` moves (from the client's slot into the server's).
fn wdata(i: usize) -> Vec<u8> {
    pattern(SLOT, 0x5752_0000 + i as u64)
}

/// The data read `i` fetches (from the server's slot into the client's).
fn rdata(i: usize) -> Vec<u8> {
    pattern(SLOT, 0x5244_0000 + i as u64)
}

/// The user token of operation `i`.
fn token(i: usize) -> u64 {
    0x7000_0000 + i as u64
}

fn rdma_at_resets(r: &mut Report, pfx: &str, softirq: bool, port: u16) -> Result<(), String> {
    let srv_addr = v4(LO, port);
    let cli_addr = v4(LO, port + 1);
    let srv = big(srv_addr)?;
    let cli = big(cli_addr)?;
    // The server's registration: the targets of writes, then the sources of reads.
    let smem = RdmaMem::new(2 * OPS * SLOT).map_err(|e| format!("mmap: {e}"))?;
    // The client's buffers: the sources of writes, then the targets of reads.
    let cmem = RdmaMem::new(2 * OPS * SLOT).map_err(|e| format!("mmap: {e}"))?;
    smem.fill(0xEE);
    cmem.fill(0x11);
    for i in 0..OPS {
        smem.write((OPS + i) * SLOT, &rdata(i));
        cmem.write(i * SLOT, &wdata(i));
    }
    let cookie = srv
        .get_mr(smem.at(0), (2 * OPS * SLOT) as u64, RDS_RDMA_READWRITE)
        .map_err(|e| format!("GET_MR: {e}"))?;
    let before = Counters::take(&cli)?;

    let mut knobs = Vec::new();
    if softirq {
        knobs.push(Knob::set("loop_softirq", 1)?);
        knobs.push(Knob::set("loop_ring", 16)?);
    }
    knobs.push(Knob::set("loop_reset_every", 3)?);

    // Each operation (with a payload naming it) is followed by a plain message.
    let mut ids = Vec::with_capacity(OPS);
    let mut errors = Vec::new();
    let t0 = Instant::now();
    for i in 0..OPS {
        let read = is_read(i);
        let (local, remote) = if read { (OPS + i, OPS + i) } else { (i, i) };
        let op = Op {
            cookie,
            remote_addr: (remote * SLOT) as u64,
            remote_bytes: SLOT as u64,
            local: vec![RdsIovec {
                addr: cmem.at(local * SLOT),
                bytes: SLOT as u64,
            }],
            flags: RDS_RDMA_NOTIFY_ME | if read { 0 } else { RDS_RDMA_READWRITE },
            token: token(i),
        };
        let mut id = 0u64;
        let res = rdma_op(
            &cli,
            &srv_addr,
            &op,
            format!("R{i}").as_bytes(),
            Some(&mut id),
            0,
        );
        if let Err(e) = &res {
            errors.push(format!("op{i}_{}", err_name(e)));
        }
        ids.push(id);
        if let Err(e) = cli.send_to(format!("P{i}").as_bytes(), srv_addr) {
            errors.push(format!("plain{i}_{}", err_name(&e)));
        }
    }

    // Every operation is reported once.
    let mut notes: BTreeMap<u64, Vec<i32>> = BTreeMap::new();
    let mut nnotes = 0;
    let mut cli_msgs = 0;
    let limit = Duration::from_secs(60);
    while nnotes < OPS && t0.elapsed() < limit {
        match recv_notes(&cli, 16)? {
            Some((len, _, v)) => {
                if v.is_empty() || len > 0 {
                    cli_msgs += 1;
                }
                for n in v {
                    nnotes += 1;
                    notes.entry(n.user_token).or_default().push(n.status);
                }
            }
            None => {
                let _ = cli.poll(libc::POLLIN, Duration::from_millis(100));
            }
        }
    }
    // The server's messages: every plain one, and the payload of every operation that
    // succeeded.
    let mut plain = Vec::new();
    let mut op_msgs: BTreeMap<usize, usize> = BTreeMap::new();
    let mut odd = 0;
    let want_ops = notes
        .values()
        .filter(|v| v.first() == Some(&RDS_RDMA_SUCCESS))
        .count();
    let mut buf = vec![0u8; 256];
    loop {
        let complete = plain.len() >= OPS && op_msgs.len() >= want_ops;
        let wait = if complete {
            Duration::from_millis(300)
        } else {
            arrival_bound()
        };
        if !wait_msg_for(&srv, wait) {
            break;
        }
        match srv.recv(&mut buf, libc::MSG_DONTWAIT) {
            Ok(n) => {
                let m = String::from_utf8_lossy(&buf[..n]).into_owned();
                if let Some(i) = m.strip_prefix('P').and_then(|x| x.parse::<usize>().ok()) {
                    plain.push(i);
                } else if let Some(i) = m.strip_prefix('R').and_then(|x| x.parse::<usize>().ok()) {
                    *op_msgs.entry(i).or_default() += 1;
                } else {
                    odd += 1;
                }
            }
            Err(_) => break,
        }
    }
    let took = t0.elapsed();
    drop(knobs);
    // A few more notifications may be late: none is expected.
    let late = match recv_notes(&cli, 16)? {
        Some((_, _, v)) => v.len(),
        None => 0,
    };

    // The notifications, by operation.
    let (mut ok, mut dropped, mut missing, mut dup, mut other) = (0, 0, 0, 0, 0);
    let mut status = vec![None; OPS];
    for (i, st) in status.iter_mut().enumerate() {
        match notes.get(&token(i)).map(Vec::as_slice) {
            None => missing += 1,
            Some([s]) => {
                match *s {
                    RDS_RDMA_SUCCESS => ok += 1,
                    RDS_RDMA_DROPPED => dropped += 1,
                    _ => other += 1,
                }
                *st = Some(*s);
            }
            Some(_) => dup += 1,
        }
    }
    let unknown = notes
        .keys()
        .filter(|t| !(token(0)..token(OPS)).contains(t))
        .count();
    println!(
        "# {pfx}: {OPS} operations in {took:?}: {ok} SUCCESS, {dropped} DROPPED; {} plain messages",
        plain.len()
    );
    r.expect(
        &format!("{pfx}_sent"),
        &format!(
            "errors={} ids_increasing={}",
            crate::util::joined_or_none(&errors, ","),
            ids.windows(2).all(|w| w[0] < w[1]) && ids.first() > Some(&0)
        ),
        "errors=none ids_increasing=true",
    );
    r.expect(
        &format!("{pfx}_notified_once"),
        &format!(
            "notes={nnotes} missing={missing} dup={dup} unknown={unknown} other_status={other} late={late} client_msgs={cli_msgs}"
        ),
        &format!("notes={OPS} missing=0 dup=0 unknown=0 other_status=0 late=0 client_msgs=0"),
    );
    r.check(
        &format!("{pfx}_some_dropped"),
        &format!("success={ok} dropped={dropped}"),
        if dropped > 0 && ok > 0 {
            Ok(())
        } else {
            Err("resets every few frames drop some operations and let others through".into())
        },
    );

    // Data: a write that succeeded is in the server's slot, a read in the client's; a dropped
    // operation touched nothing.
    let (mut ok_bad, mut dropped_bad) = (0, 0);
    for (i, st) in status.iter().enumerate() {
        let (got, want_done, untouched) = if is_read(i) {
            (
                cmem.read((OPS + i) * SLOT, SLOT),
                rdata(i),
                vec![0x11; SLOT],
            )
        } else {
            (smem.read(i * SLOT, SLOT), wdata(i), vec![0xEE; SLOT])
        };
        match *st {
            Some(RDS_RDMA_SUCCESS) if got != want_done => ok_bad += 1,
            Some(RDS_RDMA_DROPPED) if got != untouched => dropped_bad += 1,
            _ => {}
        }
    }
    r.expect(
        &format!("{pfx}_data"),
        &format!("success_wrong={ok_bad} dropped_touched={dropped_bad}"),
        "success_wrong=0 dropped_touched=0",
    );

    // The operations' messages: delivered once each for those that succeeded, never for those
    // dropped.
    let (mut msg_missing, mut msg_dup, mut msg_extra) = (0, 0, 0);
    for (i, st) in status.iter().enumerate() {
        let n = op_msgs.get(&i).copied().unwrap_or(0);
        match (*st == Some(RDS_RDMA_SUCCESS), n) {
            (true, 0) => msg_missing += 1,
            (true, 1) | (false, 0) => {}
            (true, _) => msg_dup += 1,
            (false, _) => msg_extra += 1,
        }
    }
    r.expect(
        &format!("{pfx}_op_messages"),
        &format!("missing={msg_missing} dup={msg_dup} from_dropped={msg_extra} odd={odd}"),
        "missing=0 dup=0 from_dropped=0 odd=0",
    );
    let in_order = plain.iter().enumerate().all(|(k, i)| k == *i);
    r.expect(
        &format!("{pfx}_plain_once_in_order"),
        &format!("received={} in_order={in_order}", plain.len()),
        &format!("received={OPS} in_order=true"),
    );

    // The barrier passes every operation.
    let last = ids.iter().copied().max().unwrap_or(0);
    let (res, mark) = cli.barrier(&srv_addr, last, 0);
    r.expect(
        &format!("{pfx}_barrier"),
        &format!(
            "{} reached={}",
            res_obs(&res),
            mark != u64::MAX && mark >= last
        ),
        "OK reached=true",
    );

    let after = Counters::take(&cli)?;
    let op_dropped = after.delta(&before, Stat::RsSendOpDropped.name());
    r.check(
        &format!("{pfx}_op_dropped_counter"),
        &format!(
            "rs_send_op_dropped={} dropped={dropped}",
            after.delta_obs(&before, Stat::RsSendOpDropped.name())
        ),
        if op_dropped == Some(dropped as i128) {
            Ok(())
        } else {
            Err("the counter counts the operations reported DROPPED".into())
        },
    );
    let resets = after.delta(&before, Stat::ConnReset.name()).unwrap_or(0);
    r.check(
        &format!("{pfx}_resets"),
        &format!(
            "conn_reset={} retransmitted={} old_seq_dropped={}",
            after.delta_obs(&before, Stat::ConnReset.name()),
            after.delta_obs(&before, Stat::RsSendRetransmitted.name()),
            after.delta_obs(&before, Stat::RecvDropOldSeq.name())
        ),
        if resets > 0 {
            Ok(())
        } else {
            Err("loop_reset_every 3 resets the connection".into())
        },
    );
    let _ = srv.free_mr(cookie, 0);
    Ok(())
}

// --- reaping idle connections ------------------------------------------------------------

/// Restores `conn_idle_ms` to its value before the test when dropped.
pub(crate) struct IdleMs(String);

impl IdleMs {
    pub(crate) fn set(ms: u32) -> Result<Self, String> {
        let old = std::fs::read_to_string(format!("{DEBUGFS}/conn_idle_ms"))
            .map_err(|e| format!("reading {DEBUGFS}/conn_idle_ms: {e}"))?;
        write_hook("conn_idle_ms", ms.to_string().as_bytes())
            .map_err(|e| format!("writing {DEBUGFS}/conn_idle_ms: {e}"))?;
        Ok(Self(old.trim().to_string()))
    }
}

impl Drop for IdleMs {
    fn drop(&mut self) {
        if let Err(e) = write_hook("conn_idle_ms", self.0.as_bytes()) {
            eprintln!("rds-tests: could not restore {DEBUGFS}/conn_idle_ms: {e}");
        }
    }
}

/// Idle connections and the congestion maps nobody uses go away (with the idle time shortened
/// to 300 ms, `conn_idle_ms`); a connection with a message held on it stays; sending to a
/// reaped destination makes a new connection. In a fresh namespace, so the lists hold only
/// this test's connections.
fn reaping(r: &mut Report) -> Result<(), String> {
    const N: u8 = 20;
    let out = in_new_netns(move || {
        let mut o = Vec::new();
        let tx = bound(v4(LO, 4990))?;
        let rx = bound(v4(LO, 4991))?;
        let dest = |i: u8| v4([127, 9, 0, i], 5000);
        let before = Counters::take(&tx)?;
        let sent: Vec<String> = (1..=N)
            .map(|i| res_obs(&tx.send_to(b"x", dest(i))))
            .collect();
        let listed = |s: &RdsSocket| -> Result<usize, String> {
            Ok(s.connections(false)
                .map_err(|e| format!("RDS_INFO_CONNECTIONS: {}", err_name(&e)))?
                .iter()
                .filter(
                    |c| matches!(c.faddr, std::net::IpAddr::V4(a) if a.octets()[..2] == [127, 9]),
                )
                .count())
        };
        o.push(format!(
            "sent={} listed={}",
            if sent.iter().all(|s| s == "OK") {
                "OK".to_string()
            } else {
                sent.join(",")
            },
            listed(&tx)?
        ));
        // A message held on the connection to rx: that connection is busy, not idle.
        let held = {
            let _hold = Knob::set("loop_hold", 1)?;
            let _idle = IdleMs::set(300)?;
            let h = res_obs(&tx.send_to(b"held", v4(LO, 4991)));
            // The reaper's next pass was planned with the old idle time (every 2.5 s); from
            // then on it runs every 75 ms. Bounded wait for the idle ones to go, then a few
            // passes more (the congestion maps go in the pass after their connections).
            let t0 = std::time::Instant::now();
            std::thread::sleep(Duration::from_millis(1500));
            while listed(&tx)? > 0 && t0.elapsed() < Duration::from_secs(8) {
                std::thread::sleep(Duration::from_millis(100));
            }
            std::thread::sleep(Duration::from_millis(500));
            let after = Counters::take(&tx)?;
            // The counters are the host's: idle connections of other namespaces may go too.
            let at_least = |name: &str| {
                after
                    .delta(&before, name)
                    .map_or("missing".to_string(), |d| (d >= i128::from(N)).to_string())
            };
            o.push(format!(
                "listed={} reaped_all={} maps_all={}",
                listed(&tx)?,
                at_least("rs_conn_reaped"),
                at_least("rs_cong_map_reaped")
            ));
            let busy = tx
                .connections(false)
                .map_err(|e| format!("RDS_INFO_CONNECTIONS: {}", err_name(&e)))?
                .iter()
                .any(|c| c.faddr == std::net::IpAddr::V4(std::net::Ipv4Addr::from(LO)));
            o.push(format!("held={h} busy_listed={busy}"));
            h
        };
        // Released: the held message goes with the next send on its connection.
        let kick = res_obs(&tx.send_to(b"kick", v4(LO, 4991)));
        let got = (0..2)
            .map(|_| {
                crate::util::recv_one(&rx, 64)
                    .map(|(b, _)| String::from_utf8_lossy(&b).into_owned())
            })
            .collect::<Result<Vec<_>, _>>()
            .unwrap_or_else(|e| vec![e]);
        o.push(format!("held={held} kick={kick} got={}", got.join(",")));
        // A reaped destination: a new connection, and a message that arrives.
        let back = bound(dest(1))?;
        let again = res_obs(&tx.send_to(b"again", dest(1)));
        let arrived = crate::util::recv_one(&back, 64)
            .map(|(b, _)| String::from_utf8_lossy(&b).into_owned())
            .unwrap_or_else(|e| e.replace(' ', "_"));
        o.push(format!(
            "again={again} arrived={arrived} listed={}",
            listed(&tx)?
        ));
        Ok(o)
    })?;
    let want = [
        format!("sent=OK listed={N}"),
        "listed=0 reaped_all=true maps_all=true".to_string(),
        "held=OK busy_listed=true".to_string(),
        "held=OK kick=OK got=held,kick".to_string(),
        "again=OK arrived=again listed=1".to_string(),
    ];
    let names = [
        "faults_reap_setup",
        "faults_reap_idle_gone",
        "faults_reap_busy_kept",
        "faults_reap_busy_delivered",
        "faults_reap_reconnect",
    ];
    for (i, name) in names.iter().enumerate() {
        r.expect(name, out.get(i).map_or("none", |s| s.as_str()), &want[i]);
    }
    Ok(())
}
