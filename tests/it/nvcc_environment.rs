//! The environment variables PyPI's nvcc reads through its `bin/nvcc.profile` change what it
//! compiles (`INCLUDES=-DX=1` defines a macro in every compile): they are part of the cache
//! key, so a compile under another value is never served the first one's cubin.

use crate::common;

use std::path::Path;
use std::process::Command;

use common::toolchain::{pypi_nvcc, utf8 as s};

/// `hipjit compile --compiler nvcc --arch sm_90` of `src` with the cache and identity
/// directory under `home` and `INCLUDES` set to `includes` (unset when `None`); stdout.
fn compile(home: &Path, src: &Path, includes: Option<&str>) -> String {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_hipjit"));
    cmd.args(["compile", "--compiler", "nvcc", "--arch", "sm_90", "-o"])
        .arg(home.join("out.cubin"))
        .arg(src)
        .env("HIPJIT_CACHE_DIR", home.join("cache"))
        .env("XDG_CACHE_HOME", home.join("xdg"))
        .env("HIPJIT_NVCC", pypi_nvcc())
        .env_remove("HIPJIT_COMPILER");
    match includes {
        Some(v) => cmd.env("INCLUDES", v),
        None => cmd.env_remove("INCLUDES"),
    };
    let o = cmd.output().expect("hipjit runs");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8_lossy(&o.stdout).into_owned()
}

#[test]
fn a_compile_under_another_includes_value_is_compiled_again() {
    let home = tempfile::tempdir().unwrap();
    let home = home.path();
    std::fs::create_dir(home.join("project")).unwrap();
    let src = home.join("project/k.hip");
    std::fs::write(
        &src,
        "#ifndef VAL\n#define VAL 99\n#endif\nextern \"C\" __global__ void k(int* p) { p[0] = VAL; }\n",
    )
    .unwrap();
    let plain = compile(home, &src, None);
    assert!(plain.contains("miss"), "{plain}");
    let without = std::fs::read(home.join("out.cubin")).unwrap();
    assert!(compile(home, &src, None).contains("hit (disk)"));
    let with = compile(home, &src, Some("-DVAL=7"));
    assert!(
        with.contains("miss"),
        "INCLUDES=-DVAL=7 must be compiled, not served the cubin without it: {with}"
    );
    assert_ne!(
        std::fs::read(home.join("out.cubin")).unwrap(),
        without,
        "nvcc read INCLUDES (the two cubins differ): {}",
        s(home)
    );
    assert!(compile(home, &src, Some("-DVAL=7")).contains("hit (disk)"));
}
