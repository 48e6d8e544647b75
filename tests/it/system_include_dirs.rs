//! The compiler's own include search list (`/usr/local/include` before `/usr/include`, as
//! `-E -v` prints it) is in the header manifest, as `-I` directories are: a header added to a
//! directory searched before the one that held it is compiled, not served the old code object.
//! With Debian's hipcc 5.2.3; the search list is extended through `HIPCC_COMPILE_FLAGS_APPEND`
//! (`-isystem A -isystem B`, standing in for `/usr/local/include` and `/usr/include`, which a
//! test must not write). nvcc's counterpart is in tests/it/nvcc_host_compiler.rs.

use crate::common;

use std::path::Path;

use common::cli;

/// `hipjit compile --compiler hipcc --arch gfx90a` of `home/project/k.hip` with `-isystem`
/// `a` then `b` appended by hipcc; the first line of output and the code object.
fn compile(home: &Path, a: &Path, b: &Path) -> (String, Vec<u8>) {
    let o = cli::compile(
        home,
        "hipcc",
        "gfx90a",
        &home.join("out.co"),
        &[],
        &home.join("project/k.hip"),
    )
    .env(
        "HIPCC_COMPILE_FLAGS_APPEND",
        format!("-isystem {} -isystem {}", a.display(), b.display()),
    )
    .output()
    .expect("hipjit runs");
    assert!(
        o.status.success(),
        "hipjit compile failed: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let out = String::from_utf8_lossy(&o.stdout);
    (
        out.lines().next().unwrap_or_default().to_string(),
        std::fs::read(home.join("out.co")).unwrap(),
    )
}

#[test]
fn a_header_added_to_an_earlier_system_directory_of_hipcc_is_compiled_again() {
    let home = tempfile::tempdir().unwrap();
    let home = home.path();
    std::fs::create_dir_all(home.join("project")).unwrap();
    std::fs::write(
        home.join("project/k.hip"),
        "#include <hip/hip_runtime.h>\n#include <hv.h>\n\
         extern \"C\" __global__ void k(int* p) { p[0] = HV; }\n",
    )
    .unwrap();
    let (a, b) = (home.join("sys/a"), home.join("sys/b"));
    std::fs::create_dir_all(&a).unwrap();
    std::fs::create_dir_all(&b).unwrap();
    std::fs::write(b.join("hv.h"), "#define HV 1\n").unwrap();
    let (first, one) = compile(home, &a, &b);
    assert!(first.contains("miss (compiled)"), "{first}");
    assert!(compile(home, &a, &b).0.contains("hit (disk)"));
    std::fs::write(a.join("hv.h"), "#define HV 2\n").unwrap();
    let (after, two) = compile(home, &a, &b);
    assert!(
        after.contains("miss (compiled)"),
        "a header added to an earlier search directory must be compiled: {after}"
    );
    assert_ne!(two, one);
}
