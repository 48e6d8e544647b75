//! ROCm held by Python packages (`hip_sys::discovery::python`): the environment searched, each
//! package's copy with the versions it holds, and which copy each part in use (runtime,
//! hipRTC, comgr, headers, hipcc) comes from.

use super::*;

use hip_sys::discovery::python;

/// What a package of the environment holds.
#[derive(Serialize, Debug)]
pub(super) struct CopyReport {
    /// The package (`_rocm_sdk_core`, `torch`, ...).
    package: &'static str,
    /// Its installation root.
    root: PathBuf,
    /// The HIP runtime files in its `lib/` and the version each reports (from the runtimes
    /// probed).
    runtimes: Vec<(PathBuf, Option<String>)>,
    /// Its hipRTC: `libhiprtc.so*` in `lib/`, else a runtime that exports `hiprtcCreateProgram`.
    hiprtc: Option<PathBuf>,
    /// `libamd_comgr.so*` in `lib/`.
    comgr: Vec<PathBuf>,
    /// The HIP version of `include/hip/hip_version.h`.
    headers: Option<String>,
    /// `bin/hipcc`, when it is an executable file.
    hipcc: Option<PathBuf>,
}

/// A part in use and the copy it comes from.
#[derive(Serialize, Debug)]
pub(super) struct PartReport {
    /// The file or directory in use.
    path: PathBuf,
    /// The package whose copy holds it; `None`: not a Python package's.
    from: Option<&'static str>,
}

/// The Python environment's ROCm.
#[derive(Serialize, Debug, Default)]
pub(super) struct PythonReport {
    /// Why the environment is searched (`VIRTUAL_ENV`, `HIPJIT_PYTHON=<path>`); `None`: neither
    /// is set, nothing searched.
    environment: Option<String>,
    /// The environment's prefix.
    prefix: Option<PathBuf>,
    /// Each package holding ROCm, in the order searched.
    copies: Vec<CopyReport>,
    /// `runtime`, `hiprtc`, `comgr`, `headers`, `hipcc`: what is in use and which copy it is.
    parts: BTreeMap<&'static str, PartReport>,
}

/// The files of `lib` whose names start with `prefix`, sorted.
fn files_named(lib: &Path, prefix: &str) -> Vec<PathBuf> {
    let Ok(rd) = std::fs::read_dir(lib) else {
        return Vec::new();
    };
    let mut v: Vec<PathBuf> = rd
        .filter_map(Result::ok)
        .filter(|e| {
            e.file_name()
                .to_str()
                .is_some_and(|n| n.starts_with(prefix))
        })
        .map(|e| e.path())
        .filter(|p| p.is_file())
        .collect();
    v.sort();
    v
}

/// The environment's ROCm copies and the copy of each part in use: `runtimes` as probed,
/// `runtime`, `hiprtc`, `comgr`, `headers` and `hipcc` the parts doctor found in use.
pub(super) fn gather(
    runtimes: &[RuntimeReport],
    parts: &[(&'static str, Option<&Path>)],
) -> PythonReport {
    let env = discovery::ProcessEnv;
    let Some(environment) = python::environment(&env) else {
        return PythonReport::default();
    };
    let mut copies = Vec::new();
    for p in python::packages(&env) {
        let lib = p.root.join("lib");
        let found = files_named(&lib, "libamdhip64.so");
        let version_of = |f: &Path| {
            let real = canonical(f);
            runtimes
                .iter()
                .find(|r| r.path == real || r.names.iter().any(|n| n == f))
                .and_then(|r| r.version.clone())
        };
        let hiprtc = files_named(&lib, "libhiprtc.so")
            .into_iter()
            .next()
            .or_else(|| {
                found.iter().find_map(|f| {
                    shared_object::read(f)
                        .ok()
                        .filter(|so| so.exports.contains("hiprtcCreateProgram"))
                        .map(|_| f.clone())
                })
            });
        let include = p.root.join("include");
        let hipcc = p.root.join("bin/hipcc");
        copies.push(CopyReport {
            package: p.name,
            runtimes: found.iter().map(|f| (f.clone(), version_of(f))).collect(),
            hiprtc,
            comgr: files_named(&lib, "libamd_comgr.so"),
            headers: header_set::is_header_set(&include)
                .then(|| header_set::read(&include, &[]).version)
                .flatten(),
            hipcc: discovery::is_executable_file(&hipcc).then_some(hipcc),
            root: p.root,
        });
    }
    let from = |path: &Path| {
        let real = canonical(path);
        copies
            .iter()
            .find(|c| path.starts_with(&c.root) || real.starts_with(canonical(&c.root)))
            .map(|c| c.package)
    };
    let parts = parts
        .iter()
        .filter_map(|(name, path)| {
            let path = (*path)?;
            Some((
                *name,
                PartReport {
                    path: path.to_path_buf(),
                    from: from(path),
                },
            ))
        })
        .collect();
    PythonReport {
        environment: Some(environment.source.to_string()),
        prefix: Some(environment.prefix),
        copies,
        parts,
    }
}

/// The report's lines on the screen.
pub(super) fn print(r: &PythonReport) {
    println!("\nPython environment");
    let (Some(env), Some(prefix)) = (&r.environment, &r.prefix) else {
        println!(
            "  none searched ({} and {} unset)",
            python::VIRTUAL_ENV,
            python::PYTHON_ENV
        );
        return;
    };
    println!("  {}  [{env}]", prefix.display());
    if r.copies.is_empty() {
        println!("  no package holds ROCm (looked for _rocm_sdk_devel, _rocm_sdk_core, torch, triton/third_party/rocm)");
    }
    for c in &r.copies {
        println!("  {}  {}", c.package, c.root.display());
        for (f, v) in &c.runtimes {
            println!(
                "      runtime  {}  HIP {}",
                f.display(),
                v.as_deref().unwrap_or("(version not read)")
            );
        }
        if let Some(h) = &c.hiprtc {
            println!("      hipRTC   {}", h.display());
        }
        for g in &c.comgr {
            println!("      comgr    {}", g.display());
        }
        if let Some(v) = &c.headers {
            println!(
                "      headers  {}  HIP {v}",
                c.root.join("include").display()
            );
        }
        if let Some(h) = &c.hipcc {
            println!("      hipcc    {}", h.display());
        }
    }
    let names = [
        ("runtime", "runtime"),
        ("hiprtc", "hipRTC"),
        ("comgr", "comgr"),
        ("headers", "headers"),
        ("hipcc", "hipcc"),
    ];
    for (key, name) in names {
        let Some(p) = r.parts.get(key) else { continue };
        println!(
            "  {name} in use: {}  ({})",
            p.path.display(),
            p.from
                .map(|f| format!("from {f}"))
                .unwrap_or_else(|| "not from the Python environment".to_owned())
        );
    }
}
