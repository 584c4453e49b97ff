//! Control messages (`cmsghdr` sequences) for `sendmsg` and from `recvmsg`, built and read as
//! bytes in the kernel's layout (x86-64 and other LP64 targets: a 16-byte header, payloads
//! aligned to 8 bytes).

use std::mem::size_of;

/// Size of `struct cmsghdr`.
pub const CMSG_HDR_LEN: usize = size_of::<libc::cmsghdr>();

/// `CMSG_ALIGN`: rounds up to the alignment of control message headers.
pub const fn cmsg_align(n: usize) -> usize {
    let a = size_of::<usize>();
    (n + a - 1) & !(a - 1)
}

/// `CMSG_LEN`: the `cmsg_len` of a control message with `n` bytes of data.
pub const fn cmsg_len(n: usize) -> usize {
    CMSG_HDR_LEN + n
}

/// `CMSG_SPACE`: the room a control message with `n` bytes of data takes in the buffer.
pub const fn cmsg_space(n: usize) -> usize {
    CMSG_HDR_LEN + cmsg_align(n)
}

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
        // struct cmsghdr { size_t cmsg_len; int cmsg_level; int cmsg_type; }
        self.bytes.extend_from_slice(&cmsg_len.to_ne_bytes());
        self.bytes.extend_from_slice(&level.to_ne_bytes());
        self.bytes.extend_from_slice(&ty.to_ne_bytes());
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
    let mut off = 0;
    while off + CMSG_HDR_LEN <= bytes.len() {
        let h = &bytes[off..off + CMSG_HDR_LEN];
        let len = usize::from_ne_bytes(h[..8].try_into().expect("8 bytes"));
        let level = i32::from_ne_bytes(h[8..12].try_into().expect("4 bytes"));
        let ty = i32::from_ne_bytes(h[12..16].try_into().expect("4 bytes"));
        if len < CMSG_HDR_LEN {
            break;
        }
        let end = (off + len).min(bytes.len());
        out.push(Cmsg {
            level,
            ty,
            data: bytes[off + CMSG_HDR_LEN..end].to_vec(),
        });
        off += cmsg_align(len);
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
    }
}
