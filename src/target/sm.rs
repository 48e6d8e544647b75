//! The NVIDIA target notion: an SM architecture (`sm_90`), the counterpart of an AMDGPU target
//! ID on HIP's NVIDIA platform.
//!
//! Kept small on purpose: a cubin holds machine code (SASS) for one SM version, and the CUDA
//! driver loads it on a device of the same major version and an equal or higher minor version
//! (CUDA C++ Programming Guide, "Binary Compatibility"). Arch-specific variants (`sm_90a`) run
//! only on exactly that SM.

use std::fmt::{self, Write as _};
use std::str::FromStr;

/// An SM architecture: `sm_<major><minor>` with an optional `a` (arch-specific) or `f`
/// (family) suffix, e.g. `sm_90`, `sm_90a`, `sm_100f`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SmTarget {
    /// The SM number, `major * 10 + minor` (90 for `sm_90`).
    pub sm: u32,
    /// The suffix letter: `None`, `Some('a')` or `Some('f')`.
    pub suffix: Option<char>,
}

/// A string that is not an SM architecture name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{0}` is not an SM architecture (expected sm_<number>, e.g. sm_90 or sm_90a)")]
pub struct SmTargetError(pub String);

impl SmTarget {
    /// `sm_<sm>` without suffix.
    pub fn new(sm: u32) -> SmTarget {
        SmTarget { sm, suffix: None }
    }

    /// The target of a device of compute capability `major.minor` (`cuDeviceGetAttribute`
    /// `CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR`/`_MINOR`).
    pub fn from_compute_capability(major: u32, minor: u32) -> SmTarget {
        SmTarget::new(major * 10 + minor)
    }

    /// Parses `sm_90`, `sm_90a`, `sm_100f` (also `compute_` is refused: that names PTX).
    ///
    /// Errors: [`SmTargetError`] quoting the input.
    pub fn parse(s: &str) -> Result<SmTarget, SmTargetError> {
        let err = || SmTargetError(s.to_owned());
        let rest = s.strip_prefix("sm_").ok_or_else(err)?;
        let (digits, suffix) = match rest.chars().last() {
            Some(c @ ('a' | 'f')) => (&rest[..rest.len() - 1], Some(c)),
            _ => (rest, None),
        };
        if digits.len() < 2 || !digits.bytes().all(|b| b.is_ascii_digit()) {
            return Err(err());
        }
        let sm = digits.parse::<u32>().map_err(|_| err())?;
        Ok(SmTarget { sm, suffix })
    }

    /// The major version (9 for `sm_90`).
    pub fn major(self) -> u32 {
        self.sm / 10
    }

    /// The minor version (0 for `sm_90`).
    pub fn minor(self) -> u32 {
        self.sm % 10
    }

    /// Whether a cubin built for `self` runs on a device of target `device`: same major version
    /// and a minor version not above the device's; an `a` target only on exactly that SM.
    pub fn runs_on(self, device: SmTarget) -> bool {
        match self.suffix {
            Some('a') => self.sm == device.sm,
            _ => self.major() == device.major() && self.minor() <= device.minor(),
        }
    }
}

/// Written piece by piece (the digits by hand, no format string): a fresh process's disk hit
/// names its target once, and the formatting machinery is code it need not run.
impl fmt::Display for SmTarget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("sm_")?;
        let (mut digits, mut at, mut n) = ([0u8; 10], 10, self.sm);
        loop {
            at -= 1;
            digits[at] = b'0' + (n % 10) as u8;
            n /= 10;
            if n == 0 {
                break;
            }
        }
        f.write_str(std::str::from_utf8(&digits[at..]).unwrap_or_default())?;
        if let Some(c) = self.suffix {
            f.write_char(c)?;
        }
        Ok(())
    }
}

impl FromStr for SmTarget {
    type Err = SmTargetError;
    fn from_str(s: &str) -> Result<SmTarget, SmTargetError> {
        SmTarget::parse(s)
    }
}

impl serde::Serialize for SmTarget {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> serde::Deserialize<'de> for SmTarget {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<SmTarget, D::Error> {
        let s = String::deserialize(deserializer)?;
        SmTarget::parse(&s).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_plain_and_suffixed_names() {
        assert_eq!(SmTarget::parse("sm_90"), Ok(SmTarget::new(90)));
        assert_eq!(
            SmTarget::parse("sm_90a"),
            Ok(SmTarget {
                sm: 90,
                suffix: Some('a')
            })
        );
        assert_eq!(SmTarget::parse("sm_100f").map(|t| t.major()), Ok(10));
        assert_eq!(SmTarget::parse("sm_90a").unwrap().to_string(), "sm_90a");
    }

    #[test]
    fn names_display_every_digit_and_the_suffix() {
        let t = |sm, suffix| SmTarget { sm, suffix }.to_string();
        assert_eq!(t(0, None), "sm_0");
        assert_eq!(t(90, None), "sm_90");
        assert_eq!(t(100, Some('f')), "sm_100f");
        assert_eq!(t(u32::MAX, Some('a')), "sm_4294967295a");
    }

    #[test]
    fn refuses_non_sm_names() {
        for s in ["gfx90a", "sm_", "sm_9", "compute_90", "sm_9x", "sm_90b"] {
            assert_eq!(SmTarget::parse(s), Err(SmTargetError(s.to_owned())), "{s}");
        }
    }

    #[test]
    fn cubin_runs_on_same_major_with_higher_minor_only() {
        let sm80 = SmTarget::new(80);
        assert!(sm80.runs_on(SmTarget::new(86)));
        assert!(!SmTarget::new(86).runs_on(sm80));
        assert!(!sm80.runs_on(SmTarget::new(90)));
        let sm90a = SmTarget::parse("sm_90a").unwrap();
        assert!(sm90a.runs_on(SmTarget::new(90)));
        assert!(!sm90a.runs_on(SmTarget::new(91)));
    }
}
