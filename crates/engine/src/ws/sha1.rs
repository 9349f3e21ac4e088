//! SHA-1 (FIPS 180-4), only for the handshake's `Sec-WebSocket-Accept` (computed once per
//! run): too little to take a dependency for.

/// The SHA-1 digest of `data`.
pub fn sha1(data: &[u8]) -> [u8; 20] {
    let mut h: [u32; 5] = [
        0x6745_2301,
        0xEFCD_AB89,
        0x98BA_DCFE,
        0x1032_5476,
        0xC3D2_E1F0,
    ];
    let mut msg = data.to_vec();
    msg.push(0x80);
    while msg.len() % 64 != 56 {
        msg.push(0);
    }
    msg.extend_from_slice(&((data.len() as u64) * 8).to_be_bytes());
    for block in msg.chunks_exact(64) {
        let mut w = [0u32; 80];
        for (k, word) in block.chunks_exact(4).enumerate() {
            w[k] = u32::from_be_bytes([word[0], word[1], word[2], word[3]]);
        }
        for k in 16..80 {
            w[k] = (w[k - 3] ^ w[k - 8] ^ w[k - 14] ^ w[k - 16]).rotate_left(1);
        }
        let [mut a, mut b, mut c, mut d, mut e] = h;
        for (k, &wk) in w.iter().enumerate() {
            let (f, kk) = match k {
                0..=19 => ((b & c) | (!b & d), 0x5A82_7999),
                20..=39 => (b ^ c ^ d, 0x6ED9_EBA1),
                40..=59 => ((b & c) | (b & d) | (c & d), 0x8F1B_BCDC),
                _ => (b ^ c ^ d, 0xCA62_C1D6),
            };
            let t = a
                .rotate_left(5)
                .wrapping_add(f)
                .wrapping_add(e)
                .wrapping_add(kk)
                .wrapping_add(wk);
            e = d;
            d = c;
            c = b.rotate_left(30);
            b = a;
            a = t;
        }
        for (x, y) in h.iter_mut().zip([a, b, c, d, e]) {
            *x = x.wrapping_add(y);
        }
    }
    let mut out = [0u8; 20];
    for (k, x) in h.iter().enumerate() {
        out[4 * k..4 * k + 4].copy_from_slice(&x.to_be_bytes());
    }
    out
}
