//! MD5 (RFC 1321) of many messages at once: the document checksums of a batch of fetched pages
//! (MS-FSCMT 2.2.5.3 PKT_CSUM, 16 bytes) and the CIDHASHes of a page's links (MS-FSWASDR
//! 2.2.1.3.1.1).
//!
//! One MD5 is a chain: each of a block's 64 steps waits for the one before, so a core runs a
//! message at about a step's latency a step, its other ALUs idle. Messages that do not depend
//! on each other fill those: with AVX2 eight of them go through the 64 steps together, one in
//! each 32-bit lane of a 256-bit register, for about the instructions of one. A group's lanes
//! run as many blocks as its longest message needs; a lane whose message has ended keeps its
//! state (masked). Messages are grouped by length so that few lanes idle. Without AVX2 (or on
//! another architecture) each message goes through the md-5 crate, whose digests the tests
//! compare with these for every length up to several blocks, each lane count and mixed lengths.

use md5::{Digest, Md5};

/// The MD5 of each of `inputs` into `out` (the same length).
///
/// # Panics
///
/// When `out` is not as long as `inputs`.
pub fn md5_many(inputs: &[&[u8]], out: &mut [[u8; 16]]) {
    assert_eq!(inputs.len(), out.len(), "one digest a message");
    #[cfg(target_arch = "x86_64")]
    if inputs.len() > 1 && std::arch::is_x86_feature_detected!("avx2") {
        // Lanes grouped by length, so the eight of a group run about as many blocks each.
        let mut order: Vec<u32> = (0..inputs.len() as u32).collect();
        order.sort_unstable_by_key(|&i| inputs[i as usize].len());
        for group in order.chunks(avx2::LANES) {
            if group.len() == 1 {
                let i = group[0] as usize;
                out[i] = Md5::digest(inputs[i]).into();
                continue;
            }
            let mut msgs: [&[u8]; avx2::LANES] = [&[]; avx2::LANES];
            for (m, &i) in msgs.iter_mut().zip(group) {
                *m = inputs[i as usize];
            }
            // SAFETY: AVX2 was detected on this CPU just above.
            let digests = unsafe { avx2::digest8(&msgs, group.len()) };
            for (&i, d) in group.iter().zip(digests) {
                out[i as usize] = d;
            }
        }
        return;
    }
    for (o, m) in out.iter_mut().zip(inputs) {
        *o = Md5::digest(m).into();
    }
}

/// The initial state (RFC 1321 3.3).
const INIT: [u32; 4] = [0x6745_2301, 0xefcd_ab89, 0x98ba_dcfe, 0x1032_5476];

/// A message's blocks: its whole 64-byte blocks read in place, then one or two blocks of its
/// rest with the padding and the bit length (RFC 1321 3.1, 3.2).
struct Blocks<'a> {
    data: &'a [u8],
    whole: usize,
    tail: [u8; 128],
    /// Blocks in all.
    count: usize,
}

impl<'a> Blocks<'a> {
    fn new(data: &'a [u8]) -> Self {
        let whole = data.len() / 64;
        let rest = &data[whole * 64..];
        let mut tail = [0u8; 128];
        tail[..rest.len()].copy_from_slice(rest);
        tail[rest.len()] = 0x80;
        let tail_blocks = if rest.len() < 56 { 1 } else { 2 };
        let bits = (data.len() as u64).wrapping_mul(8);
        tail[tail_blocks * 64 - 8..tail_blocks * 64].copy_from_slice(&bits.to_le_bytes());
        Blocks {
            data,
            whole,
            tail,
            count: whole + tail_blocks,
        }
    }

    /// Block `k` (`k < count`).
    fn block(&self, k: usize) -> &[u8] {
        if k < self.whole {
            &self.data[k * 64..k * 64 + 64]
        } else {
            let t = k - self.whole;
            &self.tail[t * 64..t * 64 + 64]
        }
    }
}

#[cfg(target_arch = "x86_64")]
mod avx2 {
    use std::arch::x86_64::*;

    use super::{Blocks, INIT};

    /// Messages a register holds.
    pub const LANES: usize = 8;

    /// The sine constants of RFC 1321 3.4, by step.
    const K: [u32; 64] = [
        0xd76a_a478,
        0xe8c7_b756,
        0x2420_70db,
        0xc1bd_ceee,
        0xf57c_0faf,
        0x4787_c62a,
        0xa830_4613,
        0xfd46_9501,
        0x6980_98d8,
        0x8b44_f7af,
        0xffff_5bb1,
        0x895c_d7be,
        0x6b90_1122,
        0xfd98_7193,
        0xa679_438e,
        0x49b4_0821,
        0xf61e_2562,
        0xc040_b340,
        0x265e_5a51,
        0xe9b6_c7aa,
        0xd62f_105d,
        0x0244_1453,
        0xd8a1_e681,
        0xe7d3_fbc8,
        0x21e1_cde6,
        0xc337_07d6,
        0xf4d5_0d87,
        0x455a_14ed,
        0xa9e3_e905,
        0xfcef_a3f8,
        0x676f_02d9,
        0x8d2a_4c8a,
        0xfffa_3942,
        0x8771_f681,
        0x6d9d_6122,
        0xfde5_380c,
        0xa4be_ea44,
        0x4bde_cfa9,
        0xf6bb_4b60,
        0xbebf_bc70,
        0x289b_7ec6,
        0xeaa1_27fa,
        0xd4ef_3085,
        0x0488_1d05,
        0xd9d4_d039,
        0xe6db_99e5,
        0x1fa2_7cf8,
        0xc4ac_5665,
        0xf429_2244,
        0x432a_ff97,
        0xab94_23a7,
        0xfc93_a039,
        0x655b_59c3,
        0x8f0c_cc92,
        0xffef_f47d,
        0x8584_5dd1,
        0x6fa8_7e4f,
        0xfe2c_e6e0,
        0xa301_4314,
        0x4e08_11a1,
        0xf753_7e82,
        0xbd3a_f235,
        0x2ad7_d2bb,
        0xeb86_d391,
    ];

    /// One step: `a = b + rotl(a + f + K[k] + m, s)`.
    macro_rules! step {
        ($f:expr, $a:ident, $b:ident, $m:expr, $k:expr, $s:literal) => {
            let t = _mm256_add_epi32(
                _mm256_add_epi32($a, $f),
                _mm256_add_epi32($m, _mm256_set1_epi32(K[$k] as i32)),
            );
            let t = _mm256_or_si256(
                _mm256_slli_epi32::<$s>(t),
                _mm256_srli_epi32::<{ 32 - $s }>(t),
            );
            $a = _mm256_add_epi32($b, t);
        };
    }

    /// F(b, c, d) = (b & c) | (!b & d), as d ^ (b & (c ^ d)).
    macro_rules! ff {
        ($a:ident, $b:ident, $c:ident, $d:ident, $m:expr, $k:expr, $s:literal) => {
            step!(
                _mm256_xor_si256($d, _mm256_and_si256($b, _mm256_xor_si256($c, $d))),
                $a,
                $b,
                $m,
                $k,
                $s
            );
        };
    }
    /// G(b, c, d) = (b & d) | (c & !d), as c ^ (d & (b ^ c)).
    macro_rules! gg {
        ($a:ident, $b:ident, $c:ident, $d:ident, $m:expr, $k:expr, $s:literal) => {
            step!(
                _mm256_xor_si256($c, _mm256_and_si256($d, _mm256_xor_si256($b, $c))),
                $a,
                $b,
                $m,
                $k,
                $s
            );
        };
    }
    /// H(b, c, d) = b ^ c ^ d.
    macro_rules! hh {
        ($a:ident, $b:ident, $c:ident, $d:ident, $m:expr, $k:expr, $s:literal) => {
            step!(
                _mm256_xor_si256(_mm256_xor_si256($b, $c), $d),
                $a,
                $b,
                $m,
                $k,
                $s
            );
        };
    }
    /// I(b, c, d) = c ^ (b | !d).
    macro_rules! ii {
        ($a:ident, $b:ident, $c:ident, $d:ident, $m:expr, $k:expr, $s:literal, $ones:ident) => {
            step!(
                _mm256_xor_si256($c, _mm256_or_si256($b, _mm256_xor_si256($d, $ones))),
                $a,
                $b,
                $m,
                $k,
                $s
            );
        };
    }

    /// Words `0..8` (`half` 0) or `8..16` (`half` 1) of eight blocks, one block a row, turned
    /// into eight registers of one word each (the word of every block in its lane).
    #[target_feature(enable = "avx2")]
    fn transpose(rows: &[&[u8]; LANES], half: usize, w: &mut [__m256i; 16]) {
        let load = |i: usize| {
            let row = &rows[i][half * 32..half * 32 + 32];
            // SAFETY: `row` is 32 bytes long; loadu reads 32 bytes, unaligned.
            unsafe { _mm256_loadu_si256(row.as_ptr().cast()) }
        };
        let (r0, r1, r2, r3) = (load(0), load(1), load(2), load(3));
        let (r4, r5, r6, r7) = (load(4), load(5), load(6), load(7));
        let t0 = _mm256_unpacklo_epi32(r0, r1);
        let t1 = _mm256_unpackhi_epi32(r0, r1);
        let t2 = _mm256_unpacklo_epi32(r2, r3);
        let t3 = _mm256_unpackhi_epi32(r2, r3);
        let t4 = _mm256_unpacklo_epi32(r4, r5);
        let t5 = _mm256_unpackhi_epi32(r4, r5);
        let t6 = _mm256_unpacklo_epi32(r6, r7);
        let t7 = _mm256_unpackhi_epi32(r6, r7);
        let u0 = _mm256_unpacklo_epi64(t0, t2);
        let u1 = _mm256_unpackhi_epi64(t0, t2);
        let u2 = _mm256_unpacklo_epi64(t1, t3);
        let u3 = _mm256_unpackhi_epi64(t1, t3);
        let u4 = _mm256_unpacklo_epi64(t4, t6);
        let u5 = _mm256_unpackhi_epi64(t4, t6);
        let u6 = _mm256_unpacklo_epi64(t5, t7);
        let u7 = _mm256_unpackhi_epi64(t5, t7);
        let o = half * 8;
        w[o] = _mm256_permute2x128_si256::<0x20>(u0, u4);
        w[o + 1] = _mm256_permute2x128_si256::<0x20>(u1, u5);
        w[o + 2] = _mm256_permute2x128_si256::<0x20>(u2, u6);
        w[o + 3] = _mm256_permute2x128_si256::<0x20>(u3, u7);
        w[o + 4] = _mm256_permute2x128_si256::<0x31>(u0, u4);
        w[o + 5] = _mm256_permute2x128_si256::<0x31>(u1, u5);
        w[o + 6] = _mm256_permute2x128_si256::<0x31>(u2, u6);
        w[o + 7] = _mm256_permute2x128_si256::<0x31>(u3, u7);
    }

    /// The 64 steps of RFC 1321 3.4 over the eight blocks `m` (word by word), added to `s`.
    #[target_feature(enable = "avx2")]
    fn compress(s: &mut [__m256i; 4], m: &[__m256i; 16]) {
        let ones = _mm256_set1_epi32(-1);
        let [mut a, mut b, mut c, mut d] = *s;
        ff!(a, b, c, d, m[0], 0, 7);
        ff!(d, a, b, c, m[1], 1, 12);
        ff!(c, d, a, b, m[2], 2, 17);
        ff!(b, c, d, a, m[3], 3, 22);
        ff!(a, b, c, d, m[4], 4, 7);
        ff!(d, a, b, c, m[5], 5, 12);
        ff!(c, d, a, b, m[6], 6, 17);
        ff!(b, c, d, a, m[7], 7, 22);
        ff!(a, b, c, d, m[8], 8, 7);
        ff!(d, a, b, c, m[9], 9, 12);
        ff!(c, d, a, b, m[10], 10, 17);
        ff!(b, c, d, a, m[11], 11, 22);
        ff!(a, b, c, d, m[12], 12, 7);
        ff!(d, a, b, c, m[13], 13, 12);
        ff!(c, d, a, b, m[14], 14, 17);
        ff!(b, c, d, a, m[15], 15, 22);

        gg!(a, b, c, d, m[1], 16, 5);
        gg!(d, a, b, c, m[6], 17, 9);
        gg!(c, d, a, b, m[11], 18, 14);
        gg!(b, c, d, a, m[0], 19, 20);
        gg!(a, b, c, d, m[5], 20, 5);
        gg!(d, a, b, c, m[10], 21, 9);
        gg!(c, d, a, b, m[15], 22, 14);
        gg!(b, c, d, a, m[4], 23, 20);
        gg!(a, b, c, d, m[9], 24, 5);
        gg!(d, a, b, c, m[14], 25, 9);
        gg!(c, d, a, b, m[3], 26, 14);
        gg!(b, c, d, a, m[8], 27, 20);
        gg!(a, b, c, d, m[13], 28, 5);
        gg!(d, a, b, c, m[2], 29, 9);
        gg!(c, d, a, b, m[7], 30, 14);
        gg!(b, c, d, a, m[12], 31, 20);

        hh!(a, b, c, d, m[5], 32, 4);
        hh!(d, a, b, c, m[8], 33, 11);
        hh!(c, d, a, b, m[11], 34, 16);
        hh!(b, c, d, a, m[14], 35, 23);
        hh!(a, b, c, d, m[1], 36, 4);
        hh!(d, a, b, c, m[4], 37, 11);
        hh!(c, d, a, b, m[7], 38, 16);
        hh!(b, c, d, a, m[10], 39, 23);
        hh!(a, b, c, d, m[13], 40, 4);
        hh!(d, a, b, c, m[0], 41, 11);
        hh!(c, d, a, b, m[3], 42, 16);
        hh!(b, c, d, a, m[6], 43, 23);
        hh!(a, b, c, d, m[9], 44, 4);
        hh!(d, a, b, c, m[12], 45, 11);
        hh!(c, d, a, b, m[15], 46, 16);
        hh!(b, c, d, a, m[2], 47, 23);

        ii!(a, b, c, d, m[0], 48, 6, ones);
        ii!(d, a, b, c, m[7], 49, 10, ones);
        ii!(c, d, a, b, m[14], 50, 15, ones);
        ii!(b, c, d, a, m[5], 51, 21, ones);
        ii!(a, b, c, d, m[12], 52, 6, ones);
        ii!(d, a, b, c, m[3], 53, 10, ones);
        ii!(c, d, a, b, m[10], 54, 15, ones);
        ii!(b, c, d, a, m[1], 55, 21, ones);
        ii!(a, b, c, d, m[8], 56, 6, ones);
        ii!(d, a, b, c, m[15], 57, 10, ones);
        ii!(c, d, a, b, m[6], 58, 15, ones);
        ii!(b, c, d, a, m[13], 59, 21, ones);
        ii!(a, b, c, d, m[4], 60, 6, ones);
        ii!(d, a, b, c, m[11], 61, 10, ones);
        ii!(c, d, a, b, m[2], 62, 15, ones);
        ii!(b, c, d, a, m[9], 63, 21, ones);

        s[0] = _mm256_add_epi32(s[0], a);
        s[1] = _mm256_add_epi32(s[1], b);
        s[2] = _mm256_add_epi32(s[2], c);
        s[3] = _mm256_add_epi32(s[3], d);
    }

    /// The MD5 of the first `used` of `msgs` (2 to 8), one a lane.
    #[target_feature(enable = "avx2")]
    pub fn digest8(msgs: &[&[u8]; LANES], used: usize) -> [[u8; 16]; LANES] {
        let lanes: [Blocks; LANES] = std::array::from_fn(|i| Blocks::new(msgs[i]));
        let count: [usize; LANES] =
            std::array::from_fn(|i| if i < used { lanes[i].count } else { 0 });
        let most = count.iter().copied().max().unwrap_or(0);
        let mut s = INIT.map(|x| _mm256_set1_epi32(x as i32));
        let mut w = [_mm256_setzero_si256(); 16];
        for k in 0..most {
            // A lane past its message's end runs a block of its tail again and keeps its
            // state: its mask is clear.
            let rows: [&[u8]; LANES] = std::array::from_fn(|i| {
                let b = &lanes[i];
                b.block(k.min(b.count - 1))
            });
            let live: [i32; LANES] = std::array::from_fn(|i| -i32::from(k < count[i]));
            // SAFETY: `live` is eight i32s; loadu reads 32 bytes, unaligned.
            let mask = unsafe { _mm256_loadu_si256(live.as_ptr().cast()) };
            transpose(&rows, 0, &mut w);
            transpose(&rows, 1, &mut w);
            let before = s;
            compress(&mut s, &w);
            for (now, was) in s.iter_mut().zip(before) {
                *now = _mm256_blendv_epi8(was, *now, mask);
            }
        }
        let mut words = [[0u32; LANES]; 4];
        for (out, v) in words.iter_mut().zip(s) {
            // SAFETY: `out` is eight u32s; storeu writes 32 bytes, unaligned.
            unsafe { _mm256_storeu_si256(out.as_mut_ptr().cast(), v) };
        }
        std::array::from_fn(|lane| {
            let mut d = [0u8; 16];
            for (j, word) in words.iter().enumerate() {
                d[j * 4..j * 4 + 4].copy_from_slice(&word[lane].to_le_bytes());
            }
            d
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Hashes `msgs` in one batch and checks each digest against md-5's.
    fn assert_each_is_md5(msgs: &[Vec<u8>], batch: usize) {
        let inputs: Vec<&[u8]> = msgs.iter().map(Vec::as_slice).collect();
        let mut out = vec![[0u8; 16]; inputs.len()];
        md5_many(&inputs, &mut out);
        for (m, d) in inputs.iter().zip(&out) {
            let want: [u8; 16] = Md5::digest(m).into();
            assert_eq!(*d, want, "length {} in a batch of {batch}", m.len());
        }
    }

    fn message(len: usize, seed: u64) -> Vec<u8> {
        let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
        (0..len)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect()
    }

    #[test]
    fn the_rfc_1321_test_suite() {
        // RFC 1321 A.5, all in one batch.
        let suite: [(&[u8], &str); 7] = [
            (b"", "d41d8cd98f00b204e9800998ecf8427e"),
            (b"a", "0cc175b9c0f1b6a831c399e269772661"),
            (b"abc", "900150983cd24fb0d6963f7d28e17f72"),
            (b"message digest", "f96b697d7cb7938d525a2f31aaf161d0"),
            (
                b"abcdefghijklmnopqrstuvwxyz",
                "c3fcd3d76192e4007dfb496cca67e13b",
            ),
            (
                b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789",
                "d174ab98d277d9f5a5611c2c9f419d9f",
            ),
            (
                b"12345678901234567890123456789012345678901234567890123456789012345678901234567890",
                "57edf4a22be3c955ac49da2e2107b67a",
            ),
        ];
        let inputs: Vec<&[u8]> = suite.iter().map(|(m, _)| *m).collect();
        let mut out = vec![[0u8; 16]; inputs.len()];
        md5_many(&inputs, &mut out);
        for ((_, want), got) in suite.iter().zip(&out) {
            let hex: String = got.iter().map(|b| format!("{b:02x}")).collect();
            assert_eq!(&hex, want);
        }
    }

    #[test]
    fn every_length_across_the_padding_edges_in_every_lane() {
        // Lengths 0..=300 cross the one- and two-block tails (55, 56, 63, 64, 119, 120, ...);
        // batches of 1 to 19 put each length in every lane and in part-filled groups.
        let msgs: Vec<Vec<u8>> = (0..=300).map(|len| message(len, len as u64)).collect();
        for batch in 1..20 {
            for chunk in msgs.chunks(batch) {
                assert_each_is_md5(chunk, batch);
            }
        }
    }

    #[test]
    fn mixed_lengths_in_one_group_keep_each_lane_its_own() {
        // One long message with short ones: the short lanes end blocks before the long one,
        // and their states must stay as they ended.
        for seed in 0..40u64 {
            let lens = [
                (seed * 37 % 9000) as usize,
                1,
                64,
                (seed * 11 % 200) as usize,
                4096,
                0,
                (seed * 101 % 3000) as usize,
                55,
                (seed * 7 % 130) as usize,
            ];
            let msgs: Vec<Vec<u8>> = lens
                .iter()
                .enumerate()
                .map(|(i, &l)| message(l, seed * 16 + i as u64))
                .collect();
            assert_each_is_md5(&msgs, msgs.len());
        }
    }

    #[test]
    fn an_empty_batch_writes_nothing() {
        md5_many(&[], &mut []);
    }
}
