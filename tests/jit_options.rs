//! Bad compile options give errors naming what is wrong, before any compiler runs.

use hipjit::compiler::{
    check_extra_flag, is_valid_source_name, CompileOptions, OptionsError, RejectedBecause,
};
use hipjit::target_id::TargetId;

fn t(s: &str) -> TargetId {
    TargetId::parse(s).unwrap()
}

fn rejected(flag: &str) -> RejectedBecause {
    match check_extra_flag(flag) {
        Err(OptionsError::RejectedFlag {
            flag: named,
            because,
        }) => {
            assert_eq!(named, flag);
            because
        }
        other => panic!("{flag}: expected a rejection, got {other:?}"),
    }
}

#[test]
fn no_target_is_refused() {
    assert_eq!(
        CompileOptions::default().validate(),
        Err(OptionsError::NoTarget)
    );
}

#[test]
fn two_forms_of_one_processor_are_refused_naming_both() {
    let o = CompileOptions {
        targets: vec![t("gfx90a"), t("gfx90a:xnack-")],
        ..CompileOptions::default()
    };
    let err = o.validate().unwrap_err();
    assert_eq!(
        err,
        OptionsError::MixedTargetForms {
            first: "gfx90a".into(),
            second: "gfx90a:xnack-".into()
        }
    );
}

#[test]
fn both_xnack_settings_of_one_processor_are_accepted() {
    let o = CompileOptions {
        targets: vec![t("gfx90a:xnack+"), t("gfx90a:xnack-")],
        ..CompileOptions::default()
    };
    assert_eq!(o.validate(), Ok(()));
}

#[test]
fn duplicate_target_is_refused() {
    let o = CompileOptions {
        targets: vec![t("gfx906"), t("gfx906")],
        ..CompileOptions::default()
    };
    assert_eq!(
        o.validate(),
        Err(OptionsError::DuplicateTarget("gfx906".into()))
    );
}

#[test]
fn output_format_flags_are_rejected() {
    for f in [
        "-S",
        "-c",
        "-emit-llvm",
        "-fgpu-rdc",
        "--gpu-bundle-output",
        "--offload-compress",
    ] {
        assert_eq!(rejected(f), RejectedBecause::OutputFormat, "{f}");
    }
}

#[test]
fn output_path_flags_are_rejected() {
    for f in ["-o", "-ofoo.o", "-MF", "-MD"] {
        assert_eq!(rejected(f), RejectedBecause::OutputPath, "{f}");
    }
}

#[test]
fn target_list_flags_are_rejected() {
    for f in [
        "--offload-arch=gfx942",
        "--amdgpu-target=gfx90a",
        "-mcpu=gfx90a",
        "--target=x86_64",
    ] {
        assert_eq!(rejected(f), RejectedBecause::TargetList, "{f}");
    }
}

#[test]
fn code_object_version_flag_points_to_its_option() {
    assert_eq!(
        rejected("-mcode-object-version=5"),
        RejectedBecause::CodeObjectVersion
    );
}

#[test]
fn cuda_only_flags_are_rejected() {
    for f in [
        "--cuda-path=/usr/local/cuda",
        "-arch=sm_90",
        "-Xptxas",
        "--use_fast_math",
        "-rdc",
    ] {
        assert_eq!(rejected(f), RejectedBecause::CudaOnly, "{f}");
    }
}

#[test]
fn ordinary_flags_pass() {
    for f in [
        "-ffp-contract=fast",
        "-Wall",
        "-fgpu-flush-denormals-to-zero",
        "-munsafe-fp-atomics",
    ] {
        assert_eq!(check_extra_flag(f), Ok(()), "{f}");
    }
}

#[test]
fn rejection_message_names_the_flag() {
    let err = check_extra_flag("--offload-arch=gfx942").unwrap_err();
    assert!(err.to_string().contains("--offload-arch=gfx942"), "{err}");
}

#[test]
fn define_name_must_be_an_identifier() {
    let o = CompileOptions::for_target(t("gfx90a")).define("1BAD", "x");
    assert_eq!(o.validate(), Err(OptionsError::BadDefine("1BAD".into())));
}

#[test]
fn source_name_with_a_slash_is_refused() {
    let o = CompileOptions {
        source_name: Some("../x.hip".into()),
        ..CompileOptions::for_target(t("gfx90a"))
    };
    assert_eq!(
        o.validate(),
        Err(OptionsError::SourceName("../x.hip".into()))
    );
}

#[test]
fn source_names_validate_accepts_are_exactly_those_is_valid_source_name_accepts() {
    for (name, valid) in [
        ("kernel.hip", true),
        ("a+b.hip", true),
        ("my_kernel-2.cpp", true),
        (".hidden.hip", false),
        ("-x.hip", false),
        ("a b.hip", false),
        ("", false),
    ] {
        assert_eq!(is_valid_source_name(name), valid, "{name:?}");
        let o = CompileOptions {
            source_name: Some(name.into()),
            ..CompileOptions::for_target(t("gfx90a"))
        };
        assert_eq!(o.validate().is_ok(), valid, "{name:?}");
    }
}

#[test]
fn code_object_version_outside_4_to_6_is_refused() {
    let o = CompileOptions {
        code_object_version: Some(3),
        ..CompileOptions::for_target(t("gfx90a"))
    };
    assert_eq!(o.validate(), Err(OptionsError::CodeObjectVersion(3)));
}

#[test]
fn default_flags_are_the_documented_ones() {
    let o = CompileOptions::for_target(t("gfx942:sramecc+:xnack-"));
    assert_eq!(
        o.effective_flags(),
        [
            "-x",
            "hip",
            "--genco",
            "--offload-arch=gfx942:sramecc+:xnack-",
            "-O3",
            "--no-gpu-bundle-output",
            "-std=c++17"
        ]
    );
}
