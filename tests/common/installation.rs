//! A stand-in hipcc installation: `<prefix>/bin/hipcc`, a shell script that answers
//! `--version` (naming `<prefix>/llvm/bin` as clang's InstalledDir), `-###` (naming its
//! clang and the device library `<prefix>/bitcode/ocml.bc`) as the real one does and
//! `-fsyntax-only -v` (its include search list: none), so that
//! hipjit computes a compiler identity over those files; what it does when asked to compile
//! is the test's ([`Compile`]). Copying or moving the prefix gives the same compiler at
//! another place.

use std::path::{Path, PathBuf};

use hipjit::compiler::selection::CompilerChoice;
use hipjit::compiler::CompilerConfig;
use hipjit::jit::{CacheLocation, Jit, JitOptions, RecordLocation, RemoteLocation};

/// What the stand-in does when asked to compile.
pub enum Compile {
    /// Writes a real gfx90a code object (`tests/data/code-objects/single-gfx90a.hsaco`) as
    /// its output, and a dependency list naming only the source.
    CopyCodeObject,
    /// Appends its pid to `$HOME/started`, then sleeps for a minute (a compile to interrupt).
    Sleep,
}

/// Makes the installation at `prefix`; `version` is the HIP version it reports (part of its
/// identity). Returns its `bin/hipcc`.
pub fn installation(prefix: &Path, version: &str, compile: Compile) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    for d in ["bin", "llvm/bin", "bitcode"] {
        std::fs::create_dir_all(prefix.join(d)).unwrap();
    }
    let compile = match compile {
        Compile::CopyCodeObject => format!(
            "cp {} out.hsaco\nfor a; do case \"$a\" in *.hip) src=\"$a\";; esac; done\n\
             echo \"out.hsaco: $src\" > deps.d\n",
            super::code_object("single-gfx90a.hsaco").display()
        ),
        Compile::Sleep => "echo $$ >> \"$HOME/started\"\nexec sleep 60\n".to_string(),
    };
    let hipcc = prefix.join("bin/hipcc");
    std::fs::write(
        &hipcc,
        format!(
            "#!/bin/sh\nroot=$(cd \"$(dirname \"$0\")/..\" && pwd)\n\
             case \"$1\" in\n\
             --version) echo 'HIP version: {version}'; echo 'clang version 1.0'; \
             echo \"InstalledDir: $root/llvm/bin\"; exit 0;;\n\
             -###) echo \"\\\"$root/llvm/bin/clang\\\" \\\"-cc1\\\" \
             \\\"-mlink-builtin-bitcode\\\" \\\"$root/bitcode/ocml.bc\\\"\"; exit 0;;\n\
             -fsyntax-only) exit 0;;\n\
             esac\n{compile}"
        ),
    )
    .unwrap();
    std::fs::set_permissions(&hipcc, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::write(prefix.join("llvm/bin/clang"), "clang 1.0 stand-in\n").unwrap();
    std::fs::write(prefix.join("bitcode/ocml.bc"), "ocml 1\n").unwrap();
    hipcc
}

/// The compiler settings that run `hipcc` with a private home `identity` (where its identity
/// is remembered) and nothing else of this process's environment.
pub fn config(hipcc: &Path, identity: &Path) -> CompilerConfig {
    CompilerConfig {
        hipcc: Some(hipcc.to_path_buf()),
        env: Some(vec![
            ("HOME".into(), identity.as_os_str().to_owned()),
            ("PATH".into(), "/usr/bin:/bin".into()),
        ]),
        identity_dir: Some(identity.to_path_buf()),
        ..CompilerConfig::default()
    }
}

/// A `Jit` compiling with `hipcc` ([`config`]) through the disk cache root `root`, with no
/// remote tier and no record.
pub fn jit(root: &Path, hipcc: &Path, identity: &Path) -> Jit {
    jit_in(
        CacheLocation::Roots(vec![root.to_path_buf()]),
        hipcc,
        identity,
    )
}

/// [`jit`] with the disk cache `cache`.
pub fn jit_in(cache: CacheLocation, hipcc: &Path, identity: &Path) -> Jit {
    Jit::new(JitOptions {
        compiler: Some(CompilerChoice::Hipcc),
        compiler_config: config(hipcc, identity),
        cache,
        remote_cache: RemoteLocation::Disabled,
        record: RecordLocation::Disabled,
        ..JitOptions::default()
    })
    .unwrap_or_else(|e| panic!("{e}"))
}
