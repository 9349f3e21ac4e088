//! Helpers shared by the parser properties of the engine (tests/parser_props.rs) and of the
//! reference server (src/request_props.rs, which includes this file by path): the case
//! count, cheap seeded bytes, cutting a stream into reads, and hostile edits.

#![allow(dead_code)] // each crate uses its own part

use proptest::prelude::*;
use proptest::test_runner::{Config, FileFailurePersistence};

/// Cases per property: `PWB_FUZZ_CASES`, else `default_cases` (CI); nothing written to disk.
pub fn config(default_cases: u32) -> Config {
    let cases = std::env::var("PWB_FUZZ_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default_cases);
    Config {
        cases,
        failure_persistence: Some(Box::new(FileFailurePersistence::Off)),
        ..Config::default()
    }
}

/// `len` pseudo-random bytes from `seed`, each from `alphabet` (any byte when empty).
/// Generating bytes from a seed keeps a case cheap (millions of cases are run).
pub fn fill(seed: u64, len: usize, alphabet: &[u8]) -> Vec<u8> {
    let mut x = seed;
    (0..len)
        .map(|_| {
            x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let z = (x ^ (x >> 31)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            let z = (z ^ (z >> 29)) as usize;
            match alphabet.len() {
                0 => z as u8,
                n => alphabet[z % n],
            }
        })
        .collect()
}

/// Up to `max` seeded arbitrary bytes.
pub fn junk(max: usize) -> impl Strategy<Value = Vec<u8>> {
    (0..max, any::<u64>()).prop_map(|(n, seed)| fill(seed, n, &[]))
}

/// Up to `max` cut points (any values: `cut` brings them into range).
pub fn cuts(max: usize) -> impl Strategy<Value = Vec<usize>> {
    proptest::collection::vec(any::<usize>(), 0..max)
}

/// `data` cut at the given points, in order: the reads a connection would see.
pub fn cut<'a>(data: &'a [u8], cuts: &[usize]) -> Vec<&'a [u8]> {
    let mut cuts: Vec<usize> = cuts.iter().map(|c| c % (data.len() + 1)).collect();
    cuts.sort_unstable();
    let mut parts = Vec::with_capacity(cuts.len() + 1);
    let mut at = 0;
    for c in cuts.into_iter().chain([data.len()]) {
        parts.push(&data[at..c]);
        at = c;
    }
    parts
}

/// Up to six edits: (where, what: 0 overwrite / 1 insert / 2 delete, byte).
pub fn edits() -> impl Strategy<Value = Vec<(usize, u8, u8)>> {
    proptest::collection::vec((any::<usize>(), 0u8..3, any::<u8>()), 0..6)
}

/// Apply `edits` to `data`, then append `junk`: a message made hostile.
pub fn mutate(data: &mut Vec<u8>, edits: &[(usize, u8, u8)], junk: &[u8]) {
    for &(at, op, b) in edits {
        let at = at % (data.len() + 1);
        match op {
            0 if at < data.len() => data[at] = b,
            1 => data.insert(at, b),
            _ if at < data.len() => {
                data.remove(at);
            }
            _ => {}
        }
    }
    data.extend_from_slice(junk);
}

/// The three split properties both parsers have, over the includer's `pipeline()` (a
/// strategy of messages), `concat`, `split(data, cuts)` and `whole(data)`: a valid stream
/// cut at random points parses as it does whole; so does a hostile one (edited, junk
/// appended), and so does plain junk; and small streams split in two at every byte boundary.
macro_rules! split_properties {
    ($cases:expr) => {
        proptest! {
            #![proptest_config(config($cases))]

            #[test]
            fn split_at_random_points_equals_whole(rs in pipeline(), cuts in cuts(12)) {
                let data = concat(&rs);
                prop_assert_eq!(split(&data, &cuts), whole(&data));
            }

            #[test]
            fn hostile_bytes_split_equals_whole(
                rs in pipeline(),
                edits in edits(),
                junk in junk(200),
                cuts in cuts(8),
            ) {
                let mut data = concat(&rs);
                mutate(&mut data, &edits, &junk);
                prop_assert_eq!(split(&data, &cuts), whole(&data));
                prop_assert_eq!(split(&junk, &cuts), whole(&junk));
            }
        }

        proptest! {
            #![proptest_config(config($cases / 4))]

            /// Small streams split in two at every byte boundary parse as they do whole.
            #[test]
            fn split_at_every_boundary_equals_whole(rs in pipeline()) {
                let data = concat(&rs);
                let data = &data[..data.len().min(600)];
                let want = whole(data);
                for i in 0..=data.len() {
                    prop_assert_eq!(&split(data, &[i]), &want, "split at {}", i);
                }
            }
        }
    };
}
