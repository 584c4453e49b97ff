//! RDMA between two guests, C RDS against rds_rs (issue 11), with what C supports:
//! registrations made by `RDS_CMSG_RDMA_MAP` on an established connection (C's FRWR needs the
//! connection's queue pair), their cookies carried by the message as `RDS_CMSG_RDMA_DEST`.
//!
//! `rds-tests ib-rdma-pair MY PEER NAME OPS`: both sides run both roles at once.
//! - The registrant (MY port 4400) pings the peer's operator until it answers (a message for
//!   a port nobody holds yet is dropped), then sends it OPS requests, one at a time: a
//!   message with `RDS_CMSG_RDMA_MAP` of a buffer, asking for a write (of a pattern it will
//!   check) or a read (of a pattern it put there, whose hash it sends along). It checks a
//!   write's data the moment the operator's answer arrives (the answer follows the write on
//!   the same connection), and frees the registration.
//! - The operator (MY port 4401) answers OPS requests: it runs the RDMA operation asked for
//!   with the request's cookie (`RDS_RDMA_NOTIFY_ME`), waits for the notification, and
//!   answers (a read: whether the data it read has the registrant's hash).
//!
//! Results `ib_rdma_pair_NAME_registrant` and `ib_rdma_pair_NAME_operator`.
//!
//! C RDS notifies a READ's success when the RDS ack of the message behind it arrives
//! (`rds_send_remove_from_sock`), which over rxe can be before the READ's data is placed (the
//! device handles the READ's responses and the peer's ack in different tasks): C's operator
//! (NAME `c_...`) waits up to 2 s for the data and reports how many READs were early. rds_rs
//! notifies at the READ's own completion, and its data is checked at once.

use crate::rdma::{rdma_op, Op};
use crate::util::{err_name, pattern};
use crate::Report;
use librds::rdma::{GetMrArgs, RDS_RDMA_NOTIFY_ME, RDS_RDMA_READWRITE, RDS_RDMA_SUCCESS};
use librds::{ControlBuf, RdmaMem, RdsIovec, RdsSocket};
use std::net::{IpAddr, SocketAddr};
use std::time::{Duration, Instant};

const REG_PORT: u16 = 4400;
const OP_PORT: u16 = 4401;
/// Sizes of the operations, in turn.
const SIZES: [usize; 6] = [1, 100, 4096, 5000, 65536, 262_144];
/// How long one request may take (a reconnect included): a bound against a hang, generous
/// for a busy host.
const STEP: Duration = Duration::from_secs(90);

fn fnv(data: &[u8]) -> u32 {
    data.iter().fold(0x811c_9dc5u32, |h, b| {
        (h ^ u32::from(*b)).wrapping_mul(0x0100_0193)
    })
}

fn sock(addr: SocketAddr) -> Result<RdsSocket, String> {
    let s = RdsSocket::new().map_err(|e| format!("socket: {e}"))?;
    crate::util::force_buffers(&s, 8 << 20)?;
    s.bind(addr)
        .map_err(|e| format!("bind {addr}: {}", err_name(&e)))?;
    Ok(s)
}

/// The next message with a payload on `s` within `wait`: payload and RDMA_DEST cookie.
/// Notifications, and the empty messages behind reads, are not answers.
fn next_msg(s: &RdsSocket, wait: Duration) -> Result<(Vec<u8>, Option<u64>), String> {
    let t0 = Instant::now();
    loop {
        match next_note(s)? {
            Some(Got::Msg(m)) => return Ok(m),
            Some(Got::Note(_)) => continue,
            None => {
                let left = wait.saturating_sub(t0.elapsed());
                if left.is_zero() {
                    return Err("timed out".into());
                }
                let _ = s.poll(libc::POLLIN, left.min(Duration::from_millis(200)));
            }
        }
    }
}

/// How `got` differs from `want`, to tell a failure's kind from its report: the first and last
/// byte that differ, what is there, and how many bytes still hold the operator's fill (0x11:
/// not read) or the registrant's earlier fill (0xEE: old pages).
fn describe(got: &[u8], want: &[u8]) -> String {
    let diff: Vec<usize> = (0..got.len().min(want.len()))
        .filter(|&k| got[k] != want[k])
        .collect();
    let (Some(&first), Some(&last)) = (diff.first(), diff.last()) else {
        return "the hash alone differs".into();
    };
    let count = |b: u8| diff.iter().filter(|&&k| got[k] == b).count();
    format!(
        "{} of {} bytes differ, {first}..={last}, got {:#04x} at {first}; 0x11 {}, 0xee {}",
        diff.len(),
        got.len(),
        got[first],
        count(0x11),
        count(0xEE)
    )
}

/// What [`next_note`] found: a notification's status, or a message with a payload (and its
/// `RDMA_DEST` cookie).
enum Got {
    Note(i32),
    Msg((Vec<u8>, Option<u64>)),
}

/// The next notification or message with a payload on `s`, if one is there now (empty
/// messages, such as those behind the peer's reads, are skipped).
fn next_note(s: &RdsSocket) -> Result<Option<Got>, String> {
    let mut buf = vec![0u8; 4096];
    loop {
        match s.recv_msg(&mut buf, 256, libc::MSG_DONTWAIT) {
            Ok(m) => {
                if let Some(n) = m.cmsgs.iter().find_map(|c| c.rdma_status()) {
                    return Ok(Some(Got::Note(n.status)));
                }
                if m.len > 0 {
                    let cookie = m.cmsgs.iter().find_map(|c| c.rdma_dest());
                    return Ok(Some(Got::Msg((buf[..m.len].to_vec(), cookie))));
                }
            }
            Err(e) if e.raw_os_error() == Some(libc::EAGAIN) => return Ok(None),
            Err(e) => return Err(format!("recvmsg: {}", err_name(&e))),
        }
    }
}

/// The registrant's requests; returns a description of what went wrong, if anything.
fn registrant(my: IpAddr, peer: IpAddr, ops: usize) -> Result<String, String> {
    let s = sock(SocketAddr::new(my, REG_PORT))?;
    let to = SocketAddr::new(peer, OP_PORT);
    let mem = RdmaMem::new(262_144 + 8192).map_err(|e| format!("mmap: {e}"))?;
    // The peer's operator must be there first (a message for a port nobody holds is
    // dropped): a ping until it answers.
    let t0 = Instant::now();
    loop {
        if t0.elapsed() > 2 * STEP {
            return Err("the operator never answered a ping".into());
        }
        if s.send_to(b"P", to).is_ok()
            && next_msg(&s, Duration::from_secs(1)).is_ok_and(|(p, _)| p == b"p")
        {
            break;
        }
    }
    let mut bad = Vec::new();
    for i in 0..ops {
        let len = SIZES[i % SIZES.len()];
        let write = i % 2 == 0;
        // Odd offsets, so that registrations start inside a page.
        let off = 7 + (i * 13) % 2000;
        let data = pattern(len, i as u64 + 100);
        if write {
            mem.fill(0xEE);
        } else {
            mem.write(off, &data);
        }
        let mut cookie = 0u64;
        let mut c = ControlBuf::new();
        c.rdma_map(&GetMrArgs {
            vec: RdsIovec {
                addr: mem.at(off),
                bytes: len as u64,
            },
            cookie_addr: &mut cookie as *mut u64 as u64,
            flags: RDS_RDMA_READWRITE,
        });
        let mut req = vec![b'R', u8::from(!write)];
        req.extend_from_slice(&(i as u32).to_be_bytes());
        req.extend_from_slice(&(len as u32).to_be_bytes());
        req.extend_from_slice(&fnv(&data).to_be_bytes());
        // A request refused for a moment (a connection coming up) is tried again.
        let t0 = Instant::now();
        loop {
            match s.send_msg(&[&req], Some(&to), c.as_bytes(), 0) {
                Ok(_) => break,
                Err(e) if t0.elapsed() < STEP => {
                    let _ = e;
                    std::thread::sleep(Duration::from_millis(200));
                }
                Err(e) => return Err(format!("request {i}: sendmsg: {}", err_name(&e))),
            }
        }
        // Late answers to the pings are not answers.
        let answer = loop {
            let a = next_msg(&s, STEP).map_err(|e| format!("answer {i}: {e}"))?;
            if a.0 != b"p" {
                break a;
            }
        };
        let want = {
            let mut a = vec![b'D'];
            a.extend_from_slice(&(i as u32).to_be_bytes());
            a.push(1);
            a
        };
        if answer.0 != want {
            bad.push(format!("{i}:answer{:?}", answer.0));
        } else if write && mem.read(off, len) != data {
            bad.push(format!("{i}:write_data"));
        } else if write && (mem.read(off - 1, 1)[0] != 0xEE || mem.read(off + len, 1)[0] != 0xEE) {
            bad.push(format!("{i}:guards"));
        }
        if !write && mem.read(off, len) != data {
            // What the operator read must not have changed here.
            bad.push(format!("{i}:read_source"));
        }
        if let Err(e) = s.free_mr(cookie, 0) {
            bad.push(format!("{i}:free_mr_{}", err_name(&e)));
        }
    }
    Ok(if bad.is_empty() {
        String::new()
    } else {
        format!("{:?}", &bad[..bad.len().min(8)])
    })
}

/// The operator's answers; returns a description of what went wrong, if anything, and how
/// many reads C notified before their data landed (`c_notes_early`: this is C RDS, whose
/// notification of a READ may come before the data; rds_rs's must not, and is checked at once).
fn operator(
    my: IpAddr,
    peer: IpAddr,
    ops: usize,
    c_notes_early: bool,
) -> Result<(String, usize), String> {
    let mut early = 0;
    let s = sock(SocketAddr::new(my, OP_PORT))?;
    let mem = RdmaMem::new(262_144 + 8192).map_err(|e| format!("mmap: {e}"))?;
    let mut bad = Vec::new();
    let to = SocketAddr::new(peer, REG_PORT);
    let mut n = 0;
    let mut pending = std::collections::VecDeque::new();
    while n < ops {
        let (req, cookie) = match pending.pop_front() {
            Some(m) => m,
            None => next_msg(&s, 4 * STEP).map_err(|e| format!("request {n}: {e}"))?,
        };
        if req == b"P" {
            s.send_to(b"p", to)
                .map_err(|e| format!("ping answer: {}", err_name(&e)))?;
            continue;
        }
        n += 1;
        if req.len() != 14 || req[0] != b'R' {
            return Err(format!("request {n}: {req:?}"));
        }
        let read = req[1] == 1;
        let i = u32::from_be_bytes([req[2], req[3], req[4], req[5]]) as usize;
        let len = u32::from_be_bytes([req[6], req[7], req[8], req[9]]) as usize;
        let hash = u32::from_be_bytes([req[10], req[11], req[12], req[13]]);
        let Some(cookie) = cookie else {
            bad.push(format!("{i}:no_cookie"));
            continue;
        };
        if len > 262_144 {
            return Err(format!("request {i}: length {len}"));
        }
        let off = 3;
        if !read {
            mem.write(off, &pattern(len, i as u64 + 100));
        } else {
            mem.fill(0x11);
        }
        let op = Op {
            cookie,
            remote_addr: 0,
            remote_bytes: len as u64,
            local: vec![RdsIovec {
                addr: mem.at(off),
                bytes: len as u64,
            }],
            flags: RDS_RDMA_NOTIFY_ME | if read { 0 } else { RDS_RDMA_READWRITE },
            token: i as u64,
        };
        let mut ok = true;
        if read {
            // The read first (its notification says the data is here; the empty message behind
            // it is not an answer), then the answer.
            if let Err(e) = rdma_op(&s, &to, &op, b"", None, 0) {
                return Err(format!("request {i}: read: {}", err_name(&e)));
            }
        } else {
            // The write and its answer in one message: the answer follows the data.
            let mut a = vec![b'D'];
            a.extend_from_slice(&(i as u32).to_be_bytes());
            a.push(1);
            if let Err(e) = rdma_op(&s, &to, &op, &a, None, 0) {
                return Err(format!("request {i}: write: {}", err_name(&e)));
            }
        }
        // The notification. The registrant's next request may come first (after a write, its
        // answer went with the data, and the notification comes at the write's completion
        // here): it is kept for the next round, not lost.
        let t0 = Instant::now();
        let status = loop {
            match next_note(&s) {
                Ok(Some(Got::Note(status))) => break status,
                Ok(Some(Got::Msg(m))) => pending.push_back(m),
                Ok(None) if t0.elapsed() < STEP => {
                    let _ = s.poll(libc::POLLIN, Duration::from_millis(200));
                }
                Ok(None) => break -1,
                Err(e) => return Err(e),
            }
        };
        if status != RDS_RDMA_SUCCESS {
            bad.push(format!("{i}:status{status}"));
            ok = false;
        }
        if read {
            if ok {
                let mut got = mem.read(off, len);
                if c_notes_early && fnv(&got) != hash {
                    // C notifies a READ's success at the RDS ack of the message behind it
                    // (`rds_send_remove_from_sock`), which over rxe can come before the READ's
                    // data is placed: the data must land soon after.
                    let t0 = Instant::now();
                    while fnv(&got) != hash && t0.elapsed() < Duration::from_secs(2) {
                        std::thread::sleep(Duration::from_millis(5));
                        got = mem.read(off, len);
                    }
                    if fnv(&got) == hash {
                        early += 1;
                    }
                }
                if fnv(&got) != hash {
                    bad.push(format!(
                        "{i}:read_data({})",
                        describe(&got, &pattern(len, i as u64 + 100))
                    ));
                    ok = false;
                }
            }
            let mut a = vec![b'D'];
            a.extend_from_slice(&(i as u32).to_be_bytes());
            a.push(u8::from(ok));
            s.send_to(&a, to)
                .map_err(|e| format!("answer {i}: {}", err_name(&e)))?;
        }
    }
    let bad = if bad.is_empty() {
        String::new()
    } else {
        format!("{:?}", &bad[..bad.len().min(8)])
    };
    Ok((bad, early))
}

pub(crate) fn run(r: &mut Report, args: &[&str]) -> Result<(), String> {
    let [my, peer, name, ops] = args else {
        return Err("usage: rds-tests ib-rdma-pair MY PEER NAME OPS".into());
    };
    let my: IpAddr = my.parse().map_err(|_| format!("bad address {my}"))?;
    let peer_ip: IpAddr = peer.parse().map_err(|_| format!("bad address {peer}"))?;
    let ops: usize = ops.parse().map_err(|_| format!("bad count {ops}"))?;
    // The name says which implementation this side runs (`c_with_rs`, `rs_with_c`).
    let c_notes_early = name.starts_with("c_");
    let op_thread = std::thread::spawn(move || operator(my, peer_ip, ops, c_notes_early));
    let reg = registrant(my, peer_ip, ops).map(|b| (b, 0));
    let op = op_thread
        .join()
        .unwrap_or_else(|_| Err("operator panicked".into()));
    for (role, res) in [("registrant", reg), ("operator", op)] {
        let done = |early: usize| {
            if early == 0 {
                format!("{ops} operations")
            } else {
                format!("{ops} operations ({early} READs notified before their data landed)")
            }
        };
        let (obs, verdict) = match res {
            Ok((b, early)) if b.is_empty() => (done(early), Ok(())),
            Ok((b, early)) => (done(early), Err(b)),
            Err(e) => ("failed".to_string(), Err(e)),
        };
        r.check(&format!("ib_rdma_pair_{name}_{role}"), &obs, verdict);
    }
    Ok(())
}
