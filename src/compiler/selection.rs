//! Which compiler compiles: the choice a caller makes ([`CompilerChoice`], `HIPJIT_COMPILER`)
//! and, for [`CompilerChoice::Auto`], the rule that picks between a process compiler (hipcc,
//! nvcc) and an in-process one (hipRTC, NVRTC) without ever switching silently: every
//! [`Selection`] carries the reason, which hipjit reports with the result.
//!
//! # The rule of `Auto`
//! 1. A source holding a NUL byte goes to the process compiler (the in-process compilers take
//!    C strings); with none, it is an error.
//! 2. No process compiler found: the in-process compiler. A compiler set explicitly that
//!    cannot be used (`HIPJIT_HIPCC`, `HIPJIT_NVCC`, `HIPJIT_HIPRTC_LIBRARY`,
//!    `HIPJIT_NVRTC_LIBRARY`, [`super::CompilerConfig::hipcc`], [`super::CompilerConfig::nvcc`]:
//!    missing, not executable, refused) is not "not found": it is an error naming the setting,
//!    before this rule is applied (`hipjit::jit`'s compilers).
//! 3. Both found: the in-process compiler only where the parity test (tests/real/parity.rs,
//!    tests/it/nvrtc_parity.rs) proved it produces the process compiler's code on this toolchain
//!    and target family ([`PARITY`]); elsewhere the process compiler.

use std::fmt;
use std::str::FromStr;

/// The variable choosing the compiler: `auto`, `hipcc`, `hiprtc`, `nvcc` or `nvrtc`.
pub const COMPILER_ENV: &str = "HIPJIT_COMPILER";

/// The compiler a caller asks for.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum CompilerChoice {
    /// hipjit picks ([`auto`]), and says why.
    #[default]
    Auto,
    /// `hipcc`, a process per compile (AMD).
    Hipcc,
    /// hipRTC, in process (AMD).
    HipRtc,
    /// `nvcc`, a process per compile (NVIDIA).
    Nvcc,
    /// NVRTC, in process (NVIDIA).
    Nvrtc,
}

impl CompilerChoice {
    /// The spelling `HIPJIT_COMPILER` and `hipjit compile --compiler` take.
    pub fn as_str(self) -> &'static str {
        match self {
            CompilerChoice::Auto => "auto",
            CompilerChoice::Hipcc => "hipcc",
            CompilerChoice::HipRtc => "hiprtc",
            CompilerChoice::Nvcc => "nvcc",
            CompilerChoice::Nvrtc => "nvrtc",
        }
    }
}

impl fmt::Display for CompilerChoice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A spelling that names no compiler.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0:?} is not a compiler choice (auto, hipcc, hiprtc, nvcc or nvrtc)")]
pub struct BadCompilerChoice(pub String);

impl FromStr for CompilerChoice {
    type Err = BadCompilerChoice;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Ok(match s.to_ascii_lowercase().as_str() {
            "auto" => CompilerChoice::Auto,
            "hipcc" => CompilerChoice::Hipcc,
            "hiprtc" => CompilerChoice::HipRtc,
            "nvcc" => CompilerChoice::Nvcc,
            "nvrtc" => CompilerChoice::Nvrtc,
            _ => return Err(BadCompilerChoice(s.to_owned())),
        })
    }
}

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

/// One row of the parity table: an in-process compiler of a major version, a target family,
/// the toolchains the parity test compared and what it found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ParityRow {
    /// `hipRTC` or `NVRTC`.
    pub compiler: &'static str,
    /// The library's major version (HIP's for hipRTC: the soname's `.so.N`, 5 for the hipRTC
    /// inside `libamdhip64.so.5`; CUDA's for NVRTC).
    pub major: u32,
    /// The target family: `gfx9`, `gfx10`, `gfx11`, `gfx12` or `sm`.
    pub family: &'static str,
    /// Whether every kernel of the corpus was identical (metadata, descriptor, machine code).
    pub identical: bool,
    /// The toolchains and targets compared, and the finding.
    pub evidence: &'static str,
}

/// The parity test's findings (tests/real/parity.rs, tests/it/nvrtc_parity.rs; the README's parity
/// table). A (compiler, major, family) absent here was not tested: `Auto` does not take the
/// in-process compiler for it when the process compiler exists.
pub const PARITY: &[ParityRow] = &[
    ParityRow {
        compiler: "hipRTC",
        major: 6,
        family: "gfx9",
        identical: true,
        evidence: "hipRTC 6.4.3 and hipcc 7.0.2 give identical code for gfx90a and gfx942",
    },
    ParityRow {
        compiler: "hipRTC",
        major: 6,
        family: "gfx11",
        identical: true,
        evidence: "hipRTC 6.4.3 and hipcc 7.0.2 give identical code for gfx1100 (CU mode pinned)",
    },
    ParityRow {
        compiler: "hipRTC",
        major: 5,
        family: "gfx9",
        identical: true,
        evidence: "hipRTC 5.2.3 with hipcc's device libraries and one optimisation pipeline \
                   (hiprtc::hip5_parity_options) and hipcc 5.2.3 give identical code for gfx90a \
                   at -O3 and -O2",
    },
    ParityRow {
        compiler: "hipRTC",
        major: 5,
        family: "gfx10",
        identical: false,
        evidence: "hipRTC 5.2.3 generates gfx1030 code in CU mode whatever it is asked: identical \
                   to hipcc 5.2.3's with -mcumode and hiprtc::hip5_parity_options, WGP mode \
                   (-mno-cumode, hipcc's default) not reproducible",
    },
    ParityRow {
        compiler: "NVRTC",
        major: 13,
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

/// The parity row for `compiler` (`hipRTC` or `NVRTC`) of major version `major` on `processor`.
pub fn parity(compiler: &str, major: u32, processor: &str) -> Option<&'static ParityRow> {
    let family = family(processor)?;
    PARITY
        .iter()
        .find(|r| r.compiler == compiler && r.major == major && r.family == family)
}

/// [`CompilerChoice::Auto`]'s rule (see the module documentation). `in_process` names the
/// in-process compiler found (`hipRTC`/`NVRTC` and its major version), `process` the process
/// compiler found (`hipcc`/`nvcc`), `processor` the target (`gfx90a`, `sm_90`).
///
/// Errors: the reason nothing can compile (neither found; a NUL byte with no process compiler).
pub fn auto(
    in_process: Option<(&str, u32)>,
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
        (Some((c, major)), None) => pick(Side::InProcess, format!("{c} {major}.x: no process compiler was found")),
        (None, Some(p)) => pick(Side::Process, format!("{p}: no in-process compiler was found")),
        (Some((c, major)), Some(p)) => match parity(c, major, processor) {
            Some(row) if row.identical => pick(
                Side::InProcess,
                format!("{c} {major}.x produces {p}'s code for {processor} ({})", row.evidence),
            ),
            Some(row) => pick(
                Side::Process,
                format!("{p}: {c} {major}.x does not produce its code for {processor} ({})", row.evidence),
            ),
            None => pick(
                Side::Process,
                format!("{p}: parity of {c} {major}.x with it is untested for {processor}"),
            ),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn choices_parse_in_any_case_and_refuse_the_rest() {
        assert_eq!("HipRTC".parse(), Ok(CompilerChoice::HipRtc));
        assert_eq!("auto".parse(), Ok(CompilerChoice::Auto));
        assert_eq!(
            "nvrtc".parse::<CompilerChoice>().map(|c| c.to_string()),
            Ok("nvrtc".to_owned())
        );
        assert_eq!(
            "clang".parse::<CompilerChoice>(),
            Err(BadCompilerChoice("clang".to_owned()))
        );
    }

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

    #[test]
    fn auto_takes_the_in_process_compiler_only_where_parity_was_proven() {
        let s = auto(Some(("hipRTC", 6)), Some("hipcc"), "gfx942", false).unwrap();
        assert_eq!(s.side, Side::InProcess, "{}", s.reason);
        let s = auto(Some(("hipRTC", 5)), Some("hipcc"), "gfx90a", false).unwrap();
        assert_eq!(s.side, Side::InProcess, "{}", s.reason);
        let s = auto(Some(("hipRTC", 5)), Some("hipcc"), "gfx1030", false).unwrap();
        assert_eq!(s.side, Side::Process);
        assert!(s.reason.contains("WGP mode"), "{}", s.reason);
        let s = auto(Some(("hipRTC", 7)), Some("hipcc"), "gfx90a", false).unwrap();
        assert_eq!(s.side, Side::Process);
        assert!(s.reason.contains("untested"), "{}", s.reason);
        let s = auto(Some(("NVRTC", 13)), Some("nvcc"), "sm_90", false).unwrap();
        assert_eq!(s.side, Side::InProcess);
    }

    #[test]
    fn auto_without_a_process_compiler_or_with_a_nul_byte() {
        let s = auto(Some(("hipRTC", 5)), None, "gfx90a", false).unwrap();
        assert_eq!(s.side, Side::InProcess);
        assert!(s.reason.contains("no process compiler"), "{}", s.reason);
        let s = auto(Some(("hipRTC", 6)), Some("hipcc"), "gfx90a", true).unwrap();
        assert_eq!(s.side, Side::Process);
        assert!(s.reason.contains("NUL byte"), "{}", s.reason);
        assert!(auto(Some(("hipRTC", 6)), None, "gfx90a", true)
            .unwrap_err()
            .contains("NUL byte"));
        assert!(auto(None, None, "gfx90a", false).is_err());
    }
}
