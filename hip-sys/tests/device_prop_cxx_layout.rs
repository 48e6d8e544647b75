//! hip-sys's hand-written device-property layouts against a C++ compiler's layout of the
//! header set of this build: a generated program prints `sizeof` and `offsetof` of every field
//! of the header's structs, compiled with `c++ -x c++ -D__HIP_PLATFORM_AMD__ -isystem DIR`.
//! This also covers `hipDeviceProp_tR0000` of HIP 6+ sets, which lives in
//! `hip/hip_deprecated.h` and so is not in the bindings. Needs a C++ compiler on PATH as `c++`
//! (or `CXX`): `apt-get install g++`.

use std::path::{Path, PathBuf};
use std::process::Command;

use hipjit_sys::build_info;
use hipjit_sys::device_prop::{hipDeviceProp_tR0000, hipDeviceProp_tR0600};

#[macro_use]
mod layout_fields;

type Layout = (Vec<(&'static str, usize)>, usize);

/// Compiles and runs a program printing the layout of the C struct `c_type` (fields named as
/// in `ours`), from `dir`'s headers plus `extra_include`; returns `(field offsets, size)`.
fn cxx_layout(dir: &Path, extra_include: Option<&str>, c_type: &str, ours: &Layout) -> Layout {
    let work = std::env::temp_dir().join(format!(
        "hip-sys-cxx-layout-{}-{c_type}",
        std::process::id()
    ));
    std::fs::create_dir_all(&work).unwrap();
    let mut program = String::from("#include <hip/hip_runtime_api.h>\n");
    if let Some(extra) = extra_include {
        program += &format!("#include <{extra}>\n");
    }
    program += "#include <cstddef>\n#include <cstdio>\nint main() {\n";
    program += &format!("  std::printf(\"sizeof %zu\\n\", sizeof({c_type}));\n");
    for (field, _) in &ours.0 {
        program += &format!("  std::printf(\"{field} %zu\\n\", offsetof({c_type}, {field}));\n");
    }
    program += "  return 0;\n}\n";
    let source = work.join("layout.cpp");
    let binary = work.join("layout");
    std::fs::write(&source, program).unwrap();
    let cxx = std::env::var_os("CXX").unwrap_or_else(|| "c++".into());
    let compiled = Command::new(&cxx)
        .args(["-x", "c++", "-D__HIP_PLATFORM_AMD__", "-isystem"])
        .arg(dir)
        .arg(&source)
        .arg("-o")
        .arg(&binary)
        .output()
        .unwrap_or_else(|e| {
            panic!(
                "cannot run {cxx:?} ({e}): install a C++ compiler (apt-get install g++) or set CXX"
            )
        });
    assert!(
        compiled.status.success(),
        "{cxx:?} failed on the layout program for {c_type}:\n{}",
        String::from_utf8_lossy(&compiled.stderr)
    );
    let run = Command::new(&binary).output().unwrap();
    assert!(
        run.status.success(),
        "the layout program for {c_type} failed"
    );
    let _ = std::fs::remove_dir_all(&work);
    let text = String::from_utf8(run.stdout).unwrap();
    let mut size = 0;
    let mut offsets = Vec::new();
    for line in text.lines() {
        let (name, value) = line.split_once(' ').unwrap();
        let value: usize = value.parse().unwrap();
        if name == "sizeof" {
            size = value;
        } else {
            let field = ours.0.iter().find(|(f, _)| *f == name).unwrap().0;
            offsets.push((field, value));
        }
    }
    (offsets, size)
}

/// The header directory of this build; `None` for pregenerated bindings (no header set: their
/// structs are checked by `device_prop_layout` against the bindings themselves).
fn build_dir() -> Option<PathBuf> {
    match build_info::INCLUDE_DIR {
        Some(dir) => Some(PathBuf::from(dir)),
        None => {
            assert_eq!(build_info::BINDINGS, "pregenerated");
            eprintln!("pregenerated bindings: no header set to compile against");
            None
        }
    }
}

fn assert_layout(c_type: &str, ours: Layout, theirs: Layout) {
    assert_eq!(
        ours.0, theirs.0,
        "field offsets of {c_type}: hip-sys (left) vs C++ (right)"
    );
    assert_eq!(
        ours.1, theirs.1,
        "size of {c_type}: hip-sys (left) vs C++ (right)"
    );
}

#[test]
fn r0000_layout_matches_the_cxx_layout_of_the_headers() {
    let Some(dir) = build_dir() else { return };
    let ours: Layout = r0000_fields!(offsets, hipDeviceProp_tR0000, ());
    // HIP 6+: hipDeviceProp_tR0000 in hip/hip_deprecated.h; HIP 5.x: hipDeviceProp_t itself.
    let theirs = if dir.join("hip/hip_deprecated.h").is_file() {
        cxx_layout(
            &dir,
            Some("hip/hip_deprecated.h"),
            "hipDeviceProp_tR0000",
            &ours,
        )
    } else {
        assert!(
            build_info::HIP_VERSION.starts_with("5."),
            "HIP {} headers without hip/hip_deprecated.h",
            build_info::HIP_VERSION
        );
        cxx_layout(&dir, None, "hipDeviceProp_t", &ours)
    };
    assert_layout("hipDeviceProp_tR0000", ours, theirs);
}

#[test]
fn r0600_layout_matches_the_cxx_layout_of_hip6_headers() {
    let Some(dir) = build_dir() else { return };
    if build_info::HIP_VERSION.starts_with("5.") {
        // HIP 5.x has no 6.0 layout: its hipDeviceProp_t is the old one (checked above).
        let r0600_in_bindings = cfg!(hip_sys_type = "hipDeviceProp_tR0600");
        assert!(
            !r0600_in_bindings,
            "HIP 5.x bindings with hipDeviceProp_tR0600"
        );
        return;
    }
    let ours: Layout = r0600_fields!(offsets, hipDeviceProp_tR0600, ());
    let theirs = cxx_layout(&dir, None, "hipDeviceProp_tR0600", &ours);
    assert_layout("hipDeviceProp_tR0600", ours, theirs);
}
