//! Which compiler compiles: the choice a caller makes ([`CompilerChoice`], `HIPJIT_COMPILER`)
//! and, for [`CompilerChoice::Auto`], the rule that picks between a process compiler (hipcc,
//! nvcc) and an in-process one (hipRTC, NVRTC) without ever switching silently: every
//! [`Selection`] carries the reason, which hipjit reports with the result.
//!
//! # The rule of `Auto`
//! Auto takes an in-process compiler only where (a) the parity corpus proves it gives the
//! process compiler's code for that target, and (b) the source is one it compiles. Step by
//! step, for the platform of the targets:
//! 1. A source holding a NUL byte goes to the process compiler (the in-process compilers take
//!    C strings); with none, it is an error.
//! 2. No process compiler found: the in-process compiler. A compiler set explicitly that
//!    cannot be used (`HIPJIT_HIPCC`, `HIPJIT_NVCC`, `HIPJIT_HIPRTC_LIBRARY`,
//!    `HIPJIT_NVRTC_LIBRARY`, [`super::CompilerConfig::hipcc`], [`super::CompilerConfig::nvcc`]:
//!    missing, not executable, refused) is not "not found": it is an error naming the setting,
//!    before this rule is applied (`hipjit::jit`'s compilers).
//! 3. Both found: (a) the in-process compiler only where the parity test (tests/real/parity.rs,
//!    tests/it/nvrtc_parity.rs) proved it produces the process compiler's code for this
//!    in-process compiler's major.minor version and target family ([`PARITY`]; a version with
//!    no row, or whose minor version the library does not tell, is untested), and only for what
//!    the test compared (one target, no
//!    dumps, the CU/WGP mode pinned on gfx10 and later, `-O3` and includes NVRTC can report on
//!    NVIDIA: `hipjit::jit`'s compilers); elsewhere the process compiler.
//! 4. (b) What the source needs, where it can be known beforehand: host code or a header of
//!    the C/C++ standard library or the system ([`super::source_scan`]) sends it to the process
//!    compiler ([`source_needs_process`]), the reason naming what was found.
//! 5. Where it cannot (a header that is neither HIP's own nor a system header, whose own
//!    includes are not read; a source only the in-process compiler's own headers break), the
//!    in-process compiler is tried; when it fails, the process compiler compiles the request
//!    instead ([`retried`]), and the failure is remembered per (source, options), per process
//!    and per user, so that later compiles, in fresh processes too, go straight to the process
//!    compiler ([`remembered`]). A source that is the user's error fails in the process
//!    compiler too, and that failure, with its diagnostics, is what the caller gets.

pub use super::kind::{BadCompilerChoice, CompilerChoice};

/// The variable choosing the compiler: `auto`, `hipcc`, `hiprtc`, `nvcc` or `nvrtc`
/// ([`CompilerChoice`]'s spellings).
pub const COMPILER_ENV: &str = "HIPJIT_COMPILER";

/// Whether the in-process compiler or the process compiler compiles.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Side {
    /// hipcc or nvcc.
    Process,
    /// hipRTC or NVRTC.
    InProcess,
}

/// What [`auto`] picked and why, in words a user reads (`hipjit compile --json` reports it as
/// `compiler.reason`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Selection {
    /// The side picked.
    pub side: Side,
    /// Why.
    pub reason: String,
}

/// An in-process compiler's version as Auto's rule takes it: HIP's `major.minor` for hipRTC
/// (from the library's file name, else `hipRuntimeGetVersion` of the runtime that holds it:
/// [`crate::compiler::hiprtc::HipRtc::hip_version`]), CUDA's for NVRTC (`nvrtcVersion`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct RtcVersion {
    /// The major version (0 when the library did not tell).
    pub major: u32,
    /// The minor version; `None` when the library did not tell (no parity row matches it).
    pub minor: Option<u32>,
}

impl std::fmt::Display for RtcVersion {
    /// `6.4`, or `6.?` when the minor version is not known.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.minor {
            Some(minor) => write!(f, "{}.{minor}", self.major),
            None => write!(f, "{}.?", self.major),
        }
    }
}

/// One row of the parity table: an in-process compiler of a `major.minor` version, a target
/// family, the toolchains the parity test compared and what it found.
///
/// The process compiler's version the row was measured against is stated in `evidence` but not
/// matched: Auto decides before the process compiler is run or fingerprinted (only its program
/// is found; its version is read when it is taken, `hipcc --version` on a miss), and reading it
/// for every decision would cost a process on each cold start. So a measured in-process
/// version beside a process compiler of another release is taken on the row's word: a known
/// limit of the table, which `evidence` makes visible in every reason that cites it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ParityRow {
    /// `hipRTC` or `NVRTC`.
    pub compiler: &'static str,
    /// The library's major version (HIP's for hipRTC: the soname's `.so.N`, 5 for the hipRTC
    /// inside `libamdhip64.so.5`; CUDA's for NVRTC).
    pub major: u32,
    /// The library's minor version (HIP's for hipRTC, CUDA's for NVRTC): the row holds for
    /// `major.minor` only.
    pub minor: u32,
    /// The target family: `gfx9`, `gfx10`, `gfx11`, `gfx12` or `sm`.
    pub family: &'static str,
    /// Whether every kernel of the corpus was identical (metadata, descriptor, machine code).
    pub identical: bool,
    /// The toolchains and targets compared, and the finding.
    pub evidence: &'static str,
}

/// The parity test's findings (tests/real/parity.rs, tests/it/nvrtc_parity.rs; docs/compilers.md's
/// parity table). A (compiler, major.minor, family) absent here was not tested: `Auto` does not
/// take the in-process compiler for it when the process compiler exists (hipRTC 5.4 of the
/// pytorch-triton-rocm 2.1.0 wheel, for one, does not give hipcc 5.2.3's code for gfx90a).
pub const PARITY: &[ParityRow] = &[
    ParityRow {
        compiler: "hipRTC",
        major: 6,
        minor: 4,
        family: "gfx9",
        identical: true,
        evidence: "hipRTC 6.4.3 and hipcc 7.0.2 give identical code for gfx90a and gfx942",
    },
    ParityRow {
        compiler: "hipRTC",
        major: 6,
        minor: 4,
        family: "gfx11",
        identical: true,
        evidence: "hipRTC 6.4.3 and hipcc 7.0.2 give identical code for gfx1100 (CU mode pinned)",
    },
    ParityRow {
        compiler: "hipRTC",
        major: 5,
        minor: 2,
        family: "gfx9",
        identical: true,
        evidence: "hipRTC 5.2.3 with hipcc's device libraries and one optimisation pipeline \
                   (hiprtc::hip5_parity_options) and hipcc 5.2.3 give identical code for gfx90a \
                   at -O3 and -O2",
    },
    ParityRow {
        compiler: "hipRTC",
        major: 5,
        minor: 2,
        family: "gfx10",
        identical: false,
        evidence: "hipRTC 5.2.3 generates gfx1030 code in CU mode whatever it is asked: identical \
                   to hipcc 5.2.3's with -mcumode and hiprtc::hip5_parity_options, WGP mode \
                   (-mno-cumode, hipcc's default) not reproducible",
    },
    ParityRow {
        compiler: "NVRTC",
        major: 13,
        minor: 0,
        family: "sm",
        identical: false,
        evidence:
            "NVRTC 13.0.88 and nvcc 13.0.88 (PyPI) give different SASS for 6 of the corpus's \
                   23 kernels on sm_80 (4 with other register counts) and 2 on sm_90",
    },
    ParityRow {
        compiler: "NVRTC",
        major: 13,
        minor: 5,
        family: "sm",
        identical: true,
        evidence: "NVRTC 13.5 and nvcc 13.5 give identical SASS for sm_80 and sm_90",
    },
];

/// The target family of an AMDGPU processor (`gfx90a` -> `gfx9`, `gfx1030` -> `gfx10`) or `sm`
/// for an SM architecture; `None` for anything else.
pub fn family(processor: &str) -> Option<&'static str> {
    if processor.starts_with("sm_") {
        return Some("sm");
    }
    let digits = processor.strip_prefix("gfx")?;
    let major = match digits.len() {
        3 => &digits[..1],
        4 => &digits[..2],
        _ => return None,
    };
    Some(match major {
        "9" => "gfx9",
        "10" => "gfx10",
        "11" => "gfx11",
        "12" => "gfx12",
        _ => return None,
    })
}

/// The parity row for `compiler` (`hipRTC` or `NVRTC`) of `version` on `processor`; `None`
/// when untested (a minor version not known is untested).
pub fn parity(compiler: &str, version: RtcVersion, processor: &str) -> Option<&'static ParityRow> {
    let family = family(processor)?;
    let minor = version.minor?;
    PARITY.iter().find(|r| {
        r.compiler == compiler && r.major == version.major && r.minor == minor && r.family == family
    })
}

/// [`CompilerChoice::Auto`]'s rule (see the module documentation). `in_process` names the
/// in-process compiler found (`hipRTC`/`NVRTC` and its version), `process` the process
/// compiler found (`hipcc`/`nvcc`), `processor` the target (`gfx90a`, `sm_90`).
///
/// Errors: the reason nothing can compile (neither found; a NUL byte with no process compiler).
pub fn auto(
    in_process: Option<(&str, RtcVersion)>,
    process: Option<&str>,
    processor: &str,
    source_has_nul: bool,
) -> Result<Selection, String> {
    let pick = |side, reason: String| Ok(Selection { side, reason });
    match (in_process, process) {
        (None, None) => Err("neither a process compiler nor an in-process compiler was found".to_owned()),
        (_, Some(p)) if source_has_nul => pick(
            Side::Process,
            format!("the source holds a NUL byte, which the in-process compilers (C strings) cannot take: {p}"),
        ),
        (Some((c, _)), None) if source_has_nul => Err(format!(
            "the source holds a NUL byte, which {c} (C strings) cannot take, and no process compiler was found"
        )),
        (Some((c, version)), None) => pick(Side::InProcess, format!("{c} {version}: no process compiler was found")),
        (None, Some(p)) => pick(Side::Process, format!("{p}: no in-process compiler was found")),
        (Some((c, version)), Some(p)) => match parity(c, version, processor) {
            Some(row) if row.identical => pick(
                Side::InProcess,
                format!("{c} {version} produces {p}'s code for {processor} ({})", row.evidence),
            ),
            Some(row) => pick(
                Side::Process,
                format!("{p}: {c} {version} does not produce its code for {processor} ({})", row.evidence),
            ),
            None => pick(
                Side::Process,
                format!("{p}: parity of {c} {version} with {p} is untested for {processor}"),
            ),
        },
    }
}

/// Step 4 of the rule: the reason the source needs the process compiler `process` rather than
/// the in-process `in_process`, when [`super::source_scan::needs_process`] found host code or
/// a system header in it (`found`).
pub fn source_needs_process(
    found: Option<&super::source_scan::Found>,
    in_process: &str,
    process: &str,
) -> Option<String> {
    use super::source_scan::FoundKind;
    let found = found?;
    Some(match found.kind {
        FoundKind::SystemHeader => format!(
            "{process}: the source has {}, which {in_process} would compile against its own \
             built-in headers, not the host's",
            found.describe()
        ),
        _ => format!(
            "{process}: the source holds {}, and {in_process} compiles device code only",
            found.describe()
        ),
    })
}

/// Step 5 of the rule, at the failure: the reason the process compiler `process` compiled a
/// request the in-process `in_process` (of `version`) failed on; `error` says how it failed
/// (its first error), `unread` the header whose includes the scan could not see, if any.
pub fn retried(
    in_process: &str,
    version: RtcVersion,
    process: &str,
    error: &str,
    unread: Option<&super::source_scan::Found>,
) -> String {
    format!(
        "{process}: {in_process} {version} failed on this source with these options ({error}){}, \
         so {process} compiled it; the failure is remembered for this source and options",
        unread.map_or(String::new(), |f| format!(
            "; the source has {}",
            f.describe()
        ))
    )
}

/// Step 5 of the rule, later: the reason the process compiler `process` compiles a request
/// the in-process `in_process` (of `version`) failed on before (`error`), as remembered.
pub fn remembered(in_process: &str, version: RtcVersion, process: &str, error: &str) -> String {
    format!(
        "{process}: {in_process} {version} failed on this source with these options before \
         ({error}; remembered per user)"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn families_of_targets() {
        assert_eq!(family("gfx90a"), Some("gfx9"));
        assert_eq!(family("gfx942"), Some("gfx9"));
        assert_eq!(family("gfx1030"), Some("gfx10"));
        assert_eq!(family("gfx1151"), Some("gfx11"));
        assert_eq!(family("gfx1201"), Some("gfx12"));
        assert_eq!(family("sm_90"), Some("sm"));
        assert_eq!(family("gfx"), None);
        assert_eq!(family("x86"), None);
    }

    fn v(major: u32, minor: u32) -> RtcVersion {
        RtcVersion {
            major,
            minor: Some(minor),
        }
    }

    #[test]
    fn auto_takes_the_in_process_compiler_only_where_parity_was_proven() {
        let s = auto(Some(("hipRTC", v(6, 4))), Some("hipcc"), "gfx942", false).unwrap();
        assert_eq!(s.side, Side::InProcess, "{}", s.reason);
        assert!(
            s.reason
                .starts_with("hipRTC 6.4 produces hipcc's code for gfx942"),
            "{}",
            s.reason
        );
        let s = auto(Some(("hipRTC", v(5, 2))), Some("hipcc"), "gfx90a", false).unwrap();
        assert_eq!(s.side, Side::InProcess, "{}", s.reason);
        let s = auto(Some(("hipRTC", v(5, 2))), Some("hipcc"), "gfx1030", false).unwrap();
        assert_eq!(s.side, Side::Process);
        assert!(s.reason.contains("WGP mode"), "{}", s.reason);
        let s = auto(Some(("hipRTC", v(7, 0))), Some("hipcc"), "gfx90a", false).unwrap();
        assert_eq!(s.side, Side::Process);
        assert!(s.reason.contains("untested"), "{}", s.reason);
        let s = auto(Some(("NVRTC", v(13, 5))), Some("nvcc"), "sm_90", false).unwrap();
        assert_eq!(s.side, Side::InProcess);
        // CUDA 13.0's NVRTC, measured against its nvcc: disproven, nvcc with the evidence.
        let s = auto(Some(("NVRTC", v(13, 0))), Some("nvcc"), "sm_90", false).unwrap();
        assert_eq!(s.side, Side::Process);
        assert!(
            s.reason
                .starts_with("nvcc: NVRTC 13.0 does not produce its code for sm_90 (NVRTC 13.0.88"),
            "{}",
            s.reason
        );
    }

    /// The rows hold for the versions measured: hipRTC 5.4 (the pytorch-triton-rocm 2.1.0
    /// wheel's) does not give hipcc 5.2.3's code for gfx90a, though 5.2 does; another minor
    /// version of 6 or 13 is untested as well, and so is a minor version the library did not
    /// tell.
    #[test]
    fn auto_holds_a_parity_row_to_its_minor_version() {
        let s = auto(Some(("hipRTC", v(5, 4))), Some("hipcc"), "gfx90a", false).unwrap();
        assert_eq!(s.side, Side::Process, "{}", s.reason);
        assert_eq!(
            s.reason,
            "hipcc: parity of hipRTC 5.4 with hipcc is untested for gfx90a"
        );
        for (c, version, p, processor) in [
            ("hipRTC", v(6, 2), "hipcc", "gfx942"),
            ("hipRTC", v(6, 5), "hipcc", "gfx1100"),
            ("NVRTC", v(13, 1), "nvcc", "sm_90"),
            ("NVRTC", v(12, 5), "nvcc", "sm_80"),
        ] {
            let s = auto(Some((c, version)), Some(p), processor, false).unwrap();
            assert_eq!(s.side, Side::Process, "{}", s.reason);
            assert!(
                s.reason
                    .contains(&format!("{c} {version} with {p} is untested")),
                "{}",
                s.reason
            );
        }
        let unknown = RtcVersion {
            major: 6,
            minor: None,
        };
        let s = auto(Some(("hipRTC", unknown)), Some("hipcc"), "gfx942", false).unwrap();
        assert_eq!(s.side, Side::Process, "{}", s.reason);
        assert!(
            s.reason.contains("hipRTC 6.? with hipcc is untested"),
            "{}",
            s.reason
        );
        let s = auto(Some(("hipRTC", v(6, 4))), Some("hipcc"), "gfx90a", false).unwrap();
        assert_eq!(s.side, Side::InProcess, "{}", s.reason);
    }

    #[test]
    fn auto_without_a_process_compiler_or_with_a_nul_byte() {
        let s = auto(Some(("hipRTC", v(5, 4))), None, "gfx90a", false).unwrap();
        assert_eq!(s.side, Side::InProcess);
        assert!(
            s.reason.contains("hipRTC 5.4: no process compiler"),
            "{}",
            s.reason
        );
        let s = auto(Some(("hipRTC", v(6, 4))), Some("hipcc"), "gfx90a", true).unwrap();
        assert_eq!(s.side, Side::Process);
        assert!(s.reason.contains("NUL byte"), "{}", s.reason);
        assert!(auto(Some(("hipRTC", v(6, 4))), None, "gfx90a", true)
            .unwrap_err()
            .contains("NUL byte"));
        assert!(auto(None, None, "gfx90a", false).is_err());
    }

    #[test]
    fn host_code_and_system_headers_need_the_process_compiler_and_the_reason_names_them() {
        use crate::compiler::source_scan::scan;
        let host = scan(b"__global__ void k() {}\nint main() { hipMalloc(0, 4); }\n");
        let r = source_needs_process(host.needs_process.as_ref(), "hipRTC", "hipcc").unwrap();
        assert!(
            r.starts_with("hipcc: ") && r.contains("host code (`int main(` at line 2)"),
            "{r}"
        );
        let header = scan(b"#include <vector>\n__global__ void k() {}\n");
        let r = source_needs_process(header.needs_process.as_ref(), "NVRTC", "nvcc").unwrap();
        assert!(
            r.starts_with("nvcc: ") && r.contains("`#include <vector>` (line 1)"),
            "{r}"
        );
        let unknown = scan(b"#include \"util.hpp\"\n__global__ void k() {}\n");
        assert_eq!(
            source_needs_process(unknown.needs_process.as_ref(), "hipRTC", "hipcc"),
            None
        );
        let r = retried(
            "hipRTC",
            v(6, 4),
            "hipcc",
            "error: x",
            unknown.other_header.as_ref(),
        );
        assert!(
            r.contains("hipRTC 6.4 failed on this source") && r.contains("\"util.hpp\""),
            "{r}"
        );
        assert!(remembered("hipRTC", v(6, 4), "hipcc", "error: x").contains("6.4 failed"));
    }
}
