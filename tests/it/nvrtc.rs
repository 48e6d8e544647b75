//! NVRTC, the in-process compiler of HIP's NVIDIA platform, against the real library: PyPI's
//! nvidia-cuda-nvrtc, which scripts/setup.sh installs beside nvcc in
//! `$HIPJIT_CI_CACHE/nvcc-venv` (`nvidia/cu13/lib/libnvrtc.so.13` beside
//! `nvidia/cu13/bin/nvcc`). No GPU is needed to compile cubins.

use crate::common;
use std::ffi::OsString;

use std::path::{Path, PathBuf};

use hipjit::cache::key::{self, CacheKey};
use hipjit::cache::manifest;
use hipjit::code_object::cubin::Cubin;
use hipjit::compiler::nvrtc::{self, NvRtc};
use hipjit::compiler::rtc::{RtcError, RtcInput};
use hipjit::compiler::{CompilerKind, Severity};
use hipjit::cuda::target::SmTarget;

use common::toolchain::pypi_nvcc as venv_nvcc;

/// NVRTC found the way hipjit finds it beside an nvcc, with no variable set.
fn nvrtc() -> NvRtc {
    NvRtc::open_with_env(Some(&venv_nvcc()), |_| None).unwrap_or_else(|e| panic!("{e}"))
}

const SAXPY: &str = r#"
extern "C" __global__ void saxpy(float a, const float* x, float* y, unsigned n) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + y[i];
}
template <int N> __global__ void scale(float* x) { x[threadIdx.x] *= N; }
template __global__ void scale<3>(float*);
"#;

fn sm90() -> Vec<String> {
    vec![
        nvrtc::arch_option(SmTarget::new(90)),
        "-default-device".to_owned(),
    ]
}

fn input<'a>(source: &'a [u8], options: &'a [String]) -> RtcInput<'a> {
    RtcInput {
        source,
        name: "saxpy.cu",
        headers: &[],
        include_dirs: &[],
        options,
    }
}

#[test]
fn nvrtc_is_found_beside_pips_nvcc() {
    let nvcc = venv_nvcc();
    let rtc = nvrtc();
    let lib_dir = nvcc.parent().unwrap().parent().unwrap().join("lib");
    assert_eq!(rtc.path().parent(), Some(lib_dir.as_path()), "{rtc:?}");
    assert!(rtc.found().starts_with("beside "), "{rtc:?}");
    assert_eq!(
        rtc.version().map(|v| v.0),
        Some(13),
        "PyPI's nvidia-cuda-nvrtc 13.5"
    );
}

#[test]
fn saxpy_compiles_to_an_sm_90_cubin() {
    let out = nvrtc().compile(&input(SAXPY.as_bytes(), &sm90())).unwrap();
    let cubin = Cubin::from_bytes(&out.code).unwrap();
    assert_eq!(cubin.target(), SmTarget::new(90));
    let mut names: Vec<&str> = cubin.kernels().iter().map(|k| k.name.as_str()).collect();
    names.sort();
    assert_eq!(names, ["_Z5scaleILi3EEvPf", "saxpy"]);
}

#[test]
fn a_virtual_architecture_is_refused_before_compiling() {
    let opts = vec!["-arch=compute_90".to_owned()];
    let err = nvrtc()
        .compile(&input(SAXPY.as_bytes(), &opts))
        .unwrap_err();
    let RtcError::Arch { arch, reason, .. } = &err else {
        panic!("{err:?}")
    };
    assert_eq!(arch, "compute_90");
    assert!(reason.contains("use sm_90"), "{err}");
}

#[test]
fn a_syntax_error_returns_the_program_log() {
    let source = "extern \"C\" __global__ void k(int* o) { o[0] = 1; }\nint bad = ;\n";
    let err = nvrtc()
        .compile(&RtcInput {
            name: "broken.cu",
            ..input(source.as_bytes(), &sm90())
        })
        .unwrap_err();
    let RtcError::Compile { log, .. } = &err else {
        panic!("{err:?}")
    };
    // NVRTC's format: `name(line): error: ...`, no column.
    assert!(
        log.contains("broken.cu(2): error: expected an expression"),
        "{log}"
    );
    let RtcError::Compile { diagnostics, .. } = &err else {
        unreachable!()
    };
    let d = &diagnostics[0];
    assert_eq!(
        (
            d.severity,
            d.file.as_deref(),
            d.line,
            d.column,
            d.message.as_str()
        ),
        (
            Severity::Error,
            Some("broken.cu"),
            Some(2),
            None,
            "expected an expression"
        )
    );
}

#[test]
fn headers_in_memory_are_included() {
    let headers = vec![("shape.h".to_owned(), b"#define WIDTH 7\n".to_vec())];
    let source =
        "#include \"shape.h\"\nextern \"C\" __global__ void fill(int* o) { o[0] = WIDTH; }\n";
    let out = nvrtc()
        .compile(&RtcInput {
            headers: &headers,
            include_dirs: &[],
            ..input(source.as_bytes(), &sm90())
        })
        .unwrap();
    let cubin = Cubin::from_bytes(&out.code).unwrap();
    assert!(cubin.kernel("fill").is_ok());
}

#[test]
fn a_nul_byte_in_a_header_is_refused_before_compiling() {
    let headers = vec![("shape.h".to_owned(), b"#define WIDTH 7\0\n".to_vec())];
    let err = nvrtc()
        .compile(&RtcInput {
            headers: &headers,
            include_dirs: &[],
            ..input(b"#include \"shape.h\"\n", &sm90())
        })
        .unwrap_err();
    let RtcError::NulByte { what, offset, .. } = &err else {
        panic!("{err:?}")
    };
    assert_eq!((what.as_str(), *offset), ("header \"shape.h\"", 15));
}

#[test]
fn the_variable_wins_and_a_bad_value_is_an_error_naming_it() {
    let lib = nvrtc().path().to_path_buf();
    let env = |name: &str| (name == nvrtc::NVRTC_LIBRARY_ENV).then(|| lib.clone().into_os_string());
    let rtc = NvRtc::open_with_env(None, env).unwrap();
    assert_eq!(rtc.found(), nvrtc::NVRTC_LIBRARY_ENV);
    let bad = |name: &str| (name == nvrtc::NVRTC_LIBRARY_ENV).then(|| OsString::from("libm.so.6"));
    let err = NvRtc::open_with_env(None, bad).unwrap_err();
    assert!(
        matches!(
            err,
            RtcError::MissingSymbol {
                symbol: "nvrtcCreateProgram",
                ..
            }
        ),
        "{err:?}"
    );
}

#[test]
fn every_candidate_is_listed_when_none_opens() {
    let empty = tempfile::tempdir().unwrap();
    let cuda_path = empty.path().to_path_buf();
    let env = move |name: &str| (name == "CUDA_PATH").then(|| cuda_path.clone().into_os_string());
    let fake_nvcc = Path::new("/nonexistent/cuda/bin/nvcc");
    match NvRtc::open_with_env(Some(fake_nvcc), env) {
        Err(err @ RtcError::NotFound { .. }) => {
            let text = err.to_string();
            assert!(
                text.contains(&format!(
                    "{}/lib64 (lib64 under CUDA_PATH)",
                    empty.path().display()
                )),
                "{text}"
            );
            assert!(
                text.contains("/nonexistent/cuda/lib (beside /nonexistent/cuda/bin/nvcc)"),
                "{text}"
            );
            assert!(text.contains("libnvrtc.so.13 (dynamic loader)"), "{text}");
        }
        // The dynamic loader may know an NVRTC of the machine: then it is the last resort.
        Ok(rtc) => assert_eq!(rtc.found(), "dynamic loader"),
        Err(other) => panic!("{other:?}"),
    }
}

#[test]
fn the_identity_lists_the_library_and_its_builtins() {
    let files = nvrtc().identity_files();
    let names: Vec<String> = files
        .iter()
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    assert_eq!(
        names,
        ["libnvrtc-builtins.so.13.5", "libnvrtc.so.13"],
        "{files:?}"
    );
}

const INCLUDES: &str = "#include \"shape.h\"\n\
    extern \"C\" __global__ void k(int* o) { o[0] = WIDTH; }\n";

/// What NVRTC opened under its include directories is reported (observed: it gives no
/// dependency list), and nothing else: a file nothing includes is no dependency.
#[test]
fn the_files_nvrtc_opened_under_the_include_directories_are_reported() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("sub")).unwrap();
    std::fs::write(dir.path().join("shape.h"), "#define WIDTH 7\n").unwrap();
    std::fs::write(dir.path().join("sub/other.h"), "#error never read\n").unwrap();
    let include_dirs = [dir.path().to_path_buf()];
    let out = nvrtc()
        .compile(&RtcInput {
            include_dirs: &include_dirs,
            ..input(INCLUDES.as_bytes(), &sm90())
        })
        .unwrap();
    assert!(Cubin::from_bytes(&out.code).unwrap().kernel("k").is_ok());
    let got: Vec<_> = out
        .dependencies
        .iter()
        .map(|d| (d.include_dir, d.name.clone(), d.path.clone()))
        .collect();
    assert_eq!(
        got,
        [(
            Some(0),
            PathBuf::from("shape.h"),
            dir.path().join("shape.h")
        ),]
    );
}

/// Two compiles in one process, the header a link into a versioned directory switched between
/// them (`shape.h -> ext/cur/shape.h`, `ext/cur -> v1`, then `v2`): the second compile reads
/// v2's header and must report it, as a compile in a fresh process does (the walk of the
/// include directory the first compile remembered watches v1).
#[test]
fn a_header_link_through_a_switched_directory_link_is_reported_by_the_next_compile() {
    let dir = tempfile::tempdir().unwrap();
    let include = dir.path().join("include");
    let ext = dir.path().join("ext");
    std::fs::create_dir(&include).unwrap();
    for (v, width) in [("v1", 7), ("v2", 9)] {
        std::fs::create_dir_all(ext.join(v)).unwrap();
        std::fs::write(
            ext.join(v).join("shape.h"),
            format!("#define WIDTH {width}\n"),
        )
        .unwrap();
    }
    std::os::unix::fs::symlink("v1", ext.join("cur")).unwrap();
    std::os::unix::fs::symlink(ext.join("cur/shape.h"), include.join("shape.h")).unwrap();
    // Every directory a second old, as a toolkit's or a project's are.
    std::thread::sleep(std::time::Duration::from_millis(1100));
    let include_dirs = [include.clone()];
    let rtc = nvrtc();
    let options = sm90();
    let reported = |rtc: &NvRtc| -> Vec<(Option<usize>, PathBuf)> {
        let out = rtc
            .compile(&RtcInput {
                include_dirs: &include_dirs,
                ..input(INCLUDES.as_bytes(), &options)
            })
            .unwrap();
        out.dependencies
            .iter()
            .map(|d| (d.include_dir, d.name.clone()))
            .collect()
    };
    let first = reported(&rtc);
    assert!(
        first.contains(&(Some(0), PathBuf::from("shape.h"))),
        "{first:?}"
    );
    std::os::unix::fs::symlink("v2", ext.join("cur.new")).unwrap();
    std::fs::rename(ext.join("cur.new"), ext.join("cur")).unwrap();
    let second = reported(&rtc);
    assert!(
        second.contains(&(Some(0), PathBuf::from("shape.h"))),
        "{second:?}"
    );
}

#[test]
fn a_header_beside_the_source_name_is_not_read() {
    // NVRTC looks up quoted includes in the directory of the program's name by default, a file
    // hipjit would not track; hipjit turns that off.
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("shape.h"), "#define WIDTH 7\n").unwrap();
    let name = dir.path().join("kern.cu");
    let err = nvrtc()
        .compile(&RtcInput {
            name: name.to_str().unwrap(),
            ..input(INCLUDES.as_bytes(), &sm90())
        })
        .unwrap_err();
    assert!(
        err.to_string()
            .contains("cannot open source file \"shape.h\""),
        "{err}"
    );
}

#[test]
fn the_program_name_nvrtc_sees_is_the_same_in_every_compile() {
    // `__FILE__` is the name NVRTC was given for the program: a kernel that stores it (as an
    // `assert` does) compiles to the same cubin every time, and to one that names the source
    // as `hipjit::compiler::rtc::nvrtc::PROGRAM_DIRECTORY`'s file, not a directory of the
    // compile's own (a new scratch directory each time made each cubin differ, and NVRTC 13.0
    // took twice as long under a name it had not compiled before).
    const NAMED: &str = r#"
__device__ const char where[] = __FILE__;
extern "C" __global__ void k(char* out) { out[threadIdx.x] = where[threadIdx.x]; }
"#;
    let rtc = nvrtc();
    let options = sm90();
    let first = rtc.compile(&input(NAMED.as_bytes(), &options)).unwrap();
    let second = rtc.compile(&input(NAMED.as_bytes(), &options)).unwrap();
    assert!(
        first.code == second.code,
        "two compiles of one source differ"
    );
    let name = format!("{}/saxpy.cu", nvrtc::PROGRAM_DIRECTORY);
    assert!(
        first.code.windows(name.len()).any(|w| w == name.as_bytes()),
        "the cubin does not hold {name:?}"
    );
}

#[test]
fn editing_a_header_in_an_include_directory_changes_the_key_and_the_cubin() {
    let dir = tempfile::tempdir().unwrap();
    let header = dir.path().join("shape.h");
    std::fs::write(&header, "#define WIDTH 7\n").unwrap();
    let include_dirs = [dir.path().to_path_buf()];
    let rtc = nvrtc();
    let options = sm90();
    let compile = || {
        rtc.compile(&RtcInput {
            include_dirs: &include_dirs,
            ..input(INCLUDES.as_bytes(), &options)
        })
        .unwrap()
    };
    let id = common::toolchain::bare_identity(CompilerKind::Nvrtc, rtc.path());
    let direct = CacheKey([2; 32]);
    let first = compile();
    let recorded = manifest::record(
        INCLUDES.as_bytes(),
        &first.dependencies,
        &include_dirs,
        &[],
        &id,
        first.started,
        None,
    );
    let first_key = key::result_key(&direct, &recorded.manifest);
    let now = recorded.manifest.current(&include_dirs, &id.root).unwrap();
    assert_eq!(key::result_key(&direct, &now), first_key);

    std::fs::write(&header, "#define WIDTH 8\n").unwrap();
    let now = recorded.manifest.current(&include_dirs, &id.root).unwrap();
    let looked_up = key::result_key(&direct, &now);
    assert_ne!(
        looked_up, first_key,
        "the edited header must not find the old entry"
    );
    let second = compile();
    assert_ne!(second.code, first.code, "WIDTH 8 compiles to another cubin");

    // A file nothing includes, added beside it, is no dependency: the same manifest.
    std::fs::write(dir.path().join("new.h"), "\n").unwrap();
    let after_add = manifest::record(
        INCLUDES.as_bytes(),
        &compile().dependencies,
        &include_dirs,
        &[],
        &id,
        std::time::SystemTime::UNIX_EPOCH,
        None,
    );
    assert_eq!(key::result_key(&direct, &after_add.manifest), looked_up);
}

/// Files nothing includes never affect an NVRTC compile, its key or a refusal: a `.txt` with a
/// computed `#include`, and more files than the old walk of the include directories took
/// (20,000), beside the one header read.
#[test]
fn files_nothing_includes_neither_refuse_nor_key_an_nvrtc_compile() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("shape.h"), "#define WIDTH 7\n").unwrap();
    std::fs::create_dir(dir.path().join("notes")).unwrap();
    std::fs::write(
        dir.path().join("notes/template.txt"),
        "#include HEADER_OF_THE_DAY\n#include \"/etc/hostname\"\n",
    )
    .unwrap();
    let many = dir.path().join("data");
    std::fs::create_dir(&many).unwrap();
    for i in 0..20_001 {
        std::fs::File::create(many.join(i.to_string())).unwrap();
    }
    let include_dirs = [dir.path().to_path_buf()];
    let out = nvrtc()
        .compile(&RtcInput {
            include_dirs: &include_dirs,
            ..input(INCLUDES.as_bytes(), &sm90())
        })
        .unwrap_or_else(|e| panic!("{e}"));
    let names: Vec<_> = out.dependencies.iter().map(|d| d.name.clone()).collect();
    assert_eq!(names, [PathBuf::from("shape.h")]);
}

/// A header the source reaches that can name a file outside the include directories is still
/// refused, before the compile; a tree too large to watch is refused naming why (Auto then
/// compiles with nvcc).
#[test]
fn a_reached_untracked_include_and_an_unwatchable_tree_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("shape.h"), "#include \"../outside.h\"\n").unwrap();
    let include_dirs = [dir.path().to_path_buf()];
    let err = nvrtc()
        .compile(&RtcInput {
            include_dirs: &include_dirs,
            ..input(INCLUDES.as_bytes(), &sm90())
        })
        .unwrap_err();
    let RtcError::NoDependencies { reason, .. } = &err else {
        panic!("{err:?}")
    };
    assert!(
        reason.contains("../outside.h") && reason.contains("shape.h"),
        "{reason}"
    );

    let wide = tempfile::tempdir().unwrap();
    std::fs::write(wide.path().join("shape.h"), "#define WIDTH 7\n").unwrap();
    for i in 0..=hipjit::compiler::opened_files::MAX_WATCHED_DIRS {
        std::fs::create_dir(wide.path().join(i.to_string())).unwrap();
    }
    let include_dirs = [wide.path().to_path_buf()];
    let err = nvrtc()
        .compile(&RtcInput {
            include_dirs: &include_dirs,
            ..input(INCLUDES.as_bytes(), &sm90())
        })
        .unwrap_err();
    let RtcError::NoDependencies { reason, .. } = &err else {
        panic!("{err:?}")
    };
    assert!(reason.contains("directories"), "{reason}");
}

#[test]
fn an_include_directory_that_is_not_one_is_named() {
    let file = tempfile::NamedTempFile::new().unwrap();
    let include_dirs = [file.path().to_path_buf(), PathBuf::from("/nonexistent/inc")];
    for dirs in [&include_dirs[..1], &include_dirs[1..]] {
        let err = nvrtc()
            .compile(&RtcInput {
                include_dirs: dirs,
                ..input(INCLUDES.as_bytes(), &sm90())
            })
            .unwrap_err();
        let RtcError::IncludeDir { path, .. } = &err else {
            panic!("{err:?}")
        };
        assert_eq!(path, &dirs[0]);
    }
}

#[test]
fn errors_in_a_header_name_the_include_directory_as_given() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("real")).unwrap();
    std::os::unix::fs::symlink(dir.path().join("real"), dir.path().join("link")).unwrap();
    std::fs::write(
        dir.path().join("real/shape.h"),
        "#define WIDTH 7\nint bad = ;\n",
    )
    .unwrap();
    let include_dirs = [dir.path().join("link")];
    let err = nvrtc()
        .compile(&RtcInput {
            name: "kern.cu",
            include_dirs: &include_dirs,
            ..input(INCLUDES.as_bytes(), &sm90())
        })
        .unwrap_err();
    let RtcError::Compile { diagnostics, .. } = &err else {
        panic!("{err:?}")
    };
    let header = dir.path().join("link/shape.h").display().to_string();
    let d = &diagnostics[0];
    assert_eq!(
        (d.file.as_deref(), d.line, d.message.as_str()),
        (Some(header.as_str()), Some(2), "expected an expression")
    );
}

#[test]
fn an_unknown_option_is_a_diagnostic_without_a_file() {
    let mut options = sm90();
    options.push("-Wall".to_owned());
    let err = nvrtc()
        .compile(&input(INCLUDES.as_bytes(), &options))
        .unwrap_err();
    let RtcError::Compile { diagnostics, .. } = &err else {
        panic!("{err:?}")
    };
    assert_eq!(diagnostics.len(), 1, "{diagnostics:?}");
    assert_eq!(
        (
            diagnostics[0].file.as_deref(),
            diagnostics[0].message.as_str()
        ),
        (None, "unrecognized option -Wall found")
    );
}

#[test]
fn the_toolkit_headers_beside_nvrtc_are_not_walked_but_an_other_i_option_is() {
    let rtc = nvrtc();
    let toolkit = rtc
        .include_dir()
        .expect("PyPI's nvidia/cu13/include beside the library");
    let other = tempfile::tempdir().unwrap();
    std::fs::write(other.path().join("shape.h"), "#define WIDTH 7\n").unwrap();
    let mut options = nvrtc::hip_options(SmTarget::new(90), Some(&toolkit));
    options.push(format!("-I{}", other.path().display()));
    let headers = nvrtc::prelude_headers(Some(&toolkit));
    let out = rtc
        .compile(&RtcInput {
            headers: &headers,
            ..input(INCLUDES.as_bytes(), &options)
        })
        .unwrap();
    let paths: Vec<&Path> = out.dependencies.iter().map(|d| d.path.as_path()).collect();
    assert_eq!(paths, [other.path().join("shape.h").as_path()]);
}

/// The temporary directory inside an include directory (`TMPDIR` under the project `-I` names):
/// NVRTC's scratch directory then lies in a watched tree, and removing it once the compile is
/// done must not be taken for a watched directory removed during the compile (which refuses
/// the result: its dependencies would be unknown). Three misses, each with its own cache, each
/// compiling the header's value.
#[test]
fn nvrtc_compiles_with_the_temporary_directory_inside_an_include_directory() {
    let d = tempfile::tempdir().unwrap();
    let project = d.path().join("project");
    std::fs::create_dir_all(project.join("tmp")).unwrap();
    std::fs::write(
        project.join("kernel.hip"),
        "#include \"value.h\"\nextern \"C\" __global__ void k(int* p) { p[0] = VALUE; }\n",
    )
    .unwrap();
    std::fs::write(project.join("value.h"), "#define VALUE 7\n").unwrap();
    for run in 0..3 {
        let out = d.path().join(format!("out-{run}.cubin"));
        let o = std::process::Command::new(env!("CARGO_BIN_EXE_hipjit"))
            .args(["compile", "--compiler", "nvrtc", "--arch", "sm_90", "-I"])
            .arg(&project)
            .arg("-o")
            .arg(&out)
            .arg(project.join("kernel.hip"))
            .env("TMPDIR", project.join("tmp"))
            .env("HIPJIT_CACHE_DIR", d.path().join(format!("cache-{run}")))
            .env("XDG_CACHE_HOME", d.path().join("xdg"))
            .env("HIPJIT_NVCC", common::toolchain::pypi_nvcc())
            .env_remove("HIPJIT_COMPILER")
            .output()
            .unwrap();
        assert_eq!(
            o.status.code(),
            Some(0),
            "run {run}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        let stdout = String::from_utf8_lossy(&o.stdout);
        assert!(stdout.contains("miss"), "run {run}: {stdout}");
        assert!(Cubin::from_bytes(&std::fs::read(&out).unwrap()).is_ok());
    }
}
