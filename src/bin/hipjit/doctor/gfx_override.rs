//! The ISA override of ROCm's runtime (`HSA_OVERRIDE_GFX_VERSION`, and the per-node
//! `HSA_OVERRIDE_GFX_VERSION_<N>`) as the doctor reports it.
//!
//! ROCm's thunk library (libhsakmt, `src/topology.c`) reads, for each GPU node N of the
//! kernel driver's topology, `HSA_OVERRIDE_GFX_VERSION_<N>`, else `HSA_OVERRIDE_GFX_VERSION`,
//! when the runtime starts: `MAJOR.MINOR.STEPPING` in decimal (`sscanf("%u.%u.%u")` with nothing
//! after, MAJOR at most 63, MINOR and STEPPING at most 255; any other value fails the runtime's
//! start). The runtime then reports that GPU as the ISA `gfx<MAJOR><MINOR hex><STEPPING hex>`
//! (`10.3.0` is gfx1030, `9.0.10` gfx90a, `11.0.0` gfx1100) in `gcnArchName`, and loads only
//! code objects for it. hipjit compiles for the target the runtime reports, so the override
//! needs nothing from hipjit; the doctor shows it because it changes what every device is.

use serde::Serialize;

/// The variable every GPU node reads when its own is unset.
pub(super) const VARIABLE: &str = "HSA_OVERRIDE_GFX_VERSION";

/// One override variable set in the environment.
#[derive(Serialize, Debug, Clone, PartialEq, Eq)]
pub(super) struct GfxOverride {
    /// `HSA_OVERRIDE_GFX_VERSION` or `HSA_OVERRIDE_GFX_VERSION_<N>`.
    pub variable: String,
    /// Its value as set.
    pub value: String,
    /// The ISA the runtime reports under it (`gfx1030`), `None` when the value does not parse.
    pub target: Option<String>,
}

/// The ISA name ROCm's runtime makes of an override value (`10.3.0` → `gfx1030`), `None` for a
/// value it refuses (not three decimal fields, or a field over its limit).
pub(super) fn isa_name(value: &str) -> Option<String> {
    let mut fields = value.split('.');
    let mut next = |max: u32| -> Option<u32> {
        let f = fields.next()?;
        // sscanf's %u: decimal digits (a leading '+' is taken too; nothing else is).
        let digits = f.strip_prefix('+').unwrap_or(f);
        if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        digits.parse::<u32>().ok().filter(|v| *v <= max)
    };
    let (major, minor, step) = (next(63)?, next(255)?, next(255)?);
    if fields.next().is_some() {
        return None;
    }
    Some(format!("gfx{major}{minor:x}{step:x}"))
}

/// The override variables of `vars` (the environment), sorted by name: the global one and
/// each `HSA_OVERRIDE_GFX_VERSION_<N>` whose N is a number.
pub(super) fn gather(vars: impl IntoIterator<Item = (String, String)>) -> Vec<GfxOverride> {
    let mut found: Vec<GfxOverride> = vars
        .into_iter()
        .filter(|(k, _)| match k.strip_prefix(VARIABLE) {
            Some("") => true,
            Some(rest) => rest
                .strip_prefix('_')
                .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit())),
            None => false,
        })
        .map(|(variable, value)| GfxOverride {
            target: isa_name(&value),
            variable,
            value,
        })
        .collect();
    found.sort_by(|a, b| a.variable.cmp(&b.variable));
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_name_the_isa_with_minor_and_stepping_in_hex() {
        // The examples of ROCm's documentation and community guides.
        assert_eq!(isa_name("10.3.0").as_deref(), Some("gfx1030"));
        assert_eq!(isa_name("11.0.0").as_deref(), Some("gfx1100"));
        assert_eq!(isa_name("9.0.0").as_deref(), Some("gfx900"));
        assert_eq!(isa_name("9.0.10").as_deref(), Some("gfx90a"));
        assert_eq!(isa_name("9.4.2").as_deref(), Some("gfx942"));
        assert_eq!(isa_name("9.0.12").as_deref(), Some("gfx90c"));
    }

    #[test]
    fn values_the_runtime_refuses_name_no_isa() {
        for v in [
            "", "10.3", "10.3.0.1", "gfx1030", "10.3.x", "64.0.0", "9.256.0", "9.0.256", "10.3.0 ",
            "-1.0.0", "a.b.c",
        ] {
            assert_eq!(isa_name(v), None, "{v:?}");
        }
    }

    #[test]
    fn the_global_and_numbered_variables_are_gathered_in_order() {
        let env = [
            ("HSA_OVERRIDE_GFX_VERSION_2", "11.0.0"),
            ("PATH", "/usr/bin"),
            ("HSA_OVERRIDE_GFX_VERSION", "10.3.0"),
            ("HSA_OVERRIDE_GFX_VERSION_X", "9.0.0"),
            ("HSA_OVERRIDE_GFX_VERSION_1", "10.3"),
        ]
        .map(|(k, v)| (k.to_owned(), v.to_owned()));
        let got: Vec<_> = gather(env)
            .into_iter()
            .map(|o| (o.variable, o.target))
            .collect();
        assert_eq!(
            got,
            vec![
                (
                    "HSA_OVERRIDE_GFX_VERSION".to_owned(),
                    Some("gfx1030".to_owned())
                ),
                ("HSA_OVERRIDE_GFX_VERSION_1".to_owned(), None),
                (
                    "HSA_OVERRIDE_GFX_VERSION_2".to_owned(),
                    Some("gfx1100".to_owned())
                ),
            ]
        );
    }
}
