//! Target ID parsing, display, compatibility and e_flags decoding (LLVM AMDGPUUsage "Target ID",
//! "AMDGPU ELF Header").

use hipjit::target_id::{check_target_list, FeatureSetting, TargetId, TargetIdError};

fn tid(s: &str) -> TargetId {
    TargetId::parse(s).unwrap_or_else(|e| panic!("{s}: {e}"))
}

#[test]
fn a_bare_processor_leaves_both_features_any() {
    let t = tid("gfx90a");
    assert_eq!(t.processor(), "gfx90a");
    assert_eq!(t.xnack(), FeatureSetting::Any);
    assert_eq!(t.sramecc(), FeatureSetting::Any);
}

#[test]
fn a_written_feature_is_on_or_off() {
    let t = tid("gfx90a:xnack-");
    assert_eq!(t.xnack(), FeatureSetting::Off);
    assert_eq!(t.sramecc(), FeatureSetting::Any);
    let t = tid("gfx942:sramecc+:xnack-");
    assert_eq!(t.processor(), "gfx942");
    assert_eq!(t.sramecc(), FeatureSetting::On);
    assert_eq!(t.xnack(), FeatureSetting::Off);
}

#[test]
fn features_a_known_processor_lacks_are_unsupported() {
    let t = tid("gfx1100");
    assert_eq!(t.xnack(), FeatureSetting::Unsupported);
    assert_eq!(t.sramecc(), FeatureSetting::Unsupported);
    let t = tid("gfx900");
    assert_eq!(t.xnack(), FeatureSetting::Any);
    assert_eq!(t.sramecc(), FeatureSetting::Unsupported);
}

#[test]
fn display_is_canonical_with_sramecc_before_xnack() {
    assert_eq!(
        tid("gfx942:xnack-:sramecc+").to_string(),
        "gfx942:sramecc+:xnack-"
    );
    assert_eq!(tid("gfx90a").to_string(), "gfx90a");
    assert_eq!(tid("gfx90a:xnack+").to_string(), "gfx90a:xnack+");
}

#[test]
fn from_str_and_serde_round_trip_through_the_string() {
    let t: TargetId = "gfx942:sramecc+:xnack-".parse().unwrap();
    let json = serde_json::to_string(&t).unwrap();
    assert_eq!(json, "\"gfx942:sramecc+:xnack-\"");
    let back: TargetId = serde_json::from_str(&json).unwrap();
    assert_eq!(back, t);
    assert!(serde_json::from_str::<TargetId>("\"gfx90a:foo+\"").is_err());
}

#[test]
fn unknown_but_well_formed_processors_are_accepted() {
    let t = tid("gfx1300:xnack-");
    assert_eq!(t.processor(), "gfx1300");
    assert_eq!(t.xnack(), FeatureSetting::Off);
    assert_eq!(t.e_flags_mach(), None);
}

#[test]
fn empty_input_is_rejected() {
    assert_eq!(TargetId::parse(""), Err(TargetIdError::Empty));
    assert_eq!(TargetId::parse("  "), Err(TargetIdError::Empty));
}

#[test]
fn bad_processor_names_are_rejected_with_the_name() {
    for bad in [
        "sm_90", "gfx", "GFX90A", "gfx90g", "x86_64", "gfx90a+", ":xnack+",
    ] {
        let err = TargetId::parse(bad).unwrap_err();
        assert!(
            matches!(err, TargetIdError::BadProcessor { .. }),
            "{bad}: {err:?}"
        );
        assert!(
            err.to_string().contains("not an AMDGPU processor name"),
            "{err}"
        );
    }
}

#[test]
fn unknown_features_are_rejected_with_the_feature() {
    let err = TargetId::parse("gfx90a:wavefrontsize64+").unwrap_err();
    assert!(
        matches!(err, TargetIdError::UnknownFeature { ref feature, .. } if feature == "wavefrontsize64+")
    );
    assert!(
        err.to_string()
            .contains("unknown feature \"wavefrontsize64+\""),
        "{err}"
    );
}

#[test]
fn a_feature_without_sign_is_rejected() {
    let err = TargetId::parse("gfx90a:xnack").unwrap_err();
    assert!(matches!(err, TargetIdError::BadSign { .. }), "{err:?}");
    assert!(err.to_string().contains("must end in '+' or '-'"), "{err}");
    let err = TargetId::parse("gfx90a:xnack+-").unwrap_err();
    assert!(matches!(err, TargetIdError::BadSign { .. }), "{err:?}");
    let err = TargetId::parse("gfx90a:xnack*").unwrap_err();
    assert!(
        matches!(err, TargetIdError::UnknownFeature { .. }),
        "{err:?}"
    );
}

#[test]
fn a_duplicate_feature_is_rejected() {
    let err = TargetId::parse("gfx90a:xnack+:xnack-").unwrap_err();
    assert!(
        matches!(
            err,
            TargetIdError::DuplicateFeature {
                feature: "xnack",
                ..
            }
        ),
        "{err:?}"
    );
    assert!(err.to_string().contains("more than once"), "{err}");
}

#[test]
fn an_empty_feature_is_rejected() {
    for bad in ["gfx90a:", "gfx90a::xnack+"] {
        let err = TargetId::parse(bad).unwrap_err();
        assert!(
            matches!(err, TargetIdError::EmptyFeature { .. }),
            "{bad}: {err:?}"
        );
    }
}

#[test]
fn a_feature_the_processor_lacks_is_rejected() {
    let err = TargetId::parse("gfx1030:xnack+").unwrap_err();
    assert!(
        matches!(
            err,
            TargetIdError::FeatureNotSupported {
                feature: "xnack",
                ..
            }
        ),
        "{err:?}"
    );
    assert!(
        err.to_string().contains("gfx1030 does not support xnack"),
        "{err}"
    );
    assert!(TargetId::parse("gfx908:sramecc-").is_ok());
    assert!(TargetId::parse("gfx900:sramecc-").is_err());
}

#[test]
fn any_runs_on_every_setting_of_the_same_processor() {
    let code = tid("gfx90a");
    assert!(code.runs_on(&tid("gfx90a:xnack-")));
    assert!(code.runs_on(&tid("gfx90a:sramecc+:xnack+")));
    assert!(code.runs_on(&tid("gfx90a")));
}

#[test]
fn on_and_off_must_match_the_device() {
    let code = tid("gfx90a:xnack-");
    assert!(code.runs_on(&tid("gfx90a:sramecc+:xnack-")));
    assert!(!code.runs_on(&tid("gfx90a:sramecc+:xnack+")));
    assert!(
        !code.runs_on(&tid("gfx90a")),
        "device setting unknown: xnack- is not guaranteed"
    );
}

#[test]
fn another_processor_never_runs() {
    assert!(!tid("gfx90a").runs_on(&tid("gfx942")));
    assert!(!tid("gfx942").runs_on(&tid("gfx90a")));
}

#[test]
fn a_target_list_may_repeat_one_form_or_vary_the_same_features() {
    let list = [
        tid("gfx90a:xnack+"),
        tid("gfx90a:xnack-"),
        tid("gfx1100"),
        tid("gfx1100"),
    ];
    assert_eq!(check_target_list(&list), Ok(()));
}

#[test]
fn a_target_list_may_not_mix_a_bare_and_a_featured_form() {
    let err =
        check_target_list(&[tid("gfx90a"), tid("gfx1030"), tid("gfx90a:xnack-")]).unwrap_err();
    assert_eq!(
        err,
        TargetIdError::MixedForms {
            first: "gfx90a".into(),
            second: "gfx90a:xnack-".into()
        }
    );
    assert!(err
        .to_string()
        .contains("conflicting target IDs gfx90a and gfx90a:xnack-"));
    assert!(check_target_list(&[tid("gfx942:sramecc+"), tid("gfx942:xnack+")]).is_err());
}

/// e_flags measured on code objects from hipcc 5.2.3 and 7.0.2 (docs ENVIRONMENT.md,
/// tests/data/code-objects) and the values of LLVM's ELF.h.
#[test]
fn e_flags_give_processor_and_feature_settings() {
    let cases = [
        (0x53f, 2, "gfx90a", FeatureSetting::Any, FeatureSetting::Any),
        (0x63f, 2, "gfx90a", FeatureSetting::Off, FeatureSetting::Any),
        (0x530, 2, "gfx908", FeatureSetting::Any, FeatureSetting::Any),
        (
            0x36,
            2,
            "gfx1030",
            FeatureSetting::Unsupported,
            FeatureSetting::Unsupported,
        ),
        (0xe4c, 4, "gfx942", FeatureSetting::Off, FeatureSetting::On),
        (0x54f, 4, "gfx950", FeatureSetting::Any, FeatureSetting::Any),
        (
            0x41,
            4,
            "gfx1100",
            FeatureSetting::Unsupported,
            FeatureSetting::Unsupported,
        ),
        (
            0x4a,
            4,
            "gfx1151",
            FeatureSetting::Unsupported,
            FeatureSetting::Unsupported,
        ),
        (
            0x4e,
            4,
            "gfx1201",
            FeatureSetting::Unsupported,
            FeatureSetting::Unsupported,
        ),
        (
            0x40,
            2,
            "gfx940",
            FeatureSetting::Unsupported,
            FeatureSetting::Unsupported,
        ),
        (
            0x3f | 0x300 | 0xc00,
            3,
            "gfx90a",
            FeatureSetting::On,
            FeatureSetting::On,
        ),
    ];
    for (flags, abi, processor, xnack, sramecc) in cases {
        let t = TargetId::from_e_flags(flags, abi).unwrap();
        assert_eq!(t.processor(), processor, "{flags:#x}");
        assert_eq!(t.xnack(), xnack, "{flags:#x}");
        assert_eq!(t.sramecc(), sramecc, "{flags:#x}");
    }
}

#[test]
fn e_flags_of_code_object_v3_use_on_off_bits() {
    let t = TargetId::from_e_flags(0x2f | 0x100, 1).unwrap();
    assert_eq!(t.processor(), "gfx906");
    assert_eq!(t.xnack(), FeatureSetting::On);
    assert_eq!(t.sramecc(), FeatureSetting::Off);
}

#[test]
fn every_gfx9_to_gfx12_processor_maps_to_its_mach_value() {
    // EF_AMDGPU_MACH_AMDGCN_* from LLVM 21's llvm/BinaryFormat/ELF.h.
    let table = [
        ("gfx900", 0x2c),
        ("gfx902", 0x2d),
        ("gfx904", 0x2e),
        ("gfx906", 0x2f),
        ("gfx908", 0x30),
        ("gfx909", 0x31),
        ("gfx90a", 0x3f),
        ("gfx90c", 0x32),
        ("gfx942", 0x4c),
        ("gfx950", 0x4f),
        ("gfx1010", 0x33),
        ("gfx1011", 0x34),
        ("gfx1012", 0x35),
        ("gfx1013", 0x42),
        ("gfx1030", 0x36),
        ("gfx1031", 0x37),
        ("gfx1032", 0x38),
        ("gfx1033", 0x39),
        ("gfx1034", 0x3e),
        ("gfx1035", 0x3d),
        ("gfx1036", 0x45),
        ("gfx1100", 0x41),
        ("gfx1101", 0x46),
        ("gfx1102", 0x47),
        ("gfx1103", 0x44),
        ("gfx1150", 0x43),
        ("gfx1151", 0x4a),
        ("gfx1152", 0x55),
        ("gfx1153", 0x58),
        ("gfx1200", 0x48),
        ("gfx1201", 0x4e),
        ("gfx1250", 0x49),
        ("gfx9-generic", 0x51),
        ("gfx9-4-generic", 0x5f),
        ("gfx10-1-generic", 0x52),
        ("gfx10-3-generic", 0x53),
        ("gfx11-generic", 0x54),
        ("gfx12-generic", 0x59),
    ];
    for (name, mach) in table {
        assert_eq!(tid(name).e_flags_mach(), Some(mach), "{name}");
        assert_eq!(TargetId::from_e_flags(mach, 4).unwrap().processor(), name);
    }
}

#[test]
fn an_unknown_mach_value_is_an_error_naming_it() {
    let err = TargetId::from_e_flags(0x5ee, 2).unwrap_err();
    assert_eq!(
        err,
        TargetIdError::UnknownMach {
            e_flags: 0x5ee,
            mach: 0xee
        }
    );
    assert!(err.to_string().contains("0xee"), "{err}");
}

#[test]
fn a_target_id_from_e_flags_equals_the_parsed_offload_arch() {
    assert_eq!(
        TargetId::from_e_flags(0xe4c, 4).unwrap(),
        tid("gfx942:sramecc+:xnack-")
    );
    assert_eq!(TargetId::from_e_flags(0x53f, 2).unwrap(), tid("gfx90a"));
    assert_eq!(TargetId::from_e_flags(0x36, 2).unwrap(), tid("gfx1030"));
}

#[test]
fn generic_code_runs_on_the_members_of_its_family() {
    // AMDGPUUsage "AMDGPU Generic Processors".
    let code = tid("gfx11-generic");
    assert!(code.is_generic());
    for member in [
        "gfx1100", "gfx1101", "gfx1102", "gfx1103", "gfx1150", "gfx1151",
    ] {
        assert!(code.runs_on(&tid(member)), "{member}");
    }
    assert!(!code.runs_on(&tid("gfx1030")));
    assert!(!code.runs_on(&tid("gfx1200")));
    assert!(tid("gfx9-4-generic:xnack-").runs_on(&tid("gfx942:sramecc+:xnack-")));
    assert!(!tid("gfx9-4-generic:xnack-").runs_on(&tid("gfx942:sramecc+:xnack+")));
    assert!(
        !tid("gfx9-generic").runs_on(&tid("gfx90a")),
        "gfx90a is no gfx9-generic member"
    );
    assert!(
        !tid("gfx1100").runs_on(&tid("gfx11-generic")),
        "not the other way round"
    );
}

#[test]
fn generic_e_flags_carry_a_version_byte_that_does_not_change_the_processor() {
    // hipcc 7.0.2 --offload-arch=gfx9-4-generic writes e_flags 0x100055f (generic_v1).
    let t = TargetId::from_e_flags(0x0100_055f, 4).unwrap();
    assert_eq!(t.processor(), "gfx9-4-generic");
    assert_eq!(t.xnack(), FeatureSetting::Any);
    assert_eq!(t.sramecc(), FeatureSetting::Any);
}
