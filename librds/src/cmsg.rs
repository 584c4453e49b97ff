//! Control messages (`cmsghdr` sequences) for `sendmsg` and from `recvmsg`, built and read as
//! bytes in the kernel's layout (x86-64 and other LP64 targets: a 16-byte header, payloads
//! aligned to 8 bytes), which `rds-proto` defines ([`CmsgHdr`]).

use rds_proto::CmsgHdr;

pub use rds_proto::{cmsg_align, cmsg_len, cmsg_space, CMSG_HDR_LEN};

/// One control message: level, type and data.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Cmsg {
    /// `cmsg_level` (`SOL_RDS`, `SOL_SOCKET`, ...).
    pub level: i32,
    /// `cmsg_type`.
    pub ty: i32,
    /// The data after the header (`cmsg_len - CMSG_HDR_LEN` bytes).
    pub data: Vec<u8>,
}

impl Cmsg {
    /// The data as a native-endian `u64`, when it is at least 8 bytes long.
    pub fn data_u64(&self) -> Option<u64> {
        let b: [u8; 8] = self.data.get(..8)?.try_into().ok()?;
        Some(u64::from_ne_bytes(b))
    }
}

/// A control buffer under construction, well-formed or deliberately not.
#[derive(Clone, Debug, Default)]
pub struct ControlBuf {
    bytes: Vec<u8>,
}

impl ControlBuf {
    /// An empty control buffer.
    pub fn new() -> Self {
        Self::default()
    }

    /// A control buffer of `len` zero bytes.
    pub fn zeroed(len: usize) -> Self {
        Self {
            bytes: vec![0; len],
        }
    }

    /// Appends a well-formed control message.
    pub fn push(&mut self, level: i32, ty: i32, data: &[u8]) -> &mut Self {
        self.push_with_len(cmsg_len(data.len()), level, ty, data)
    }

    /// Appends a control message whose header claims `cmsg_len` (right or wrong) followed by
    /// `data`, padded to `CMSG_SPACE(data.len())`.
    pub fn push_with_len(
        &mut self,
        cmsg_len: usize,
        level: i32,
        ty: i32,
        data: &[u8],
    ) -> &mut Self {
        let h = CmsgHdr {
            len: cmsg_len as u64,
            level,
            kind: ty,
        };
        self.bytes.extend_from_slice(&h.encode());
        self.bytes.extend_from_slice(data);
        self.bytes
            .resize(self.bytes.len() + cmsg_align(data.len()) - data.len(), 0);
        self
    }

    /// Appends raw bytes.
    pub fn push_bytes(&mut self, b: &[u8]) -> &mut Self {
        self.bytes.extend_from_slice(b);
        self
    }

    /// The buffer.
    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// Its length in bytes.
    pub fn len(&self) -> usize {
        self.bytes.len()
    }

    /// Whether it is empty.
    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }
}

/// Reads the control messages the kernel wrote into `bytes` (the first `msg_controllen` bytes
/// of the control buffer after `recvmsg`). Stops at a header that does not fit.
pub fn parse_cmsgs(bytes: &[u8]) -> Vec<Cmsg> {
    let mut out = Vec::new();
    let mut rest = bytes;
    while let Some(h) = CmsgHdr::decode(rest) {
        let len = match usize::try_from(h.len) {
            Ok(len) if len >= CMSG_HDR_LEN => len,
            _ => break,
        };
        // A `cmsg_len` past the end keeps the bytes there are.
        out.push(Cmsg {
            level: h.level,
            ty: h.kind,
            data: rest[CMSG_HDR_LEN..len.min(rest.len())].to_vec(),
        });
        rest = rest.get(cmsg_align(len)..).unwrap_or_default();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn build_and_parse() {
        let mut c = ControlBuf::new();
        c.push(276, 5, &7u64.to_ne_bytes()).push(1, 29, &[1, 2, 3]);
        assert_eq!(c.len(), cmsg_space(8) + cmsg_space(3));
        let p = parse_cmsgs(c.as_bytes());
        assert_eq!(p.len(), 2);
        assert_eq!(p[0].data_u64(), Some(7));
        assert_eq!(
            p[1],
            Cmsg {
                level: 1,
                ty: 29,
                data: vec![1, 2, 3]
            }
        );
        // A `cmsg_len` past the end of the buffer keeps what there is; one shorter than the
        // header ends the walk.
        let mut t = ControlBuf::new();
        t.push_with_len(cmsg_len(12), 1, 2, &[7; 8]);
        assert_eq!(parse_cmsgs(t.as_bytes())[0].data, vec![7; 8]);
        let mut s = ControlBuf::new();
        s.push_with_len(15, 1, 2, &[]).push(1, 2, &[]);
        assert!(parse_cmsgs(s.as_bytes()).is_empty());
    }
}
