//! What hipcc and nvcc paste into the shell command lines they run, and what hipjit refuses
//! there: environment variables hipcc pastes ([`check`]), and the compilers' own paths and
//! the directories hipcc derives from them ([`check_program`], [`check_hipcc`],
//! [`check_hipcc_derived`]).
//!
//! hipjit starts no shell: every process it runs gets an argument vector. hipcc does: hipcc
//! 5.x (a Perl script) joins its clang command into one string and runs it with `sh -c`
//! (`system("$CMD")`), pasting `HIPCC_COMPILE_FLAGS_APPEND` unescaped and the directories
//! derived from `HIP_PATH`, `ROCM_PATH`, `HIP_CLANG_PATH` and the other path variables
//! unquoted or in double quotes (measured with Debian's 5.2.3: `'; touch FILE #'` and `$(...)`
//! in those variables ran, in `hipjit compile` and `hipjit doctor`; a `ROCM_PATH` with a space
//! broke the command). So hipjit refuses, naming the variable, a value of [`SHELL_PASTED`]
//! holding a shell metacharacter ([`METACHARACTERS`]) and a value of [`PATH_VARIABLES`]
//! holding a space or tab, before it runs hipcc at all.

use std::ffi::OsString;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// The variables hipcc pastes into its shell command line.
pub const SHELL_PASTED: &[&str] = &[
    "HIPCC_COMPILE_FLAGS_APPEND",
    "HIPCC_LINK_FLAGS_APPEND",
    "HIP_PATH",
    "ROCM_PATH",
    "HIP_CLANG_PATH",
    "HIP_DEVICE_LIB_PATH",
    "DEVICE_LIB_PATH",
    "HIP_LIB_PATH",
    "HIP_INCLUDE_PATH",
    "HIP_ROCCLR_HOME",
    "HSA_PATH",
];

/// The variables of [`SHELL_PASTED`] that name one directory: a space in them splits the
/// word hipcc pastes.
pub const PATH_VARIABLES: &[&str] = &[
    "HIP_PATH",
    "ROCM_PATH",
    "HIP_CLANG_PATH",
    "HIP_DEVICE_LIB_PATH",
    "DEVICE_LIB_PATH",
    "HIP_LIB_PATH",
    "HIP_INCLUDE_PATH",
    "HIP_ROCCLR_HOME",
    "HSA_PATH",
];

/// The bytes `sh` gives a meaning to that hipjit refuses in [`SHELL_PASTED`] values:
/// `; & | $ ` ( ) < > ' " \`, newline, the pattern characters `* ? [` (a word matching a file
/// created later would change), `~` (expanded with `HOME`, which is not keyed) and `#`.
pub const METACHARACTERS: &[u8] = b";&|$`()<>'\"\\\n*?[~#";

/// A variable hipcc would paste into its shell line holds what `sh` would misparse.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("refusing to run hipcc with {name}={value:?}: {reason}; hipcc pastes {name} into a command line it runs with sh, which would misparse it (hipjit itself starts no shell)")]
pub struct UnsafeVariable {
    /// The variable.
    pub name: String,
    /// Its value (lossy text).
    pub value: String,
    /// What is wrong: the metacharacter or the space found.
    pub reason: String,
}

/// Checks `env` (name, value pairs) for values hipcc's shell would misparse.
///
/// Errors: [`UnsafeVariable`] for the first variable of [`SHELL_PASTED`] whose value holds a
/// byte of [`METACHARACTERS`], or of [`PATH_VARIABLES`] whose value holds a space or tab or is
/// a relative path (hipcc runs in a private build directory).
pub fn check(env: &[(String, OsString)]) -> Result<(), UnsafeVariable> {
    for (name, value) in env {
        if !SHELL_PASTED.contains(&name.as_str()) {
            continue;
        }
        let bytes = value.as_bytes();
        let bad = |reason: String| UnsafeVariable {
            name: name.clone(),
            value: value.to_string_lossy().into_owned(),
            reason,
        };
        if let Some(&b) = bytes.iter().find(|b| METACHARACTERS.contains(b)) {
            let shown = if b == b'\n' {
                "a newline".to_owned()
            } else {
                format!("the shell metacharacter `{}`", b as char)
            };
            return Err(bad(format!("it holds {shown}")));
        }
        if PATH_VARIABLES.contains(&name.as_str()) && bytes.iter().any(|&b| b == b' ' || b == b'\t')
        {
            return Err(bad("the directory holds a space".to_owned()));
        }
        if PATH_VARIABLES.contains(&name.as_str()) && !bytes.is_empty() && bytes[0] != b'/' {
            return Err(bad(
                "the directory is relative, and hipcc runs in a private build directory, where it \
                 would name another: give an absolute path"
                    .to_owned(),
            ));
        }
    }
    Ok(())
}

/// The bytes hipcc's shell would misparse in its own path: [`METACHARACTERS`], space and tab
/// (hipcc 5.2.3 pastes the directories it derives from its own location unquoted: measured,
/// `u;cmd;`, `u$(cmd)` ran commands and a space broke the line).
pub const HIPCC_PATH_REFUSED: &[u8] = b";&|$`()<>'\"\\\n*?[~# \t";

/// The bytes nvcc's shell gives a meaning to inside the double quotes nvcc writes its own
/// directory and its input's path in: `"`, `$`, `` ` ``, `\` and newline.
pub const NVCC_PATH_REFUSED: &[u8] = b"\"$`\\\n";

/// A compiler installed at a path that the command lines it runs with `sh` would misparse.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("refusing to run {compiler}: {reason} ({}); {compiler} pastes the directories of its installation, links resolved, into command lines it runs with sh, which would misparse them (hipjit itself starts no shell): install it under a plain path", .path.display())]
pub struct UnsafeProgramPath {
    /// `hipcc` or `nvcc`.
    pub compiler: &'static str,
    /// The path refused: the compiler's, a file beside it or a directory it derives, as
    /// given or as resolved (links followed).
    pub path: PathBuf,
    /// What is wrong: which path, and the byte found.
    pub reason: String,
}

/// Checks the path of `compiler` as given and as resolved (`realpath(3)`: the directory a
/// program finds itself in through `/proc/self/exe`) for a byte of `refused`:
/// [`HIPCC_PATH_REFUSED`] for hipcc; nvcc, which writes its own directory in double quotes,
/// passes `"`, `$`, `` ` ``, `\` and newline (measured with CUDA 13: `;`, `|`, `&`, `>`, `(`,
/// `'`, `*` and spaces in the toolkit's directory compile, `$(cmd)` ran).
///
/// Errors: [`UnsafeProgramPath`] naming the path and the byte.
pub fn check_program(
    compiler: &'static str,
    path: &Path,
    refused: &[u8],
) -> Result<(), UnsafeProgramPath> {
    check_path(compiler, path, refused, "the path")
}

/// [`check_program`] of `path`, which the error's reason calls `what`.
fn check_path(
    compiler: &'static str,
    path: &Path,
    refused: &[u8],
    what: &str,
) -> Result<(), UnsafeProgramPath> {
    let resolved = std::fs::canonicalize(path).ok();
    for p in std::iter::once(path).chain(resolved.as_deref()) {
        if let Some(&b) = p
            .as_os_str()
            .as_bytes()
            .iter()
            .find(|b| refused.contains(b))
        {
            let shown = match b {
                b'\n' => "a newline".to_owned(),
                b' ' => "a space".to_owned(),
                b'\t' => "a tab".to_owned(),
                _ => format!("`{}`", b as char),
            };
            return Err(UnsafeProgramPath {
                compiler,
                path: p.to_path_buf(),
                reason: format!("{what} holds {shown}"),
            });
        }
    }
    Ok(())
}

/// The programs beside hipcc that hipcc runs or loads and whose real directory it takes as the
/// installation's (hipcc 5.x: `hipcc` runs `hipcc.pl` beside it, which sets `HIP_PATH` to the
/// parent of its own real directory, and loads `hipvars.pm`; hipcc 6.x can run `hipcc.bin`).
pub const HIPCC_SIBLINGS: &[&str] = &["hipcc.pl", "hipvars.pm", "hipcc.bin"];

/// Checks, before hipcc runs at all, the paths hipcc derives its installation's directories
/// from by resolving links: its own path ([`check_program`]) and each of [`HIPCC_SIBLINGS`]
/// beside it, as found and as resolved, in the directory it was found in and in its real one.
///
/// Errors: [`UnsafeProgramPath`] naming the first path holding a byte of
/// [`HIPCC_PATH_REFUSED`].
pub fn check_hipcc(path: &Path) -> Result<(), UnsafeProgramPath> {
    check_program("hipcc", path, HIPCC_PATH_REFUSED)?;
    let resolved = std::fs::canonicalize(path).ok();
    let dirs = [path.parent(), resolved.as_deref().and_then(Path::parent)];
    for dir in dirs.into_iter().flatten() {
        for name in HIPCC_SIBLINGS {
            let p = dir.join(name);
            if p.symlink_metadata().is_ok() {
                check_path(
                    "hipcc",
                    &p,
                    HIPCC_PATH_REFUSED,
                    &format!("{name} beside it"),
                )?;
            }
        }
    }
    Ok(())
}

/// Checks the directories hipcc derives from its installation and pastes into its command
/// lines in double quotes, as named and as resolved: hipcc 5.x's
/// `abs_path("$HIP_CLANG_PATH/../lib/clang/<version>/include")` (resolved even where
/// `include` does not exist) and its device library directory, the first of
/// `$ROCM_PATH/amdgcn/bitcode` and `glob("$ROCM_PATH/lib/*/amdgcn/bitcode")`, where
/// `HIP_CLANG_PATH` is the variable, else `$ROCM_PATH/llvm/bin` or `$ROCM_PATH/bin`,
/// `ROCM_PATH` the variable, else `/usr`, `$HIP_PATH/..`, `$HIP_PATH` or `/opt/rocm`, and
/// `HIP_PATH` the variable, else the parent of `hipcc.pl`'s real directory (`hipvars.pm`).
/// Every candidate is checked (a superset: an unrelated `/opt/rocm` whose directories hold
/// such bytes is refused too): each root's `lib/clang`, each entry of it and its `include`
/// (below clang's own directory, named by `InstalledDir:` in `version`, hipcc's `--version`
/// text, too), and each `amdgcn/bitcode` directory of those forms. Run after `--version` and
/// before any other run of hipcc's, also for a remembered identity (a link may have moved
/// since). `hipcc` is hipcc's path, `env` the variables it runs with.
///
/// Errors: [`UnsafeProgramPath`] naming the first directory whose resolved path holds a byte of
/// [`HIPCC_PATH_REFUSED`].
pub fn check_hipcc_derived(
    hipcc: &Path,
    version: &str,
    env: &[(String, OsString)],
) -> Result<(), UnsafeProgramPath> {
    let var = |name: &str| {
        env.iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| PathBuf::from(v))
            .filter(|p| p.is_absolute())
    };
    let resolved = std::fs::canonicalize(hipcc).ok();
    let mut hip_paths: Vec<PathBuf> = var("HIP_PATH").into_iter().collect();
    for dir in [hipcc.parent(), resolved.as_deref().and_then(Path::parent)]
        .into_iter()
        .flatten()
    {
        for script in ["hipcc.pl", "hipcc"] {
            if let Ok(real) = std::fs::canonicalize(dir.join(script)) {
                hip_paths.extend(real.parent().and_then(Path::parent).map(Path::to_path_buf));
            }
        }
    }
    let mut rocm_paths: Vec<PathBuf> = var("ROCM_PATH").into_iter().collect();
    rocm_paths.extend([PathBuf::from("/usr"), PathBuf::from("/opt/rocm")]);
    for h in &hip_paths {
        rocm_paths.push(h.clone());
        rocm_paths.extend(h.parent().map(Path::to_path_buf));
    }
    let mut clang_roots: Vec<PathBuf> = var("HIP_CLANG_PATH")
        .map(|p| p.join(".."))
        .into_iter()
        .collect();
    clang_roots.extend(
        version
            .lines()
            .find_map(|l| l.trim().strip_prefix("InstalledDir:"))
            .map(|d| Path::new(d.trim()).join(".."))
            .filter(|d| d.is_absolute()),
    );
    for r in &rocm_paths {
        clang_roots.push(r.join("llvm"));
        clang_roots.push(r.clone());
    }
    let mut seen = std::collections::HashSet::new();
    let clang_dir = "its clang's resource directory";
    for root in clang_roots {
        if !seen.insert(root.clone()) {
            continue;
        }
        let clang = root.join("lib/clang");
        if clang.symlink_metadata().is_err() {
            continue;
        }
        check_path("hipcc", &clang, HIPCC_PATH_REFUSED, clang_dir)?;
        for e in std::fs::read_dir(&clang).into_iter().flatten().flatten() {
            check_path("hipcc", &e.path(), HIPCC_PATH_REFUSED, clang_dir)?;
            let include = e.path().join("include");
            if include.symlink_metadata().is_ok() {
                check_path("hipcc", &include, HIPCC_PATH_REFUSED, clang_dir)?;
            }
        }
    }
    let bitcode = "a device library directory it may take";
    let mut seen = std::collections::HashSet::new();
    for rocm in rocm_paths {
        if !seen.insert(rocm.clone()) {
            continue;
        }
        let own = rocm.join("amdgcn/bitcode");
        if own.symlink_metadata().is_ok() {
            check_path("hipcc", &own, HIPCC_PATH_REFUSED, bitcode)?;
        }
        for e in std::fs::read_dir(rocm.join("lib"))
            .into_iter()
            .flatten()
            .flatten()
        {
            let dir = e.path().join("amdgcn/bitcode");
            if dir.symlink_metadata().is_ok() {
                check_path("hipcc", &dir, HIPCC_PATH_REFUSED, bitcode)?;
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(name: &str, value: &str) -> Vec<(String, OsString)> {
        vec![(name.to_owned(), OsString::from(value))]
    }

    #[test]
    fn a_program_path_is_checked_as_given_and_as_resolved() {
        let dir = tempfile::tempdir().unwrap();
        let bad = dir.path().join("u$(touch x)");
        std::fs::create_dir(&bad).unwrap();
        std::fs::write(bad.join("hipcc"), "").unwrap();
        let e = check_program("hipcc", &bad.join("hipcc"), HIPCC_PATH_REFUSED).unwrap_err();
        assert_eq!(e.path, bad.join("hipcc"));
        assert!(e.to_string().contains("the path holds `$`"), "{e}");
        // A plain link to it: refused by its target.
        let link = dir.path().join("plain");
        std::os::unix::fs::symlink(bad.join("hipcc"), &link).unwrap();
        let e = check_program("nvcc", &link, b"\"$`\\\n").unwrap_err();
        assert!(e.path.ends_with("u$(touch x)/hipcc"), "{e}");
        // nvcc quotes its directory: a space or `;` is fine for it, not for hipcc.
        let spaced = dir.path().join("a b;c");
        std::fs::create_dir(&spaced).unwrap();
        std::fs::write(spaced.join("nvcc"), "").unwrap();
        check_program("nvcc", &spaced.join("nvcc"), b"\"$`\\\n").unwrap();
        let e = check_program("hipcc", &spaced.join("nvcc"), HIPCC_PATH_REFUSED).unwrap_err();
        assert!(e.to_string().contains("a space"), "{e}");
        check_program(
            "hipcc",
            Path::new("/usr/bin/hipcc-5.2_x+y=z,@%:"),
            HIPCC_PATH_REFUSED,
        )
        .unwrap();
    }

    #[test]
    fn clang_include_directories_are_checked_below_every_root_hipcc_may_take() {
        let dir = tempfile::tempdir().unwrap();
        let hostile = dir.path().join("i$(x)");
        std::fs::create_dir(&hostile).unwrap();
        let llvm = dir.path().join("llvm");
        std::fs::create_dir_all(llvm.join("bin")).unwrap();
        std::fs::create_dir_all(llvm.join("lib/clang/15")).unwrap();
        std::os::unix::fs::symlink(&hostile, llvm.join("lib/clang/15/include")).unwrap();
        let hipcc = Path::new("/nonexistent/bin/hipcc");
        // Through HIP_CLANG_PATH, through ROCM_PATH/llvm, through clang's InstalledDir.
        for (env, version) in [
            (vec![("HIP_CLANG_PATH", llvm.join("bin"))], String::new()),
            (vec![("ROCM_PATH", dir.path().to_path_buf())], String::new()),
            (
                vec![],
                format!("InstalledDir: {}\n", llvm.join("bin").display()),
            ),
        ] {
            let env: Vec<(String, OsString)> = env
                .into_iter()
                .map(|(k, v)| (k.to_owned(), v.into_os_string()))
                .collect();
            let e = check_hipcc_derived(hipcc, &version, &env).unwrap_err();
            assert_eq!(e.path, hostile.canonicalize().unwrap(), "{env:?} {version}");
            assert!(e.reason.contains("resource directory holds `$`"), "{e}");
        }
        // Nothing hostile below the roots: accepted.
        std::fs::remove_file(llvm.join("lib/clang/15/include")).unwrap();
        std::fs::create_dir(llvm.join("lib/clang/15/include")).unwrap();
        let env = vec![(
            "HIP_CLANG_PATH".to_owned(),
            llvm.join("bin").into_os_string(),
        )];
        check_hipcc_derived(hipcc, "", &env).unwrap();
    }

    #[test]
    fn metacharacters_in_pasted_variables_are_refused_by_name() {
        for (name, value) in [
            ("HIPCC_COMPILE_FLAGS_APPEND", "'; touch /tmp/x #'"),
            ("HIP_PATH", "/opt/$(id)"),
            ("ROCM_PATH", "/opt/rocm`id`"),
            ("HIP_CLANG_PATH", "/usr/bin;id"),
            ("HIPCC_COMPILE_FLAGS_APPEND", "-DX=1\n-DY"),
            ("HIPCC_COMPILE_FLAGS_APPEND", "-I/x/in[c]"),
            ("HIPCC_COMPILE_FLAGS_APPEND", "-I~/inc"),
            ("HIPCC_COMPILE_FLAGS_APPEND", "-I/x/*"),
        ] {
            let e = check(&env(name, value)).unwrap_err();
            assert_eq!(e.name, name);
            assert!(e.to_string().contains(name), "{e}");
        }
    }

    #[test]
    fn spaces_are_refused_in_paths_and_allowed_between_flags() {
        let e = check(&env("ROCM_PATH", "/opt/my rocm")).unwrap_err();
        assert!(e.reason.contains("space"), "{e}");
        check(&env("HIPCC_COMPILE_FLAGS_APPEND", "-O2 -DX=1")).unwrap();
        check(&env("PATH", "/a b;c")).unwrap();
        check(&env("HIP_PATH", "/opt/rocm-6.4.3")).unwrap();
    }
}
