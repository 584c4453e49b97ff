//! Header encoding and decoding.

use rds_proto::{
    Header, HeaderError, EXTHDR_SPACE, FLAG_ACK_REQUIRED, FLAG_CONG_BITMAP, FLAG_RETRANSMITTED,
    HEADER_LEN,
};

/// A header with a distinct value in every byte of every field.
fn sample() -> Header {
    Header {
        sequence: 0x0102_0304_0506_0708,
        ack: 0x1112_1314_1516_1718,
        len: 0x2122_2324,
        sport: 0x3132,
        dport: 0x4142,
        flags: 0x51,
        credit: 0x61,
        csum: 0x7172,
        exthdr: [
            0x81, 0x82, 0x83, 0x84, 0x85, 0x86, 0x87, 0x88, 0x89, 0x8a, 0x8b, 0x8c, 0x8d, 0x8e,
            0x8f, 0x90,
        ],
    }
}

#[rustfmt::skip]
const SAMPLE_BYTES: [u8; HEADER_LEN] = [
    0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, // 0: h_sequence
    0x11, 0x12, 0x13, 0x14, 0x15, 0x16, 0x17, 0x18, // 8: h_ack
    0x21, 0x22, 0x23, 0x24,                         // 16: h_len
    0x31, 0x32,                                     // 20: h_sport
    0x41, 0x42,                                     // 22: h_dport
    0x51,                                           // 24: h_flags
    0x61,                                           // 25: h_credit
    0x00, 0x00, 0x00, 0x00,                         // 26: h_padding
    0x71, 0x72,                                     // 30: h_csum
    0x81, 0x82, 0x83, 0x84, 0x85, 0x86, 0x87, 0x88, // 32: h_exthdr
    0x89, 0x8a, 0x8b, 0x8c, 0x8d, 0x8e, 0x8f, 0x90,
];

#[test]
fn sizes_match_linux() {
    assert_eq!(HEADER_LEN, 48);
    assert_eq!(EXTHDR_SPACE, 16);
}

#[test]
fn flag_values_match_linux() {
    assert_eq!(FLAG_CONG_BITMAP, 0x01);
    assert_eq!(FLAG_ACK_REQUIRED, 0x02);
    assert_eq!(FLAG_RETRANSMITTED, 0x04);
}

#[test]
fn encode_exact_layout() {
    assert_eq!(sample().encode(), SAMPLE_BYTES);
}

#[test]
fn decode_exact_layout() {
    assert_eq!(Header::decode(&SAMPLE_BYTES), Ok(sample()));
}

#[test]
fn round_trip() {
    let h = sample();
    assert_eq!(Header::decode(&h.encode()), Ok(h));
    let d = Header::default();
    assert_eq!(d.encode(), [0; HEADER_LEN]);
    assert_eq!(Header::decode(&d.encode()), Ok(d));
}

#[test]
fn decode_ignores_padding() {
    let mut bytes = SAMPLE_BYTES;
    bytes[26..30].copy_from_slice(&[0xde, 0xad, 0xbe, 0xef]);
    assert_eq!(Header::decode(&bytes), Ok(sample()));
    // ... and encode writes it back as zero.
    assert_eq!(Header::decode(&bytes).map(|h| h.encode()), Ok(SAMPLE_BYTES));
}

#[test]
fn decode_reads_first_48_bytes_of_longer_buffer() {
    let mut long = [0xffu8; 100];
    long[..HEADER_LEN].copy_from_slice(&SAMPLE_BYTES);
    assert_eq!(Header::decode(&long), Ok(sample()));
}

#[test]
fn decode_short_buffers() {
    for n in 0..HEADER_LEN {
        assert_eq!(
            Header::decode(&SAMPLE_BYTES[..n]),
            Err(HeaderError::TooShort),
            "length {n}"
        );
    }
    assert!(Header::decode(&SAMPLE_BYTES[..HEADER_LEN]).is_ok());
}

#[test]
fn ports_are_big_endian_port_numbers() {
    let h = Header {
        sport: 4000,
        dport: 18634,
        ..Header::default()
    };
    let b = h.encode();
    assert_eq!(&b[20..24], &[0x0f, 0xa0, 0x48, 0xca]);
}

#[test]
fn error_display() {
    assert_eq!(
        HeaderError::TooShort.to_string(),
        "buffer shorter than an RDS header"
    );
    assert_eq!(
        HeaderError::UnknownExt(9).to_string(),
        "unknown extension header type 9"
    );
}
