//! Stable replay of the fuzz corpus (fuzz/README.md): the reader returns, never panics, on the
//! seed corpus (tests/data/code-objects), on whatever the fuzzer found locally
//! (fuzz/corpus/code_object, fuzz/artifacts/code_object), on fuzz regressions kept in
//! tests/data/code-objects/fuzz-regressions, and on every truncation and single-bit flip of a
//! small real code object plus truncations and header bit flips of real bundles.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};

use hipjit::code_object::CodeObject;
use hipjit::target_id::TargetId;

const TARGETS: &[&str] = &["gfx90a", "gfx942:sramecc+:xnack-", "gfx1100", "gfx1030"];

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn files_in(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut files: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_file())
        .collect();
    files.sort();
    files
}

/// What the fuzz target does with one input (fuzz/fuzz_targets/code_object.rs).
fn exercise(data: &[u8], targets: &[TargetId]) {
    let read = |co: CodeObject| {
        let _ = co.target_id().to_string();
        let _ = co.code_object_version();
        for k in co.kernels() {
            let _ = co.kernel(&k.name);
        }
        let _ = co.kernel("scale");
        let _ = co.kernel("scale(double*, double)");
    };
    if let Ok(co) = CodeObject::from_bytes(data, None) {
        read(co);
    }
    for t in targets {
        if let Ok(co) = CodeObject::from_bytes(data, Some(t)) {
            read(co);
        }
    }
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = TargetId::parse(text);
    }
}

/// Runs every input, returning a description of each that panicked.
fn replay<'a>(inputs: impl Iterator<Item = (String, Vec<u8>)> + 'a) -> (usize, Vec<String>) {
    let targets: Vec<TargetId> = TARGETS
        .iter()
        .map(|t| TargetId::parse(t).unwrap())
        .collect();
    let mut count = 0;
    let mut panics = Vec::new();
    for (label, data) in inputs {
        count += 1;
        if catch_unwind(AssertUnwindSafe(|| exercise(&data, &targets))).is_err() {
            panics.push(label);
        }
    }
    (count, panics)
}

fn read(name: &str) -> Vec<u8> {
    let path = root().join("tests/data/code-objects").join(name);
    std::fs::read(&path).unwrap_or_else(|e| {
        panic!(
            "{}: {e}; rebuild with tests/data/code-objects/regen.sh",
            path.display()
        )
    })
}

fn truncations(name: &'static str, data: Vec<u8>) -> impl Iterator<Item = (String, Vec<u8>)> {
    (0..data.len()).map(move |len| (format!("{name} cut to {len} bytes"), data[..len].to_vec()))
}

fn bit_flips(
    name: &'static str,
    data: Vec<u8>,
    upto: usize,
) -> impl Iterator<Item = (String, Vec<u8>)> {
    let upto = upto.min(data.len());
    (0..upto * 8).map(move |bit| {
        let mut d = data.clone();
        d[bit / 8] ^= 1 << (bit % 8);
        (format!("{name} with bit {bit} flipped"), d)
    })
}

#[test]
fn the_seed_corpus_and_local_fuzz_findings_replay_without_panic() {
    let r = root();
    let mut files = files_in(&r.join("tests/data/code-objects"));
    files.extend(files_in(
        &r.join("tests/data/code-objects/fuzz-regressions"),
    ));
    files.extend(files_in(&r.join("fuzz/corpus/code_object")));
    files.extend(files_in(&r.join("fuzz/artifacts/code_object")));
    assert!(
        files
            .iter()
            .any(|f| f.extension().is_some_and(|e| e == "hsaco")),
        "no seed code objects in tests/data/code-objects: run its regen.sh"
    );
    // A running fuzzer replaces files of its corpus while this reads it: one that vanished
    // meanwhile is skipped.
    let inputs = files.into_iter().filter_map(|f| {
        let data = std::fs::read(&f).ok()?;
        Some((f.display().to_string(), data))
    });
    let (count, panics) = replay(inputs);
    assert!(
        panics.is_empty(),
        "{} of {count} inputs panicked: {panics:#?}",
        panics.len()
    );
}

#[test]
fn every_truncation_and_bit_flip_of_a_small_code_object_returns() {
    let elf = read("single-gfx90a.hsaco");
    let len = elf.len();
    let inputs = truncations("single-gfx90a.hsaco", elf.clone()).chain(bit_flips(
        "single-gfx90a.hsaco",
        elf,
        len,
    ));
    let (count, panics) = replay(inputs);
    assert_eq!(count, len * 9);
    assert!(
        panics.is_empty(),
        "{} of {count} inputs panicked: {panics:#?}",
        panics.len()
    );
}

#[test]
fn truncations_and_header_bit_flips_of_bundles_return() {
    let hipfb = read("kernels-gfx90a-gfx1030.hipfb");
    let ccob = read("kernels-gfx942-gfx1100-v3.ccob");
    // The bundle's entry table and the CCOB header plus the start of its zstd frame.
    let inputs = bit_flips("kernels-gfx90a-gfx1030.hipfb", hipfb.clone(), 200)
        .chain(bit_flips(
            "kernels-gfx942-gfx1100-v3.ccob",
            ccob.clone(),
            64,
        ))
        .chain(truncations("kernels-gfx942-gfx1100-v3.ccob", ccob))
        .chain((0..hipfb.len()).step_by(97).map(move |len| {
            (
                format!("kernels-gfx90a-gfx1030.hipfb cut to {len} bytes"),
                hipfb[..len].to_vec(),
            )
        }));
    let (count, panics) = replay(inputs);
    assert!(count > 5000, "{count}");
    assert!(
        panics.is_empty(),
        "{} of {count} inputs panicked: {panics:#?}",
        panics.len()
    );
}

/// xorshift64: a fixed, dependency-free sequence so that every run mutates the same way.
struct XorShift(u64);

impl XorShift {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

/// Seeded random mutations of the small seeds (byte sets, boundary integers written over
/// fields, truncations): 4000 inputs by default, `HIPJIT_MUTATIONS=N` for a longer soak on
/// stable (1.2 million ran clean when this was written).
#[test]
fn seeded_random_mutations_of_the_seeds_return() {
    let mut seeds: Vec<(String, Vec<u8>)> = files_in(&root().join("tests/data/code-objects"))
        .into_iter()
        .filter(|p| p.extension().is_some_and(|e| e != "sh" && e != "hip"))
        .map(|p| (p.display().to_string(), std::fs::read(&p).unwrap()))
        .filter(|(_, d)| d.len() < 40_000)
        .collect();
    seeds.sort();
    assert!(
        seeds.len() >= 10,
        "too few seeds: run tests/data/code-objects/regen.sh"
    );
    let count: usize = std::env::var("HIPJIT_MUTATIONS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(4000);
    let boundary: [u64; 8] = [0, 1, 0xff, 0xffff, 0xffff_ffff, u64::MAX, 1 << 31, 1 << 63];
    let mut rng = XorShift(0x9e37_79b9_7f4a_7c15);
    let inputs = (0..count).map(move |i| {
        let (name, seed) = &seeds[rng.below(seeds.len())];
        let mut d = seed.clone();
        for _ in 0..1 + rng.below(8) {
            match rng.below(4) {
                0 => {
                    let at = rng.below(d.len());
                    d[at] = rng.next() as u8;
                }
                1 if d.len() > 8 => {
                    let at = rng.below(d.len() - 8);
                    let width = [1, 2, 4, 8][rng.below(4)];
                    let value = boundary[rng.below(boundary.len())].to_le_bytes();
                    d[at..at + width].copy_from_slice(&value[..width]);
                }
                2 => {
                    let len = rng.below(d.len()).max(1);
                    d.truncate(len);
                }
                _ => {
                    let at = rng.below(d.len());
                    d[at] ^= 1 << rng.below(8);
                }
            }
        }
        (format!("mutation {i} of {name}"), d)
    });
    let (n, panics) = replay(inputs);
    assert_eq!(n, count);
    assert!(
        panics.is_empty(),
        "{} of {n} inputs panicked: {panics:#?}",
        panics.len()
    );
}
