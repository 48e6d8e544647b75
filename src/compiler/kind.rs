//! The compilers hipjit drives, one enum ([`CompilerKind`]) that owns every fact that differs
//! per compiler and is not its backend's code: the spelling parsed and printed (the cache key's
//! `compiler-kind` field, `HIPJIT_COMPILER`, `hipjit compile --compiler`, the Python
//! package's `compiler=`), the name used in messages, the platform it compiles for, whether it
//! compiles in process, which flag rules apply to it ([`super::flags`]), and its code in the
//! hit memo's records ([`CompilerKind::wire_code`]). What the caller asks for is a
//! [`CompilerChoice`]: one of these, or `Auto`.
//!
//! Adding a compiler: its variant here with its facts, its backend's file, its arms in
//! [`super::backend`] (the one place a kind is turned into a compiler) and its module line in
//! `compiler/mod.rs`; docs/architecture.md, "Add a compiler backend".

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::safe::runtime::Platform;

/// Declares [`CompilerKind`] and [`CompilerKind::ALL`] from one list, so that no kind can be
/// missing from `ALL` (the JIT keeps a compiler slot per entry of it): the order of the list
/// is the order messages list the kinds in.
macro_rules! compiler_kinds {
    ($($(#[doc = $doc:literal])* $(#[cfg($cfg:meta)])* $kind:ident,)*) => {
        /// The kinds of compiler hipjit drives.
        ///
        /// The bytes each kind hashes into cache keys and memo names
        /// ([`CompilerKind::as_str`]) and writes into hit-memo records
        /// ([`CompilerKind::wire_code`]) never change: a cache written by an earlier hipjit
        /// still hits.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
        #[serde(rename_all = "lowercase")]
        #[non_exhaustive]
        pub enum CompilerKind {
            $($(#[doc = $doc])* $(#[cfg($cfg)])* $kind,)*
        }

        impl CompilerKind {
            /// Every kind, in the order messages list them.
            pub const ALL: &'static [CompilerKind] = &[$($(#[cfg($cfg)])* CompilerKind::$kind,)*];
        }
    };
}

compiler_kinds! {
    /// `hipcc` (AMD; a Perl script in 5.x, a program in 6.x/7.x) over clang, a process per
    /// compile (`hipcc`).
    Hipcc,
    /// hipRTC, the in-process HIP compiler (`libhiprtc` or `libamdhip64`; `hiprtc`).
    HipRtc,
    /// `nvcc` (HIP's NVIDIA platform), a process per compile (`nvcc`).
    Nvcc,
    /// NVRTC, the in-process CUDA compiler (`libnvrtc`; `nvrtc`).
    Nvrtc,
    /// The testing compiler (feature `testing`, `fake`): no toolchain; its output is its
    /// source, handed through unchanged, so a test hands it a code object as the source.
    #[cfg(feature = "testing")]
    Fake,
}

/// Which rules a compiler's extra flags are checked by, and how it spells the C++ standard
/// ([`super::flags`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FlagRules {
    /// clang's (hipcc, hipRTC).
    Clang,
    /// NVIDIA's front end's (nvcc, NVRTC).
    Nvidia,
}

impl CompilerKind {
    /// `hipcc`, `nvcc`, `hiprtc` or `nvrtc` (`fake` for the testing compiler): the text hashed
    /// into the key and memo names, and the spelling `HIPJIT_COMPILER`, `hipjit compile
    /// --compiler` and the Python package take ([`FromStr`], in any case).
    pub fn as_str(self) -> &'static str {
        match self {
            CompilerKind::Hipcc => "hipcc",
            CompilerKind::Nvcc => "nvcc",
            CompilerKind::HipRtc => "hiprtc",
            CompilerKind::Nvrtc => "nvrtc",
            #[cfg(feature = "testing")]
            CompilerKind::Fake => "fake",
        }
    }

    /// The compiler's name in messages: `hipcc`, `nvcc`, `hipRTC`, `NVRTC` (also its
    /// [`fmt::Display`]).
    pub fn name(self) -> &'static str {
        match self {
            CompilerKind::Hipcc => "hipcc",
            CompilerKind::Nvcc => "nvcc",
            CompilerKind::HipRtc => "hipRTC",
            CompilerKind::Nvrtc => "NVRTC",
            #[cfg(feature = "testing")]
            CompilerKind::Fake => "the fake compiler",
        }
    }

    /// The platform whose code it produces.
    pub fn platform(self) -> Platform {
        match self {
            CompilerKind::Hipcc | CompilerKind::HipRtc => Platform::Amd,
            CompilerKind::Nvcc | CompilerKind::Nvrtc => Platform::Nvidia,
            #[cfg(feature = "testing")]
            CompilerKind::Fake => Platform::Amd,
        }
    }

    /// Whether it compiles in this process (a library: hipRTC, NVRTC) rather than in a
    /// process of its own (hipcc, nvcc).
    pub fn in_process(self) -> bool {
        match self {
            CompilerKind::Hipcc | CompilerKind::Nvcc => false,
            CompilerKind::HipRtc | CompilerKind::Nvrtc => true,
            #[cfg(feature = "testing")]
            CompilerKind::Fake => true,
        }
    }

    /// Whether its search starts beside the HIP runtime library in use (hipRTC, which HIP 5.x
    /// ships inside `libamdhip64`): that runtime is then part of the context it was found in.
    pub fn found_beside_runtime(self) -> bool {
        self == CompilerKind::HipRtc
    }

    /// The rules its extra flags are checked by and its standard spelled with.
    pub fn flag_rules(self) -> FlagRules {
        match self {
            CompilerKind::Hipcc | CompilerKind::HipRtc => FlagRules::Clang,
            CompilerKind::Nvcc | CompilerKind::Nvrtc => FlagRules::Nvidia,
            #[cfg(feature = "testing")]
            CompilerKind::Fake => FlagRules::Clang,
        }
    }

    /// Whether it is listed where the choices are named to users (every kind but the testing
    /// compiler).
    pub fn listed(self) -> bool {
        #[cfg(feature = "testing")]
        if self == CompilerKind::Fake {
            return false;
        }
        true
    }

    /// Its code in a hit-memo record (`jit::hit_memo`): hipcc 1, nvcc 2, hipRTC 3, NVRTC 4
    /// (the testing compiler 250). Never reused for another kind.
    pub fn wire_code(self) -> u8 {
        match self {
            CompilerKind::Hipcc => 1,
            CompilerKind::Nvcc => 2,
            CompilerKind::HipRtc => 3,
            CompilerKind::Nvrtc => 4,
            #[cfg(feature = "testing")]
            CompilerKind::Fake => 250,
        }
    }

    /// The kind of hit-memo code `code` ([`CompilerKind::wire_code`]); `None` for a code no
    /// kind of this build has.
    pub fn from_wire_code(code: u8) -> Option<CompilerKind> {
        CompilerKind::ALL
            .iter()
            .copied()
            .find(|k| k.wire_code() == code)
    }
}

impl fmt::Display for CompilerKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The spellings of the choices users are offered, in order: `auto`, then each kind but
/// the testing compiler.
pub fn choice_names() -> Vec<&'static str> {
    let mut names: Vec<&str> = vec!["auto"];
    names.extend(
        CompilerKind::ALL
            .iter()
            .filter(|k| k.listed())
            .map(|k| k.as_str()),
    );
    names
}

/// The choices as listed to users: `auto, hipcc, hiprtc, nvcc or nvrtc`.
pub fn choices_listed() -> String {
    let mut names = choice_names();
    let last = names.pop().unwrap_or_default();
    format!("{} or {last}", names.join(", "))
}

/// A spelling that names no compiler.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0:?} is not a compiler choice ({choices})", choices = choices_listed())]
pub struct BadCompilerChoice(pub String);

impl FromStr for CompilerKind {
    type Err = BadCompilerChoice;
    /// The kind spelled `s` ([`CompilerKind::as_str`]), in any case.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        CompilerKind::ALL
            .iter()
            .copied()
            .find(|k| k.as_str().eq_ignore_ascii_case(s))
            .ok_or_else(|| BadCompilerChoice(s.to_owned()))
    }
}

/// The compiler a caller asks for: one kind, or `Auto`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum CompilerChoice {
    /// hipjit picks (`auto`), and says why.
    #[default]
    Auto,
    /// This compiler.
    Kind(CompilerKind),
}

#[allow(non_upper_case_globals)]
impl CompilerChoice {
    /// `hipcc`, a process per compile (AMD): `Kind(CompilerKind::Hipcc)`.
    pub const Hipcc: CompilerChoice = CompilerChoice::Kind(CompilerKind::Hipcc);
    /// hipRTC, in process (AMD): `Kind(CompilerKind::HipRtc)`.
    pub const HipRtc: CompilerChoice = CompilerChoice::Kind(CompilerKind::HipRtc);
    /// `nvcc`, a process per compile (NVIDIA): `Kind(CompilerKind::Nvcc)`.
    pub const Nvcc: CompilerChoice = CompilerChoice::Kind(CompilerKind::Nvcc);
    /// NVRTC, in process (NVIDIA): `Kind(CompilerKind::Nvrtc)`.
    pub const Nvrtc: CompilerChoice = CompilerChoice::Kind(CompilerKind::Nvrtc);

    /// The spelling `HIPJIT_COMPILER` and `hipjit compile --compiler` take: `auto` or the
    /// kind's ([`CompilerKind::as_str`]).
    pub fn as_str(self) -> &'static str {
        match self {
            CompilerChoice::Auto => "auto",
            CompilerChoice::Kind(k) => k.as_str(),
        }
    }

    /// The kind asked for; `None` for `Auto`.
    pub fn kind(self) -> Option<CompilerKind> {
        match self {
            CompilerChoice::Auto => None,
            CompilerChoice::Kind(k) => Some(k),
        }
    }
}

impl From<CompilerKind> for CompilerChoice {
    fn from(k: CompilerKind) -> CompilerChoice {
        CompilerChoice::Kind(k)
    }
}

impl fmt::Display for CompilerChoice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for CompilerChoice {
    type Err = BadCompilerChoice;
    /// `auto` or a kind's spelling, in any case.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if s.eq_ignore_ascii_case("auto") {
            return Ok(CompilerChoice::Auto);
        }
        s.parse().map(CompilerChoice::Kind)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bytes_keys_and_memos_hold_never_change() {
        let pinned = [
            (CompilerKind::Hipcc, "hipcc", "hipcc", 1),
            (CompilerKind::Nvcc, "nvcc", "nvcc", 2),
            (CompilerKind::HipRtc, "hiprtc", "hipRTC", 3),
            (CompilerKind::Nvrtc, "nvrtc", "NVRTC", 4),
        ];
        for (k, text, name, code) in pinned {
            assert_eq!((k.as_str(), k.name(), k.wire_code()), (text, name, code));
            assert_eq!(CompilerKind::from_wire_code(code), Some(k));
            assert_eq!(text.parse::<CompilerKind>(), Ok(k));
        }
        assert_eq!(CompilerKind::from_wire_code(0), None);
        assert_eq!(choices_listed(), "auto, hipcc, hiprtc, nvcc or nvrtc");
        let codes: std::collections::BTreeSet<u8> =
            CompilerKind::ALL.iter().map(|k| k.wire_code()).collect();
        assert_eq!(
            codes.len(),
            CompilerKind::ALL.len(),
            "a wire code is reused"
        );
    }

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
        assert_eq!(
            BadCompilerChoice("clang".into()).to_string(),
            "\"clang\" is not a compiler choice (auto, hipcc, hiprtc, nvcc or nvrtc)"
        );
    }
}
