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

use crate::rdma::{rdma_op, recv_notes, Op};
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
fn next_msg(s: &RdsSocket, wait: Duration) -> Result<(Vec<u8>, Option<u64>), String> {
    let t0 = Instant::now();
    let mut buf = vec![0u8; 4096];
    loop {
        match s.recv_msg(&mut buf, 256, libc::MSG_DONTWAIT) {
            // Notifications, and the empty messages behind reads, are not answers.
            Ok(m) if m.len == 0 => continue,
            Ok(m) => {
                let cookie = m.cmsgs.iter().find_map(|c| c.rdma_dest());
                return Ok((buf[..m.len].to_vec(), cookie));
            }
            Err(e) if e.raw_os_error() == Some(libc::EAGAIN) => {
                let left = wait.saturating_sub(t0.elapsed());
                if left.is_zero() {
                    return Err("timed out".into());
                }
                let _ = s.poll(libc::POLLIN, left.min(Duration::from_millis(200)));
            }
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

/// The operator's answers; returns a description of what went wrong, if anything.
fn operator(my: IpAddr, peer: IpAddr, ops: usize) -> Result<String, String> {
    let s = sock(SocketAddr::new(my, OP_PORT))?;
    let mem = RdmaMem::new(262_144 + 8192).map_err(|e| format!("mmap: {e}"))?;
    let mut bad = Vec::new();
    let to = SocketAddr::new(peer, REG_PORT);
    let mut n = 0;
    while n < ops {
        let (req, cookie) = next_msg(&s, 4 * STEP).map_err(|e| format!("request {n}: {e}"))?;
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
        // The notification.
        let t0 = Instant::now();
        let status = loop {
            match recv_notes(&s, 4) {
                Ok(Some((_, _, v))) if !v.is_empty() => break v[0].status,
                Ok(_) if t0.elapsed() < STEP => {
                    let _ = s.poll(libc::POLLIN, Duration::from_millis(200));
                }
                Ok(_) => break -1,
                Err(e) => return Err(e),
            }
        };
        if status != RDS_RDMA_SUCCESS {
            bad.push(format!("{i}:status{status}"));
            ok = false;
        }
        if read {
            if ok && fnv(&mem.read(off, len)) != hash {
                bad.push(format!("{i}:read_data"));
                ok = false;
            }
            let mut a = vec![b'D'];
            a.extend_from_slice(&(i as u32).to_be_bytes());
            a.push(u8::from(ok));
            s.send_to(&a, to)
                .map_err(|e| format!("answer {i}: {}", err_name(&e)))?;
        }
    }
    Ok(if bad.is_empty() {
        String::new()
    } else {
        format!("{:?}", &bad[..bad.len().min(8)])
    })
}

pub(crate) fn run(r: &mut Report, args: &[&str]) -> Result<(), String> {
    let [my, peer, name, ops] = args else {
        return Err("usage: rds-tests ib-rdma-pair MY PEER NAME OPS".into());
    };
    let my: IpAddr = my.parse().map_err(|_| format!("bad address {my}"))?;
    let peer_ip: IpAddr = peer.parse().map_err(|_| format!("bad address {peer}"))?;
    let ops: usize = ops.parse().map_err(|_| format!("bad count {ops}"))?;
    let op_thread = std::thread::spawn(move || operator(my, peer_ip, ops));
    let reg = registrant(my, peer_ip, ops);
    let op = op_thread
        .join()
        .unwrap_or_else(|_| Err("operator panicked".into()));
    for (role, res) in [("registrant", reg), ("operator", op)] {
        let (obs, verdict) = match res {
            Ok(b) if b.is_empty() => (format!("{ops} operations"), Ok(())),
            Ok(b) => (format!("{ops} operations"), Err(b)),
            Err(e) => ("failed".to_string(), Err(e)),
        };
        r.check(&format!("ib_rdma_pair_{name}_{role}"), &obs, verdict);
    }
    Ok(())
}
