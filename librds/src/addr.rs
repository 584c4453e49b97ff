//! Socket addresses as the kernel sees them: `sockaddr_in` and `sockaddr_in6` bytes.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};

/// Size of `struct sockaddr_in`.
pub const SOCKADDR_IN_LEN: usize = 16;
/// Size of `struct sockaddr_in6`.
pub const SOCKADDR_IN6_LEN: usize = 28;

/// The bytes of a `sockaddr_in` (for a V4 address) or `sockaddr_in6` (for a V6 address), as
/// long as the structure.
pub fn sockaddr_bytes(addr: &SocketAddr) -> Vec<u8> {
    match addr {
        SocketAddr::V4(a) => sockaddr_in_bytes(*a),
        SocketAddr::V6(a) => {
            let mut v = Vec::with_capacity(SOCKADDR_IN6_LEN);
            v.extend_from_slice(&(libc::AF_INET6 as u16).to_ne_bytes());
            v.extend_from_slice(&a.port().to_be_bytes());
            v.extend_from_slice(&a.flowinfo().to_be_bytes());
            v.extend_from_slice(&a.ip().octets());
            v.extend_from_slice(&a.scope_id().to_ne_bytes());
            v
        }
    }
}

/// The bytes of a `sockaddr_in`.
pub fn sockaddr_in_bytes(a: SocketAddrV4) -> Vec<u8> {
    let mut v = Vec::with_capacity(SOCKADDR_IN_LEN);
    v.extend_from_slice(&(libc::AF_INET as u16).to_ne_bytes());
    v.extend_from_slice(&a.port().to_be_bytes());
    v.extend_from_slice(&a.ip().octets());
    v.extend_from_slice(&[0; 8]);
    v
}

/// Decodes a `sockaddr_in` or `sockaddr_in6` the kernel wrote (at least as long as the
/// structure of its family); `None` for anything else.
pub fn parse_sockaddr(b: &[u8]) -> Option<SocketAddr> {
    let family = u16::from_ne_bytes([*b.first()?, *b.get(1)?]);
    let port = u16::from_be_bytes([*b.get(2)?, *b.get(3)?]);
    if i32::from(family) == libc::AF_INET && b.len() >= SOCKADDR_IN_LEN {
        let ip = Ipv4Addr::new(b[4], b[5], b[6], b[7]);
        Some(SocketAddr::V4(SocketAddrV4::new(ip, port)))
    } else if i32::from(family) == libc::AF_INET6 && b.len() >= SOCKADDR_IN6_LEN {
        let flow = u32::from_be_bytes([b[4], b[5], b[6], b[7]]);
        let mut ip = [0u8; 16];
        ip.copy_from_slice(&b[8..24]);
        let scope = u32::from_ne_bytes([b[24], b[25], b[26], b[27]]);
        Some(SocketAddr::V6(SocketAddrV6::new(
            Ipv6Addr::from(ip),
            port,
            flow,
            scope,
        )))
    } else {
        None
    }
}

/// An address as RDS keeps it internally: IPv4 addresses as v4-mapped IPv6 addresses.
pub fn to_mapped(ip: IpAddr) -> Ipv6Addr {
    match ip {
        IpAddr::V4(a) => a.to_ipv6_mapped(),
        IpAddr::V6(a) => a,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        let a: SocketAddr = "127.0.0.2:4000".parse().unwrap();
        let b = sockaddr_bytes(&a);
        assert_eq!(b.len(), SOCKADDR_IN_LEN);
        assert_eq!(parse_sockaddr(&b), Some(a));
        let a6: SocketAddr = "[::1]:4001".parse().unwrap();
        let b6 = sockaddr_bytes(&a6);
        assert_eq!(b6.len(), SOCKADDR_IN6_LEN);
        assert_eq!(parse_sockaddr(&b6), Some(a6));
        assert_eq!(parse_sockaddr(&b6[..27]), None);
        assert_eq!(parse_sockaddr(&[0u8; 16]), None);
    }
}
