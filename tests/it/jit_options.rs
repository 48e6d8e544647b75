//! Bad compile options give errors naming what is wrong, before any compiler runs.

use hipjit::compiler::{
    check_extra_flag, is_valid_source_name, CompileOptions, CompilerKind, CxxStd, OptLevel,
    OptionsError, RejectedBecause,
};
use hipjit::cuda::target::SmTarget;
use hipjit::target_id::TargetId;

fn t(s: &str) -> TargetId {
    TargetId::parse(s).unwrap()
}

fn rejected(flag: &str) -> RejectedBecause {
    match check_extra_flag(flag) {
        Err(OptionsError::RejectedFlag {
            flag: named,
            backend,
            because,
        }) => {
            assert_eq!(named, flag);
            assert_eq!(backend, CompilerKind::Hipcc);
            because
        }
        other => panic!("{flag}: expected a rejection, got {other:?}"),
    }
}

fn rejected_by(kind: CompilerKind, flags: &[&str]) -> RejectedBecause {
    let flags: Vec<String> = flags.iter().map(|f| f.to_string()).collect();
    match kind.check_extra_flags(&flags) {
        Err(OptionsError::RejectedFlag {
            backend, because, ..
        }) => {
            assert_eq!(backend, kind);
            because
        }
        other => panic!("{flags:?}: expected a rejection by {kind}, got {other:?}"),
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
    for f in ["-o", "-ofoo.o", "--output=x.o"] {
        assert_eq!(rejected(f), RejectedBecause::OutputPath, "{f}");
    }
}

#[test]
fn dependency_output_flags_are_rejected() {
    for f in [
        "-M",
        "-MM",
        "-MD",
        "-MMD",
        "-MF",
        "-MFdeps.d",
        "-MT",
        "-MQ",
        "-MP",
        "-MG",
    ] {
        assert_eq!(rejected(f), RejectedBecause::DependencyOutput, "{f}");
    }
}

#[test]
fn output_kind_flags_of_the_issue_list_are_rejected() {
    for f in [
        "-c",
        "-S",
        "-E",
        "-save-temps",
        "-save-temps=obj",
        "-fsyntax-only",
        "-fgpu-rdc",
        "--offload-device-only",
        "--offload-host-only",
        "-###",
    ] {
        assert_eq!(rejected(f), RejectedBecause::OutputFormat, "{f}");
    }
}

#[test]
fn flags_reading_files_the_key_does_not_see_are_rejected() {
    for f in [
        "-include",
        "-includefoo.h",
        "-imacros",
        "--rocm-path=/opt/rocm",
        "--hip-path=/opt/rocm",
        "--rocm-device-lib-path=/x",
        "-mlink-builtin-bitcode",
        "-fprofile-use=x.profdata",
        "-fprofile-instr-use=x.profdata",
        "-fprofile-sample-use=x.prof",
        "@flags.rsp",
        "--config=x.cfg",
        "-fplugin=x.so",
        "-fpass-plugin=x.so",
        "--sysroot=/x",
        "-B/x",
        "-Wl,--version-script=x",
    ] {
        assert_eq!(rejected(f), RejectedBecause::ReadsUnkeyedFiles, "{f}");
    }
    assert_eq!(
        rejected_by(CompilerKind::Hipcc, &["-Xclang", "-mlink-bitcode-file"]),
        RejectedBecause::ReadsUnkeyedFiles
    );
    assert_eq!(
        rejected_by(CompilerKind::Hipcc, &["-Xclang", "-load"]),
        RejectedBecause::ReadsUnkeyedFiles
    );
}

#[test]
fn include_directories_as_flags_point_to_the_staged_option() {
    for f in [
        "-I",
        "-I/usr/include",
        "-isystem",
        "-isystem/x",
        "-iquote",
        "-idirafter",
    ] {
        assert_eq!(rejected(f), RejectedBecause::IncludeDirectory, "{f}");
    }
    let err = check_extra_flag("-I/x").unwrap_err().to_string();
    assert!(err.contains("-I") && err.contains("hipcc"), "{err}");
}

#[test]
fn standard_and_optimisation_flags_point_to_their_options() {
    assert_eq!(rejected("-std=c++20"), RejectedBecause::Standard);
    assert_eq!(rejected("-O2"), RejectedBecause::OptLevel);
    assert_eq!(
        rejected_by(CompilerKind::Nvcc, &["-std=c++20"]),
        RejectedBecause::Standard
    );
}

#[test]
fn nvcc_rules_refuse_its_own_output_and_target_flags_and_amd_flags() {
    use RejectedBecause::*;
    for (f, why) in [
        ("-ptx", OutputFormat),
        ("-rdc=true", OutputFormat),
        ("-o", OutputPath),
        ("-MD", DependencyOutput),
        ("-arch=sm_80", TargetList),
        ("-gencode=arch=compute_90,code=sm_90", TargetList),
        ("--options-file", ReadsUnkeyedFiles),
        ("-ccbin=/x", ReadsUnkeyedFiles),
        ("--pre-include=x.h", ReadsUnkeyedFiles),
        ("-isystem", IncludeDirectory),
        ("-mcumode", AmdOnly),
        ("-munsafe-fp-atomics", AmdOnly),
        ("-fgpu-flush-denormals-to-zero", AmdOnly),
    ] {
        assert_eq!(rejected_by(CompilerKind::Nvcc, &[f]), why, "{f}");
    }
    let ok: Vec<String> = [
        "-lineinfo",
        "--use_fast_math",
        "-Xptxas",
        "-v",
        "-maxrregcount=64",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    assert_eq!(CompilerKind::Nvcc.check_extra_flags(&ok), Ok(()));
}

#[test]
fn flag_with_a_newline_is_rejected() {
    assert_eq!(
        rejected("-DX=1\n-o/tmp/x"),
        RejectedBecause::ControlCharacter
    );
}

#[test]
fn options_with_a_refused_extra_flag_do_not_validate() {
    let o = CompileOptions::for_target(t("gfx90a")).flag("-MD");
    let err = o.validate().unwrap_err();
    assert!(err.to_string().contains("\"-MD\""), "{err}");
    assert!(err.to_string().contains("hipcc"), "{err}");
}

#[test]
fn cxx_standard_names_parse_and_print() {
    for (s, std) in [
        ("c++14", CxxStd::Cxx14),
        ("c++17", CxxStd::Cxx17),
        ("c++20", CxxStd::Cxx20),
        ("c++23", CxxStd::Cxx23),
        ("c++2b", CxxStd::Cxx23),
    ] {
        assert_eq!(s.parse::<CxxStd>(), Ok(std), "{s}");
    }
    assert_eq!(CxxStd::Cxx23.to_string(), "c++23");
    assert_eq!(CxxStd::default(), CxxStd::Cxx17);
    assert!("gnu++17".parse::<CxxStd>().is_err());
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
        "-mcumode",
        "-ffast-math",
        "-Werror",
        "-DNAME=1",
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
fn size_optimisation_with_an_sm_target_is_refused_naming_option_and_target() {
    for (level, name) in [
        (OptLevel::Os, "opt_level -Os"),
        (OptLevel::Oz, "opt_level -Oz"),
    ] {
        let o = CompileOptions {
            opt_level: level,
            ..CompileOptions::for_sm(SmTarget::new(90))
        };
        let e = o.validate().unwrap_err();
        assert_eq!(
            e,
            OptionsError::NotOnNvidia {
                option: name,
                target: "sm_90".into()
            }
        );
        assert_eq!(
            e.to_string(),
            format!("{name} applies to AMDGPU code objects only, not to the SM target sm_90")
        );
    }
    // The numbered levels stay accepted, and -Os stays accepted for an AMDGPU target.
    for level in [OptLevel::O0, OptLevel::O1, OptLevel::O2, OptLevel::O3] {
        let o = CompileOptions {
            opt_level: level,
            ..CompileOptions::for_sm(SmTarget::new(90))
        };
        assert_eq!(o.validate(), Ok(()));
    }
    let o = CompileOptions {
        opt_level: OptLevel::Os,
        ..CompileOptions::for_target(t("gfx90a"))
    };
    assert_eq!(o.validate(), Ok(()));
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
