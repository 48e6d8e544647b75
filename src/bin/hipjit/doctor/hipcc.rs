//! The hipcc compilers on this machine: each one's `--version`, and the `hip_runtime.h` it
//! resolves, asked from the compiler itself.

use super::*;

pub(super) fn compilers() -> Vec<CompilerReport> {
    let mut candidates: Vec<(String, PathBuf)> = Vec::new();
    if let Some(p) = std::env::var_os("HIPJIT_HIPCC").filter(|v| !v.is_empty()) {
        candidates.push(("HIPJIT_HIPCC".into(), PathBuf::from(p)));
    }
    for r in discovery::install_roots() {
        let origin = r.origin.to_string();
        match &r.origin {
            Origin::OnPath(tool) if tool.ends_with("hipcc") => {
                candidates.push(("PATH".into(), tool.clone()));
            }
            _ => candidates.push((origin, r.root.join("bin/hipcc"))),
        }
    }
    if let Some(p) = discovery::find_on_path(&discovery::ProcessEnv, "hipcc") {
        candidates.push(("PATH".into(), p));
    }
    let mut seen = BTreeSet::new();
    let mut out = Vec::new();
    for (origin, path) in candidates {
        if !discovery::is_executable_file(&path) || !seen.insert(canonical(&path)) {
            continue;
        }
        let mut c = CompilerReport {
            path: path.clone(),
            origin,
            hip_version: None,
            clang: None,
            hip_runtime_h: None,
            error: None,
        };
        // hipcc runs its commands through sh with these variables pasted in: refuse what the
        // shell would misparse (or run) instead of running it.
        let pasted: Vec<(String, std::ffi::OsString)> = hipjit::compiler::shell_env::SHELL_PASTED
            .iter()
            .filter_map(|k| std::env::var_os(k).map(|v| (k.to_string(), v)))
            .collect();
        // The hipcc checked is the one run: resolved once (a relative path would otherwise be
        // taken from the probe's temporary directory), as `hipjit compile` resolves it.
        let path = canonical(&path);
        let checked = hipjit::compiler::shell_env::check(&pasted)
            .map_err(|e| e.to_string())
            .and_then(|()| {
                hipjit::compiler::shell_env::check_hipcc(&path).map_err(|e| e.to_string())
            });
        if let Err(e) = checked {
            c.error = Some(e);
            out.push(c);
            continue;
        }
        match run_with_timeout(Command::new(&path).arg("--version"), COMPILER_TIMEOUT) {
            Ok((status, stdout, stderr)) if status.success() => {
                let text = String::from_utf8_lossy(&stdout).into_owned();
                c.hip_version = text
                    .lines()
                    .find_map(|l| l.strip_prefix("HIP version:"))
                    .map(|v| v.trim().to_owned());
                c.clang = text
                    .lines()
                    .find(|l| l.contains("clang version"))
                    .map(|l| l.trim().to_owned());
                if let Err(e) =
                    hipjit::compiler::shell_env::check_hipcc_derived(&path, &text, &pasted)
                {
                    c.error = Some(e.to_string());
                }
                let _ = stderr;
            }
            Ok((status, _, stderr)) => {
                c.error = Some(format!(
                    "`{} --version` ended with {status}{}",
                    path.display(),
                    last_line(&stderr)
                        .map(|l| format!(": {l}"))
                        .unwrap_or_default()
                ))
            }
            Err(e) => c.error = Some(e),
        }
        if c.error.is_none() {
            match resolve_hip_runtime_h(&path, &[]) {
                Ok(p) => c.hip_runtime_h = Some(p),
                Err(e) => c.error = Some(e),
            }
        }
        out.push(c);
    }
    out
}

/// Asks `hipcc` which file `#include <hip/hip_runtime.h>` resolves to: compiles a probe source
/// with `-fsyntax-only -H --cuda-host-only` (plus `extra` flags) and reads the first-level
/// include lines (`. /path/hip/hip_runtime.h`) it prints on stderr.
pub(super) fn resolve_hip_runtime_h(hipcc: &Path, extra: &[String]) -> Result<PathBuf, String> {
    let dir =
        tempfile::tempdir().map_err(|e| format!("cannot create a temporary directory: {e}"))?;
    let src = dir.path().join("hipjit_doctor_probe.hip");
    std::fs::write(&src, "#include <hip/hip_runtime.h>\n")
        .map_err(|e| format!("cannot write {}: {e}", src.display()))?;
    let mut cmd = Command::new(hipcc);
    cmd.current_dir(dir.path())
        .args(["-x", "hip", "-fsyntax-only", "-H", "--cuda-host-only"])
        .arg(format!("--offload-arch={PROBE_ARCH}"))
        .args(extra)
        .arg(&src);
    let (status, _out, err) = run_with_timeout(&mut cmd, COMPILER_TIMEOUT)?;
    let text = String::from_utf8_lossy(&err);
    let found = text
        .lines()
        .filter_map(|l| l.strip_prefix(". "))
        .rfind(|p| p.ends_with("hip/hip_runtime.h"))
        .map(|p| PathBuf::from(p.trim()));
    found.ok_or_else(|| {
        format!(
            "asking {} which <hip/hip_runtime.h> it includes failed ({status}){}",
            hipcc.display(),
            last_line(&err)
                .map(|l| format!(": {l}"))
                .unwrap_or_default()
        )
    })
}

/// The include directory of a resolved `.../hip/hip_runtime.h`.
pub(super) fn include_dir_of(hip_runtime_h: &Path) -> Option<PathBuf> {
    Some(canonical(hip_runtime_h.parent()?.parent()?))
}
