//! The HIP runtimes on this machine: where they are looked for, what each file exports, and
//! each one probed in a child process (`hipjit probe-runtime`), so that one runtime's state
//! never leaks into another's probe.

use super::*;

/// Library directories of the dynamic loader's cache entries for `libamdhip64`
/// (`ldconfig -p`), with the names listed there.
pub(super) fn loader_cache_runtimes() -> Vec<PathBuf> {
    let ldconfig = ["/sbin/ldconfig", "/usr/sbin/ldconfig"]
        .into_iter()
        .map(PathBuf::from)
        .find(|p| p.is_file());
    let Some(ldconfig) = ldconfig else {
        return Vec::new();
    };
    let Ok(out) = Command::new(ldconfig)
        .arg("-p")
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
    else {
        return Vec::new();
    };
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| l.trim_start().starts_with("libamdhip64.so"))
        .filter_map(|l| l.split("=>").nth(1).map(|p| PathBuf::from(p.trim())))
        .collect()
}

pub(super) fn runtime_candidates() -> Vec<(String, PathBuf)> {
    let mut c: Vec<(String, PathBuf)> = Vec::new();
    if let Some(p) = std::env::var_os("HIPJIT_HIP_LIBRARY").filter(|v| !v.is_empty()) {
        c.push(("HIPJIT_HIP_LIBRARY".into(), PathBuf::from(p)));
    }
    let mut dirs: Vec<(String, PathBuf)> = Vec::new();
    for r in discovery::install_roots() {
        dirs.push((format!("lib/ under {}", r.origin), r.root.join("lib")));
        for d in ["lib/x86_64-linux-gnu", "lib/aarch64-linux-gnu", "lib64"] {
            dirs.push((format!("{d}/ under {}", r.origin), r.root.join(d)));
        }
    }
    if let Some(ld) = std::env::var_os("LD_LIBRARY_PATH") {
        for d in std::env::split_paths(&ld).filter(|d| !d.as_os_str().is_empty()) {
            dirs.push(("LD_LIBRARY_PATH".into(), d));
        }
    }
    for (origin, dir) in dirs {
        let Ok(rd) = std::fs::read_dir(&dir) else {
            continue;
        };
        let mut names: Vec<PathBuf> = rd
            .filter_map(Result::ok)
            .filter(|e| {
                e.file_name()
                    .to_str()
                    .is_some_and(|n| n.starts_with("libamdhip64.so"))
            })
            .map(|e| e.path())
            .collect();
        names.sort();
        c.extend(names.into_iter().map(|p| (origin.clone(), p)));
    }
    c.extend(
        loader_cache_runtimes()
            .into_iter()
            .map(|p| ("dynamic loader cache".to_owned(), p)),
    );
    c
}

pub(super) fn runtimes() -> Vec<RuntimeReport> {
    let mut by_file: BTreeMap<PathBuf, RuntimeReport> = BTreeMap::new();
    let mut order: Vec<PathBuf> = Vec::new();
    let apis = probed_apis();
    for (origin, name) in runtime_candidates() {
        if !name.is_file() {
            continue;
        }
        let real = canonical(&name);
        if let Some(r) = by_file.get_mut(&real) {
            if !r.names.contains(&name) {
                r.names.push(name);
            }
            continue;
        }
        let mut r = RuntimeReport {
            path: real.clone(),
            names: vec![name],
            origin,
            soname: None,
            version: None,
            library_api_exported: 0,
            library_api: BTreeMap::new(),
            device_properties_entry: None,
            exports: BTreeMap::new(),
            error: None,
            version_code: None,
        };
        match shared_object::read(&real) {
            Ok(so) => {
                r.soname = so.soname.clone();
                for s in LIBRARY_API {
                    r.library_api.insert(s.to_owned(), so.exports.contains(s));
                }
                r.library_api_exported = r.library_api.values().filter(|e| **e).count();
                r.device_properties_entry = if so.exports.contains("hipGetDevicePropertiesR0600") {
                    Some("hipGetDevicePropertiesR0600")
                } else if so.exports.contains("hipGetDeviceProperties") {
                    Some("hipGetDeviceProperties")
                } else {
                    None
                };
                for a in &apis {
                    r.exports.insert((*a).to_owned(), so.exports.contains(*a));
                }
            }
            Err(e) => r.error = Some(e),
        }
        order.push(real.clone());
        by_file.insert(real, r);
    }
    let mut out: Vec<RuntimeReport> = order
        .into_iter()
        .filter_map(|p| by_file.remove(&p))
        .collect();
    for r in &mut out {
        if r.error.is_some() {
            continue;
        }
        let p = run_probe(Some(&r.path));
        r.version = p.version;
        r.version_code = p.version_code;
        if let Some(e) = p.load_error {
            r.error = Some(e);
        }
    }
    out
}

/// Runs `hipjit probe-runtime [--library PATH]` and reads its JSON.
pub(super) fn run_probe(library: Option<&Path>) -> Probe {
    let failed = |e: String| Probe {
        load_error: Some(e),
        path: library.map(Path::to_path_buf),
        ..Probe::default()
    };
    let exe = match std::env::current_exe() {
        Ok(e) => e,
        Err(e) => return failed(format!("cannot find the hipjit executable: {e}")),
    };
    let mut cmd = Command::new(exe);
    cmd.arg("probe-runtime");
    if let Some(l) = library {
        cmd.arg("--library").arg(l);
    }
    match run_with_timeout(&mut cmd, PROBE_TIMEOUT) {
        Ok((status, stdout, stderr)) => match serde_json::from_slice::<Probe>(&stdout) {
            Ok(p) => p,
            Err(_) => failed(format!(
                "the probe process ended with {status} without a report{}",
                last_line(&stderr)
                    .map(|l| format!(": {l}"))
                    .unwrap_or_default()
            )),
        },
        Err(e) => failed(e),
    }
}

/// The header set installed with a runtime library: `<root>/include` for a library in
/// `<root>/lib`, `<root>/lib64` or `<root>/lib/<multiarch>`.
pub(super) fn runtime_include_dir(lib: &Path) -> Option<PathBuf> {
    let mut dir = lib.parent()?;
    if dir
        .file_name()
        .and_then(|n| n.to_str())
        .is_some_and(|n| n.ends_with("-linux-gnu"))
    {
        dir = dir.parent()?;
    }
    let name = dir.file_name()?.to_str()?;
    if name != "lib" && name != "lib64" {
        return None;
    }
    let inc = dir.parent()?.join("include");
    header_set::is_header_set(&inc).then(|| canonical(&inc))
}

// ---------------------------------------------------------------------------------------------
// The diagnosis

pub(super) fn version_of_code(code: i32) -> (u32, u32) {
    let code = code.max(0) as u32;
    (code / 10_000_000, (code / 100_000) % 100)
}

/// Runs the hidden `probe-runtime`: loads one runtime in this process and prints a [`Probe`]
/// as JSON. Exit status 0 whenever the JSON was printed, loaded or not.
pub fn probe_runtime(args: &ProbeArgs) -> Result<(), CliError> {
    use hipjit::runtime::Runtime;
    let loaded = match &args.library {
        Some(p) => Runtime::load_from(p),
        None => Runtime::load(),
    };
    let mut p = Probe {
        path: args.library.clone(),
        ..Probe::default()
    };
    match loaded {
        Err(e) => p.load_error = Some(e.to_string()),
        Ok(rt) => {
            p.platform = Some(rt.platform().to_string());
            p.path = Some(canonical(rt.path()));
            p.found = Some(rt.found().to_string());
            p.version = rt.version().map(|v| v.to_string());
            p.version_code = rt.version().map(|v| v.0);
            p.code_object_loader = Some(rt.code_object_loader().to_string());
            p.device_properties_entry = Some(rt.device_properties_entry().symbol().to_owned());
            p.code_object_versions = rt.code_object_versions().map(<[u32]>::to_vec);
            match rt.device_count() {
                Ok(0) => p.device_error = Some("hipGetDeviceCount reported 0 devices".into()),
                Ok(n) => {
                    for i in 0..n {
                        match rt.device(i) {
                            Ok(d) => p.devices.push(
                                d.target_id()
                                    .map(|t| t.to_string())
                                    .unwrap_or_else(|| d.arch_name().to_owned()),
                            ),
                            Err(e) => {
                                p.device_error_name = Some(e.name().to_owned());
                                p.device_error =
                                    Some(format!("device {i}: {}", hip_error_text(&e)));
                            }
                        }
                    }
                }
                Err(e) => {
                    p.device_error_name = Some(e.name().to_owned());
                    p.device_error = Some(hip_error_text(&e));
                }
            }
        }
    }
    let v = serde_json::to_string(&p)
        .map_err(|e| CliError::failed(format!("cannot encode the probe: {e}")))?;
    println!("{v}");
    Ok(())
}

/// `hipGetDeviceCount returned hipErrorNoDevice (100)`, plus the runtime's string when it says
/// more than the name.
pub(super) fn hip_error_text(e: &hipjit::error::HipError) -> String {
    let mut s = format!("{} returned {} ({})", e.call(), e.name(), e.code());
    if !e.message().is_empty() && e.message() != e.name() {
        s.push_str(&format!(": {}", e.message()));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debian_runtime_belongs_to_the_usr_include_header_set() {
        // Debian's libamdhip64-5 and libamdhip64-dev: /usr/lib/<multiarch>/ and /usr/include.
        let lib = Path::new("/usr/lib/x86_64-linux-gnu/libamdhip64.so.5");
        assert!(
            lib.exists(),
            "needs Debian's HIP runtime: apt-get install libamdhip64-5 libamdhip64-dev"
        );
        assert_eq!(
            runtime_include_dir(lib),
            Some(PathBuf::from("/usr/include"))
        );
    }

    #[test]
    fn a_library_outside_lib_has_no_header_set() {
        assert_eq!(
            runtime_include_dir(Path::new("/tmp/libamdhip64.so.7")),
            None
        );
    }

    #[test]
    fn runtime_version_code_splits_into_major_and_minor() {
        // hipRuntimeGetVersion of Debian's HIP 5.2.3 (ENVIRONMENT.md).
        assert_eq!(version_of_code(50221153), (5, 2));
        assert_eq!(version_of_code(60443484), (6, 4));
    }
}
