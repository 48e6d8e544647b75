//! AMDGPU target IDs: a processor plus the settings of its `xnack` and `sramecc` target features.
//!
//! Syntax and semantics follow LLVM's AMDGPUUsage, sections "Target ID" and "Target Features":
//! `<processor> ( ":" ( "sramecc" | "xnack" ) ( "+" | "-" ) )*`, for example `gfx90a`,
//! `gfx90a:xnack-` or `gfx942:sramecc+:xnack-`. A feature that is not written means "any": code
//! built that way runs whatever the device's setting. The e_flags encoding of code objects
//! (section "AMDGPU ELF Header", `EF_AMDGPU_MACH_*` and `EF_AMDGPU_FEATURE_*_V4`) is read by
//! [`TargetId::from_e_flags`].

use std::fmt;
use std::str::FromStr;

/// The setting of one target feature (`xnack` or `sramecc`) in a target ID.
///
/// Source: LLVM AMDGPUUsage, "Target Features", and the `EF_AMDGPU_FEATURE_*_V4` e_flags values
/// (`0x000` unsupported, `0x100`/`0x400` any, `0x200`/`0x800` off, `0x300`/`0xc00` on).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FeatureSetting {
    /// The processor does not have this feature.
    Unsupported,
    /// Not specified: the code runs with the feature either on or off.
    Any,
    /// Built for the feature turned off (`-`).
    Off,
    /// Built for the feature turned on (`+`).
    On,
}

impl FeatureSetting {
    /// Whether code with this setting runs on a device whose setting is `device`.
    fn runs_on(self, device: FeatureSetting) -> bool {
        match self {
            FeatureSetting::Unsupported | FeatureSetting::Any => true,
            FeatureSetting::Off | FeatureSetting::On => self == device,
        }
    }

    fn is_written(self) -> bool {
        matches!(self, FeatureSetting::Off | FeatureSetting::On)
    }
}

/// An error in a target ID or a list of target IDs.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TargetIdError {
    /// The string was empty (or only whitespace).
    #[error("empty target ID")]
    Empty,
    /// The processor part is not a processor name (`gfx` followed by hexadecimal digits, or a
    /// generic name such as `gfx9-generic`).
    #[error("invalid target ID {target:?}: {processor:?} is not an AMDGPU processor name (expected e.g. gfx90a)")]
    BadProcessor {
        /// The whole target ID as given.
        target: String,
        /// The processor part.
        processor: String,
    },
    /// A feature part was empty (`gfx90a::xnack+`, trailing `:`).
    #[error("invalid target ID {target:?}: empty feature after ':'")]
    EmptyFeature {
        /// The whole target ID as given.
        target: String,
    },
    /// A feature other than `xnack` and `sramecc`.
    #[error("invalid target ID {target:?}: unknown feature {feature:?} (known: sramecc, xnack)")]
    UnknownFeature {
        /// The whole target ID as given.
        target: String,
        /// The feature part, sign included.
        feature: String,
    },
    /// A feature not followed by `+` or `-`.
    #[error("invalid target ID {target:?}: feature {feature:?} must end in '+' or '-'")]
    BadSign {
        /// The whole target ID as given.
        target: String,
        /// The feature part as written.
        feature: String,
    },
    /// The same feature written twice.
    #[error("invalid target ID {target:?}: feature {feature} is given more than once")]
    DuplicateFeature {
        /// The whole target ID as given.
        target: String,
        /// The feature name.
        feature: &'static str,
    },
    /// A known processor that lacks the feature (e.g. `gfx1030:xnack+`).
    #[error("invalid target ID {target:?}: processor {processor} does not support {feature}")]
    FeatureNotSupported {
        /// The whole target ID as given.
        target: String,
        /// The processor.
        processor: String,
        /// The feature name.
        feature: &'static str,
    },
    /// Two forms of one processor in one target list with different features written
    /// (`gfx90a` with `gfx90a:xnack-`), which clang rejects as a conflicting combination.
    #[error("conflicting target IDs {first} and {second}: one processor must be listed with the same features written")]
    MixedForms {
        /// The first target ID of the pair.
        first: String,
        /// The second target ID of the pair.
        second: String,
    },
    /// e_flags whose `EF_AMDGPU_MACH` value names no AMDGCN processor known here.
    #[error(
        "e_flags {e_flags:#x}: EF_AMDGPU_MACH value {mach:#04x} is not a known AMDGCN processor"
    )]
    UnknownMach {
        /// The whole e_flags word.
        e_flags: u32,
        /// Its low byte.
        mach: u32,
    },
}

/// A processor's feature support, with its `EF_AMDGPU_MACH_AMDGCN_*` value.
struct Processor {
    name: &'static str,
    mach: u32,
    xnack: bool,
    sramecc: bool,
}

const fn p(name: &'static str, mach: u32, xnack: bool, sramecc: bool) -> Processor {
    Processor {
        name,
        mach,
        xnack,
        sramecc,
    }
}

/// AMDGCN processors: `EF_AMDGPU_MACH_AMDGCN_*` values from LLVM's `llvm/BinaryFormat/ELF.h`
/// (LLVM 15 and 21) and AMDGPUUsage "AMDGPU ELF Header"; which processors support `xnack` and
/// `sramecc` from AMDGPUUsage "AMDGPU Processors" ("Target Features Supported" column).
/// gfx940 (0x040) and gfx941 (0x04b) were written by LLVM 15-19 and are reserved since LLVM 20.
const PROCESSORS: &[Processor] = &[
    p("gfx600", 0x020, false, false),
    p("gfx601", 0x021, false, false),
    p("gfx602", 0x03a, false, false),
    p("gfx700", 0x022, false, false),
    p("gfx701", 0x023, false, false),
    p("gfx702", 0x024, false, false),
    p("gfx703", 0x025, false, false),
    p("gfx704", 0x026, false, false),
    p("gfx705", 0x03b, false, false),
    p("gfx801", 0x028, true, false),
    p("gfx802", 0x029, false, false),
    p("gfx803", 0x02a, false, false),
    p("gfx805", 0x03c, false, false),
    p("gfx810", 0x02b, true, false),
    p("gfx900", 0x02c, true, false),
    p("gfx902", 0x02d, true, false),
    p("gfx904", 0x02e, true, false),
    p("gfx906", 0x02f, true, true),
    p("gfx908", 0x030, true, true),
    p("gfx909", 0x031, true, false),
    p("gfx90a", 0x03f, true, true),
    p("gfx90c", 0x032, true, false),
    p("gfx940", 0x040, true, true),
    p("gfx941", 0x04b, true, true),
    p("gfx942", 0x04c, true, true),
    p("gfx950", 0x04f, true, true),
    p("gfx1010", 0x033, true, false),
    p("gfx1011", 0x034, true, false),
    p("gfx1012", 0x035, true, false),
    p("gfx1013", 0x042, true, false),
    p("gfx1030", 0x036, false, false),
    p("gfx1031", 0x037, false, false),
    p("gfx1032", 0x038, false, false),
    p("gfx1033", 0x039, false, false),
    p("gfx1034", 0x03e, false, false),
    p("gfx1035", 0x03d, false, false),
    p("gfx1036", 0x045, false, false),
    p("gfx1100", 0x041, false, false),
    p("gfx1101", 0x046, false, false),
    p("gfx1102", 0x047, false, false),
    p("gfx1103", 0x044, false, false),
    p("gfx1150", 0x043, false, false),
    p("gfx1151", 0x04a, false, false),
    p("gfx1152", 0x055, false, false),
    p("gfx1153", 0x058, false, false),
    p("gfx1200", 0x048, false, false),
    p("gfx1201", 0x04e, false, false),
    p("gfx1250", 0x049, false, false),
    p("gfx9-generic", 0x051, true, false),
    p("gfx9-4-generic", 0x05f, true, true),
    p("gfx10-1-generic", 0x052, true, false),
    p("gfx10-3-generic", 0x053, false, false),
    p("gfx11-generic", 0x054, false, false),
    p("gfx12-generic", 0x059, false, false),
];

/// Generic processors and the processors their code runs on: AMDGPUUsage "AMDGPU Generic
/// Processors" (LLVM 21). Code for a generic processor needs code object v6; the runtime also
/// checks the generic version in e_flags bits 24-31 against the version each member joined at
/// (1 for every member listed here).
const GENERIC_MEMBERS: &[(&str, &[&str])] = &[
    (
        "gfx9-generic",
        &["gfx900", "gfx902", "gfx904", "gfx906", "gfx909", "gfx90c"],
    ),
    ("gfx9-4-generic", &["gfx940", "gfx941", "gfx942", "gfx950"]),
    (
        "gfx10-1-generic",
        &["gfx1010", "gfx1011", "gfx1012", "gfx1013"],
    ),
    (
        "gfx10-3-generic",
        &[
            "gfx1030", "gfx1031", "gfx1032", "gfx1033", "gfx1034", "gfx1035", "gfx1036",
        ],
    ),
    (
        "gfx11-generic",
        &[
            "gfx1100", "gfx1101", "gfx1102", "gfx1103", "gfx1150", "gfx1151", "gfx1152", "gfx1153",
        ],
    ),
    ("gfx12-generic", &["gfx1200", "gfx1201"]),
];

fn known_processor(name: &str) -> Option<&'static Processor> {
    PROCESSORS.iter().find(|p| p.name == name)
}

/// `gfx` + hex digits, or `gfx` + hex digits + (`-` + hex digits)* + `-generic`.
fn is_processor_name(name: &str) -> bool {
    let Some(rest) = name.strip_prefix("gfx") else {
        return false;
    };
    let rest = rest.strip_suffix("-generic").unwrap_or(rest);
    !rest.is_empty()
        && rest.split('-').all(|part| {
            !part.is_empty()
                && part
                    .bytes()
                    .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
        })
        && rest.as_bytes()[0].is_ascii_digit()
}

/// An AMDGPU target ID such as `gfx942:sramecc+:xnack-`.
///
/// Displayed in LLVM's canonical form: the processor, then the written features in alphabetical
/// order (`sramecc` before `xnack`). Serialised with serde as that string.
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub struct TargetId {
    processor: String,
    xnack: FeatureSetting,
    sramecc: FeatureSetting,
}

impl TargetId {
    /// Parses a target ID (`gfx90a`, `gfx90a:xnack-`, `gfx942:sramecc+:xnack-`).
    ///
    /// Features may be written in any order. A feature that is not written is
    /// [`FeatureSetting::Any`], or [`FeatureSetting::Unsupported`] when the processor is known
    /// not to have it. Processors missing from hipjit's table but well formed (`gfx` and
    /// hexadecimal digits) are accepted with both features possible.
    ///
    /// Errors: [`TargetIdError::Empty`], [`TargetIdError::BadProcessor`],
    /// [`TargetIdError::EmptyFeature`], [`TargetIdError::UnknownFeature`],
    /// [`TargetIdError::BadSign`], [`TargetIdError::DuplicateFeature`],
    /// [`TargetIdError::FeatureNotSupported`].
    pub fn parse(s: &str) -> Result<TargetId, TargetIdError> {
        let target = s.trim();
        if target.is_empty() {
            return Err(TargetIdError::Empty);
        }
        let mut parts = target.split(':');
        let processor = parts.next().unwrap_or_default();
        if !is_processor_name(processor) {
            return Err(TargetIdError::BadProcessor {
                target: target.to_owned(),
                processor: processor.to_owned(),
            });
        }
        let known = known_processor(processor);
        let mut xnack = None;
        let mut sramecc = None;
        for feature in parts {
            if feature.is_empty() {
                return Err(TargetIdError::EmptyFeature {
                    target: target.to_owned(),
                });
            }
            let (name, setting) = if let Some(name) = feature.strip_suffix('+') {
                (name, FeatureSetting::On)
            } else if let Some(name) = feature.strip_suffix('-') {
                (name, FeatureSetting::Off)
            } else if feature == "xnack" || feature == "sramecc" {
                return Err(TargetIdError::BadSign {
                    target: target.to_owned(),
                    feature: feature.to_owned(),
                });
            } else {
                return Err(TargetIdError::UnknownFeature {
                    target: target.to_owned(),
                    feature: feature.to_owned(),
                });
            };
            let (slot, fname, supported) = match name {
                "xnack" => (&mut xnack, "xnack", known.is_none_or(|p| p.xnack)),
                "sramecc" => (&mut sramecc, "sramecc", known.is_none_or(|p| p.sramecc)),
                _ if name.ends_with('+') || name.ends_with('-') => {
                    return Err(TargetIdError::BadSign {
                        target: target.to_owned(),
                        feature: feature.to_owned(),
                    })
                }
                _ => {
                    return Err(TargetIdError::UnknownFeature {
                        target: target.to_owned(),
                        feature: feature.to_owned(),
                    })
                }
            };
            if slot.is_some() {
                return Err(TargetIdError::DuplicateFeature {
                    target: target.to_owned(),
                    feature: fname,
                });
            }
            if !supported {
                return Err(TargetIdError::FeatureNotSupported {
                    target: target.to_owned(),
                    processor: processor.to_owned(),
                    feature: fname,
                });
            }
            *slot = Some(setting);
        }
        let unwritten = |supported: bool| {
            if supported {
                FeatureSetting::Any
            } else {
                FeatureSetting::Unsupported
            }
        };
        Ok(TargetId {
            processor: processor.to_owned(),
            xnack: xnack.unwrap_or_else(|| unwritten(known.is_none_or(|p| p.xnack))),
            sramecc: sramecc.unwrap_or_else(|| unwritten(known.is_none_or(|p| p.sramecc))),
        })
    }

    /// Reads the target ID from an AMDGPU code object's ELF header flags.
    ///
    /// `abi_version` is the ELF header's `EI_ABIVERSION` byte: 1 is code object v3 (xnack
    /// `0x100` and sramecc `0x200` are on/off bits; LLVM also sets them for code built for
    /// "any", which therefore reads as on, as the ROCm loader reads it), 2 and above are v4+
    /// (`0x300` and `0xc00` hold unsupported/any/off/on). Source: AMDGPUUsage "AMDGPU ELF
    /// Header".
    ///
    /// Errors: [`TargetIdError::UnknownMach`] when the low byte names no known AMDGCN processor.
    pub fn from_e_flags(e_flags: u32, abi_version: u8) -> Result<TargetId, TargetIdError> {
        let mach = e_flags & 0xff;
        let processor = PROCESSORS
            .iter()
            .find(|p| p.mach == mach)
            .ok_or(TargetIdError::UnknownMach { e_flags, mach })?;
        let (xnack, sramecc) = if abi_version <= 1 {
            let v3 = |supported: bool, bit: u32| match (supported, e_flags & bit != 0) {
                (false, _) => FeatureSetting::Unsupported,
                (true, true) => FeatureSetting::On,
                (true, false) => FeatureSetting::Off,
            };
            (v3(processor.xnack, 0x100), v3(processor.sramecc, 0x200))
        } else {
            let v4 = |bits: u32| match bits {
                0 => FeatureSetting::Unsupported,
                1 => FeatureSetting::Any,
                2 => FeatureSetting::Off,
                _ => FeatureSetting::On,
            };
            (v4((e_flags >> 8) & 3), v4((e_flags >> 10) & 3))
        };
        Ok(TargetId {
            processor: processor.name.to_owned(),
            xnack,
            sramecc,
        })
    }

    /// The `EF_AMDGPU_MACH` value of this target's processor, when hipjit knows it.
    pub fn e_flags_mach(&self) -> Option<u32> {
        known_processor(&self.processor).map(|p| p.mach)
    }

    /// The processor name, e.g. `gfx90a`.
    pub fn processor(&self) -> &str {
        &self.processor
    }

    /// The `xnack` setting: [`FeatureSetting::Any`] when not written.
    pub fn xnack(&self) -> FeatureSetting {
        self.xnack
    }

    /// The `sramecc` setting: [`FeatureSetting::Any`] when not written.
    pub fn sramecc(&self) -> FeatureSetting {
        self.sramecc
    }

    /// Whether code built for `self` runs on a device with target ID `device` (same processor,
    /// or `self` a generic processor such as `gfx11-generic` whose members include the device's;
    /// a feature `Any` or `Unsupported` in `self` matches any setting of the device; `On`/`Off`
    /// must be equal). Sources: clang's bundle entry compatibility rule (ClangOffloadBundler
    /// "Target ID compatibility") and AMDGPUUsage "AMDGPU Generic Processors".
    pub fn runs_on(&self, device: &TargetId) -> bool {
        let same_processor = self.processor == device.processor
            || GENERIC_MEMBERS
                .iter()
                .any(|(g, members)| *g == self.processor && members.contains(&device.processor()));
        same_processor && self.xnack.runs_on(device.xnack) && self.sramecc.runs_on(device.sramecc)
    }

    /// Whether the processor is a generic one (`gfx9-generic`, `gfx11-generic`...).
    pub fn is_generic(&self) -> bool {
        self.processor.ends_with("-generic")
    }

    /// How many features are written (`On` or `Off`): more means a more specific target ID.
    pub fn specificity(&self) -> usize {
        usize::from(self.xnack.is_written()) + usize::from(self.sramecc.is_written())
    }

    fn written_features(&self) -> (bool, bool) {
        (self.sramecc.is_written(), self.xnack.is_written())
    }
}

/// Checks a list of target IDs to compile for, as clang does: one processor listed in several
/// forms must write the same features in each (`gfx90a:xnack+` with `gfx90a:xnack-` is fine;
/// `gfx90a` with `gfx90a:xnack-` is not). Identical entries are allowed.
///
/// Errors: [`TargetIdError::MixedForms`] naming the first conflicting pair.
pub fn check_target_list(targets: &[TargetId]) -> Result<(), TargetIdError> {
    for (i, a) in targets.iter().enumerate() {
        for b in &targets[i + 1..] {
            if a.processor == b.processor && a.written_features() != b.written_features() {
                return Err(TargetIdError::MixedForms {
                    first: a.to_string(),
                    second: b.to_string(),
                });
            }
        }
    }
    Ok(())
}

/// Written piece by piece (`write_str`, no format string): a fresh process's disk hit names
/// its targets once, and the formatting machinery is code it need not run.
impl fmt::Display for TargetId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.processor)?;
        for (name, setting) in [("sramecc", self.sramecc), ("xnack", self.xnack)] {
            let sign = match setting {
                FeatureSetting::On => "+",
                FeatureSetting::Off => "-",
                FeatureSetting::Any | FeatureSetting::Unsupported => continue,
            };
            f.write_str(":")?;
            f.write_str(name)?;
            f.write_str(sign)?;
        }
        Ok(())
    }
}

impl FromStr for TargetId {
    type Err = TargetIdError;

    fn from_str(s: &str) -> Result<TargetId, TargetIdError> {
        TargetId::parse(s)
    }
}

impl serde::Serialize for TargetId {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> serde::Deserialize<'de> for TargetId {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<TargetId, D::Error> {
        let s = String::deserialize(deserializer)?;
        TargetId::parse(&s).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn target_ids_display_their_features_in_the_canonical_order() {
        for (written, shown) in [
            ("gfx90a", "gfx90a"),
            ("gfx90a:xnack-", "gfx90a:xnack-"),
            ("gfx90a:xnack+:sramecc-", "gfx90a:sramecc-:xnack+"),
            ("gfx90a:sramecc+:xnack+", "gfx90a:sramecc+:xnack+"),
        ] {
            assert_eq!(TargetId::parse(written).unwrap().to_string(), shown);
        }
    }

    #[test]
    fn every_processor_name_in_the_table_is_well_formed_and_unique() {
        for (i, p) in PROCESSORS.iter().enumerate() {
            assert!(is_processor_name(p.name), "{}", p.name);
            for q in &PROCESSORS[i + 1..] {
                assert_ne!(p.name, q.name);
                assert_ne!(p.mach, q.mach, "{} and {}", p.name, q.name);
            }
        }
    }

    #[test]
    fn generic_processor_names_are_accepted() {
        assert!(is_processor_name("gfx9-4-generic"));
        assert!(is_processor_name("gfx11-generic"));
        assert!(!is_processor_name("gfx-generic"));
        assert!(!is_processor_name("gfx9--generic"));
    }
}
