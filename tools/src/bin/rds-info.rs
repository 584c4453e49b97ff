//! `rds-info`: shows the state of the kernel's RDS (counters, connections, sockets, queued
//! messages, transport connections) through the `RDS_INFO_*` socket options, as the classic
//! rds-info of rds-tools does.
//!
//! ```text
//! rds-info [-6] [-c] [-C] [-r] [-s] [-t] [-k] [-I] [-T]
//! ```
//! Without a table option every table is shown.

use librds::info::{
    self, decode_table, ConnectionInfo, Counter, InfoRecord, MessageInfo, RdmaConnectionInfo,
    SocketInfo, TcpSocketInfo, CONN_FLAG_CONNECTED, CONN_FLAG_CONNECTING, CONN_FLAG_SENDING,
};
use librds::RdsSocket;
use rds_tools::getopt::{self, Arg};
use rds_tools::sys;
use std::os::fd::AsRawFd;
use std::process::ExitCode;

const USAGE: &str = "\
usage: rds-info [-6] [-c] [-C] [-r] [-s] [-t] [-k] [-I] [-T]
  -c  counters                -C  RDS connections
  -r  receive message queues  -s  send message queues
  -t  retransmit queues       -k  RDS sockets
  -I  IB/RDMA connections     -T  RDS/TCP sockets
  -6  use the RDS6_INFO_* tables (IPv6 and IPv4-mapped entries)
Without a table option, every table is shown.";

/// The tables, in the order they are printed.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Table {
    Counters,
    Ib,
    Connections,
    Recv,
    Send,
    Retrans,
    Sockets,
    Tcp,
}

const ALL: [Table; 8] = [
    Table::Counters,
    Table::Ib,
    Table::Connections,
    Table::Recv,
    Table::Send,
    Table::Retrans,
    Table::Sockets,
    Table::Tcp,
];

fn main() -> ExitCode {
    let args = match getopt::parse(std::env::args().skip(1), "6cCrstkITh") {
        Ok(a) => a,
        Err(e) => {
            eprintln!("rds-info: {e}\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    let mut v6 = false;
    let mut want = Vec::new();
    for a in args {
        match a {
            Arg::Opt('6', _) => v6 = true,
            Arg::Opt('c', _) => want.push(Table::Counters),
            Arg::Opt('C', _) => want.push(Table::Connections),
            Arg::Opt('r', _) => want.push(Table::Recv),
            Arg::Opt('s', _) => want.push(Table::Send),
            Arg::Opt('t', _) => want.push(Table::Retrans),
            Arg::Opt('k', _) => want.push(Table::Sockets),
            Arg::Opt('I', _) => want.push(Table::Ib),
            Arg::Opt('T', _) => want.push(Table::Tcp),
            Arg::Opt('h', _) => {
                println!("{USAGE}");
                return ExitCode::SUCCESS;
            }
            Arg::Opt(..) | Arg::Operand(_) => {
                eprintln!("rds-info: unexpected argument\n{USAGE}");
                return ExitCode::from(2);
            }
        }
    }
    let tables: Vec<Table> = if want.is_empty() {
        ALL.to_vec()
    } else {
        ALL.iter().copied().filter(|t| want.contains(t)).collect()
    };
    let sock = match RdsSocket::new() {
        Ok(s) => s,
        Err(e) => {
            eprintln!("rds-info: socket(AF_RDS): {e} (is an RDS module loaded?)");
            return ExitCode::from(1);
        }
    };
    let mut ok = true;
    for (i, t) in tables.iter().enumerate() {
        if i > 0 {
            println!();
        }
        if let Err(e) = show(sock.as_raw_fd(), *t, v6) {
            eprintln!("rds-info: {e}");
            ok = false;
        }
    }
    if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}

/// Width of an address column.
fn aw(v6: bool) -> usize {
    if v6 {
        39
    } else {
        15
    }
}

/// Fetches a table; `None` (after a note) if this kernel does not provide it.
fn fetch(fd: i32, opt: i32, name: &str) -> Result<Option<(usize, Vec<u8>)>, String> {
    match sys::info(fd, opt) {
        Ok(r) => Ok(Some(r)),
        Err(e) if e.raw_os_error() == Some(libc::ENOPROTOOPT) => {
            println!("  (not provided by the loaded RDS modules)");
            Ok(None)
        }
        Err(e) => Err(format!("{name}: getsockopt({opt}): {e}")),
    }
}

/// Fetches and decodes a table of `T` records (the IPv6 layout when `v6`); `None` (after a
/// note) if this kernel does not provide it.
fn table<T: InfoRecord>(fd: i32, opt: i32, name: &str, v6: bool) -> Result<Option<Vec<T>>, String> {
    let Some((each, d)) = fetch(fd, opt, name)? else {
        return Ok(None);
    };
    decode_table(each, &d, v6)
        .map(Some)
        .map_err(|e| format!("{name}: {e}"))
}

/// The flags of a connection as the classic rds-info shows them: `s` sending, `c` connecting,
/// `C` connected, `-` for each flag not set.
fn conn_flags(f: u8) -> String {
    [
        (CONN_FLAG_SENDING, 's'),
        (CONN_FLAG_CONNECTING, 'c'),
        (CONN_FLAG_CONNECTED, 'C'),
    ]
    .iter()
    .map(|&(bit, ch)| if f & bit != 0 { ch } else { '-' })
    .collect()
}

/// A GID as colon-separated groups of four hex digits (IPv6 notation, uncompressed).
fn gid(g: &[u8; 16]) -> String {
    g.chunks(2)
        .map(|p| format!("{:02x}{:02x}", p[0], p[1]))
        .collect::<Vec<_>>()
        .join(":")
}

fn show(fd: i32, t: Table, v6: bool) -> Result<(), String> {
    let w = aw(v6);
    match t {
        Table::Counters => {
            println!("Counters:");
            println!("{:>32} {:>16}", "CounterName", "Value");
            if let Some(cs) = table::<Counter>(fd, info::RDS_INFO_COUNTERS, "counters", false)? {
                for c in cs {
                    println!("{:>32} {:>16}", c.name, c.value);
                }
            }
        }
        Table::Ib => {
            println!("RDS IB Connections:");
            println!(
                "{:>w$} {:>w$} {:>3} {:>3} {:>39} {:>39} {:>6} {:>6} {:>6}",
                "LocalAddr",
                "RemoteAddr",
                "Tos",
                "SL",
                "LocalDev",
                "RemoteDev",
                "SendWR",
                "RecvWR",
                "SndSGE"
            );
            let opt = if v6 {
                info::RDS6_INFO_IB_CONNECTIONS
            } else {
                info::RDS_INFO_IB_CONNECTIONS
            };
            if let Some(cs) = table::<RdmaConnectionInfo>(fd, opt, "IB connections", v6)? {
                for c in cs {
                    println!(
                        "{:>w$} {:>w$} {:>3} {:>3} {:>39} {:>39} {:>6} {:>6} {:>6}",
                        c.src_addr,
                        c.dst_addr,
                        c.tos,
                        c.sl,
                        gid(&c.src_gid),
                        gid(&c.dst_gid),
                        c.max_send_wr,
                        c.max_recv_wr,
                        c.max_send_sge
                    );
                }
            }
        }
        Table::Connections => {
            println!("RDS Connections:");
            println!(
                "{:>w$} {:>w$} {:>3} {:>16} {:>16} {:>3} {:<16}",
                "LocalAddr", "RemoteAddr", "Tos", "NextTX", "NextRX", "Flg", " Transport"
            );
            let opt = if v6 {
                info::RDS6_INFO_CONNECTIONS
            } else {
                info::RDS_INFO_CONNECTIONS
            };
            if let Some(cs) = table::<ConnectionInfo>(fd, opt, "connections", v6)? {
                for c in cs {
                    let tos = c.tos.map_or("-".to_string(), |t| t.to_string());
                    println!(
                        "{:>w$} {:>w$} {:>3} {:>16} {:>16} {:>3}  {}",
                        c.laddr,
                        c.faddr,
                        tos,
                        c.next_tx_seq,
                        c.next_rx_seq,
                        conn_flags(c.flags),
                        c.transport
                    );
                }
            }
        }
        Table::Recv | Table::Send | Table::Retrans => {
            let (title, o4, o6) = match t {
                Table::Recv => (
                    "Receive Message Queue:",
                    info::RDS_INFO_RECV_MESSAGES,
                    info::RDS6_INFO_RECV_MESSAGES,
                ),
                Table::Send => (
                    "Send Message Queue:",
                    info::RDS_INFO_SEND_MESSAGES,
                    info::RDS6_INFO_SEND_MESSAGES,
                ),
                _ => (
                    "Retransmit Message Queue:",
                    info::RDS_INFO_RETRANS_MESSAGES,
                    info::RDS6_INFO_RETRANS_MESSAGES,
                ),
            };
            println!("{title}");
            println!(
                "{:>w$} {:>5} {:>w$} {:>5} {:>3} {:>16} {:>10}",
                "LocalAddr", "LPort", "RemoteAddr", "RPort", "Tos", "Seq", "Bytes"
            );
            if let Some((each, d)) = fetch(fd, if v6 { o6 } else { o4 }, title)? {
                let ms: Vec<MessageInfo> =
                    decode_table(each, &d, v6).map_err(|e| format!("messages: {e}"))?;
                for m in ms {
                    println!(
                        "{:>w$} {:>5} {:>w$} {:>5} {:>3} {:>16} {:>10}",
                        m.laddr, m.lport, m.faddr, m.fport, m.tos, m.seq, m.len
                    );
                }
            }
        }
        Table::Sockets => {
            println!("RDS Sockets:");
            println!(
                "{:>w$} {:>5} {:>w$} {:>5} {:>10} {:>10} {:>8}",
                "BoundAddr", "BPort", "ConnAddr", "CPort", "SndBuf", "RcvBuf", "Inode"
            );
            let opt = if v6 {
                info::RDS6_INFO_SOCKETS
            } else {
                info::RDS_INFO_SOCKETS
            };
            if let Some(ss) = table::<SocketInfo>(fd, opt, "sockets", v6)? {
                for s in ss {
                    println!(
                        "{:>w$} {:>5} {:>w$} {:>5} {:>10} {:>10} {:>8}",
                        s.bound.ip(),
                        s.bound.port(),
                        s.connected.ip(),
                        s.connected.port(),
                        s.sndbuf,
                        s.rcvbuf,
                        s.inum
                    );
                }
            }
        }
        Table::Tcp => {
            println!("TCP Connections:");
            println!(
                "{:>w$} {:>5} {:>w$} {:>5} {:>10} {:>10} {:>10} {:>10} {:>10}",
                "LocalAddr",
                "LPort",
                "RemoteAddr",
                "RPort",
                "HdrRemain",
                "DataRemain",
                "SentNxt",
                "ExpectUna",
                "SeenUna"
            );
            let opt = if v6 {
                info::RDS6_INFO_TCP_SOCKETS
            } else {
                info::RDS_INFO_TCP_SOCKETS
            };
            if let Some(ss) = table::<TcpSocketInfo>(fd, opt, "tcp sockets", v6)? {
                for s in ss {
                    println!(
                        "{:>w$} {:>5} {:>w$} {:>5} {:>10} {:>10} {:>10} {:>10} {:>10}",
                        s.local.ip(),
                        s.local.port(),
                        s.peer.ip(),
                        s.peer.port(),
                        s.hdr_rem,
                        s.data_rem,
                        s.last_sent_nxt,
                        s.last_expected_una,
                        s.last_seen_una
                    );
                }
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_and_gids() {
        assert_eq!(conn_flags(CONN_FLAG_CONNECTED), "--C");
        assert_eq!(conn_flags(0xff), "scC");
        let mut g = [0u8; 16];
        g[0] = 0xfe;
        g[1] = 0x80;
        g[15] = 1;
        assert_eq!(gid(&g), "fe80:0000:0000:0000:0000:0000:0000:0001");
    }

    #[test]
    fn addresses_pad_as_strings() {
        let a: std::net::IpAddr = "127.0.0.1".parse().unwrap();
        assert_eq!(format!("{a:>10}"), " 127.0.0.1");
        let a: std::net::IpAddr = "::ffff:127.0.0.1".parse().unwrap();
        assert_eq!(format!("{a:>18}"), "  ::ffff:127.0.0.1");
    }
}
