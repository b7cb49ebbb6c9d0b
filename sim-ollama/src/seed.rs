//! Seed derivation. Every random choice in the simulator comes from an RNG seeded by a
//! stable hash of (master seed, what is being decided), so results do not depend on the
//! order requests arrive in, the platform, or the Rust version.

use rand::SeedableRng;

/// The RNG used everywhere: PCG 64 (MCG variant), portable and reproducible across
/// platforms and versions, unlike `StdRng`.
pub(crate) type SimRng = rand_pcg::Pcg64Mcg;

/// FNV-1a, 64 bit: a stable hash (std's `DefaultHasher` may change between releases).
pub(crate) fn fnv1a(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in bytes {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

/// SplitMix64's finaliser: spreads the bits of a hash.
pub(crate) fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Builds a seed from labelled parts: `SeedBuilder::new(master).str("model").str(name).finish()`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct SeedBuilder(u64);

impl SeedBuilder {
    pub(crate) fn new(master: u64) -> Self {
        SeedBuilder(mix(master))
    }

    pub(crate) fn str(self, s: &str) -> Self {
        // Length-prefixed, so ("ab","c") and ("a","bc") differ.
        self.u64(s.len() as u64).bytes(s.as_bytes())
    }

    pub(crate) fn bytes(self, b: &[u8]) -> Self {
        SeedBuilder(mix(self.0 ^ fnv1a(b)))
    }

    pub(crate) fn u64(self, v: u64) -> Self {
        SeedBuilder(mix(self.0 ^ v))
    }

    pub(crate) fn finish(self) -> u64 {
        self.0
    }

    pub(crate) fn rng(self) -> SimRng {
        SimRng::seed_from_u64(self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fnv1a_matches_the_reference_vectors() {
        assert_eq!(fnv1a(b""), 0xcbf29ce484222325);
        assert_eq!(fnv1a(b"a"), 0xaf63dc4c8601ec8c);
        assert_eq!(fnv1a(b"foobar"), 0x85944171f73967e8);
    }

    #[test]
    fn seeds_depend_on_every_part_and_on_boundaries() {
        let a = SeedBuilder::new(1).str("ab").str("c").finish();
        let b = SeedBuilder::new(1).str("a").str("bc").finish();
        let c = SeedBuilder::new(2).str("ab").str("c").finish();
        assert_ne!(a, b);
        assert_ne!(a, c);
        assert_eq!(a, SeedBuilder::new(1).str("ab").str("c").finish());
    }
}
