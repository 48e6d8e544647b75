//! The diagnosis: what disagrees with what (header sets, runtimes, compilers, devices,
//! cache), in findings that name the paths and the fix.

use super::*;

pub(super) fn diagnose(r: &mut Report) {
    let mut f: Vec<Finding> = Vec::new();
    let mut push = |level: &'static str, text: String| f.push(Finding { level, text });
    let b = &r.build;
    let build_dir = b.include_dir.unwrap_or("(pregenerated bindings)");

    // The build's header set as it is now.
    if let (Some(dir), Some(now)) = (b.include_dir, &b.hip_version_now) {
        if now != b.hip_version {
            push("warning", format!(
                "hip-sys was built from the HIP {} headers in {dir}, which now hold HIP {now}: this hipjit binary was built on another machine or before the headers changed (rebuild to use the new declarations)",
                b.hip_version
            ));
        }
    }
    if b.bindings == "pregenerated" {
        push("note", format!(
            "hip-sys uses its pregenerated bindings (HIP {}): no header set was found when it was built",
            b.hip_version
        ));
    }

    // Explicit settings that point at nothing.
    let env = |k: &str| std::env::var_os(k);
    if let Some(p) = env("HIPJIT_HIPCC").filter(|v| !v.is_empty()) {
        let p = PathBuf::from(p);
        if !discovery::is_executable_file(&p) {
            push("warning", format!(
                "HIPJIT_HIPCC={} is not an executable file: hipjit's compiler discovery fails with it set",
                p.display()
            ));
        }
    }
    if let Some(p) = env("HIP_INCLUDE_DIR").filter(|v| !v.is_empty()) {
        let p = PathBuf::from(p);
        if !header_set::is_header_set(&p) {
            push(
                "warning",
                format!(
                    "HIP_INCLUDE_DIR={} holds no hip/hip_runtime_api.h: it names no header set",
                    p.display()
                ),
            );
        }
    }
    for var in ["HIP_PATH", "ROCM_PATH"] {
        match env(var) {
            Some(v) if v.is_empty() => push("note", format!(
                "{var} is set but empty: hipjit's discovery ignores it, but a hipcc wrapper may read it as the current directory (Debian's hipcc 5.2.3 then looks for ./bin/clang-15): unset it"
            )),
            Some(v) if !Path::new(&v).is_dir() => push("warning", format!(
                "{var}={} is not a directory",
                Path::new(&v).display()
            )),
            _ => {}
        }
    }
    for c in &r.compilers {
        if let Some(e) = &c.error {
            push(
                "warning",
                format!("the compiler {} cannot be used: {e}", c.path.display()),
            );
        }
    }

    if r.header_sets.is_empty() {
        push("warning", "no HIP header set found (looked for hip/hip_runtime_api.h under HIP_INCLUDE_DIR, HIP_PATH, ROCM_PATH, the hipcc on PATH, /opt/rocm*, /usr)".into());
    }
    if r.runtimes.is_empty() && r.runtime_in_use.path.is_none() {
        push("warning", "no HIP runtime (libamdhip64.so*) found: set HIPJIT_HIP_LIBRARY, HIP_PATH or ROCM_PATH, or install one (Debian: apt-get install libamdhip64-5)".into());
    }
    if r.compilers.is_empty() {
        push("warning", "no hipcc found (HIPJIT_HIPCC, HIP_PATH, ROCM_PATH, PATH, /opt/rocm*): compiling is unavailable (Debian 12+/Ubuntu 24.04+: apt-get install hipcc)".into());
    }

    // The runtime hipjit loads against the build's declarations.
    let in_use = r
        .runtime_in_use
        .path
        .as_ref()
        .map(|p| canonical(p))
        .and_then(|p| r.runtimes.iter().find(|x| x.path == p));
    if let Some(e) = &r.runtime_in_use.load_error {
        push("warning", format!("hipjit cannot load a HIP runtime: {e}"));
    }
    if let Some(rt) = in_use {
        let rv = rt
            .version
            .clone()
            .unwrap_or_else(|| "of unknown version".into());
        let rpath = rt.path.display();
        let undeclared: Vec<&str> = b
            .apis
            .iter()
            .filter(|(n, declared)| !**declared && rt.exports.get(*n).copied().unwrap_or(false))
            .map(|(n, _)| n.as_str())
            .collect();
        let unexported: Vec<&str> = b
            .apis
            .iter()
            .filter(|(n, declared)| **declared && !rt.exports.get(*n).copied().unwrap_or(true))
            .map(|(n, _)| n.as_str())
            .collect();
        if !undeclared.is_empty() {
            push("note", format!(
                "headers older than the runtime: the runtime {rpath} (HIP {rv}) exports {} that the headers hip-sys was built from ({build_dir}, HIP {}) do not declare; hipjit calls them through its own declarations",
                undeclared.join(", "), b.hip_version
            ));
        }
        if !unexported.is_empty() {
            push("note", format!(
                "runtime older than the headers: the headers hip-sys was built from ({build_dir}, HIP {}) declare {} but the runtime {rpath} (HIP {rv}) does not export them; hipjit leaves them unused",
                b.hip_version, unexported.join(", ")
            ));
        }
        if undeclared.is_empty() && unexported.is_empty() {
            push("ok", format!(
                "the headers hip-sys was built from ({build_dir}, HIP {}) and the runtime {rpath} (HIP {rv}) agree on every probed function",
                b.hip_version
            ));
        }
        if rt.library_api_exported < LIBRARY_API.len() {
            let missing: Vec<&str> = LIBRARY_API
                .iter()
                .copied()
                .filter(|n| !rt.library_api.get(*n).copied().unwrap_or(false))
                .collect();
            push("note", format!(
                "the runtime {rpath} exports {}/5 library-API symbols (missing {}): hipjit loads code objects through the module API (hipModuleLoadData, hipModuleGetFunction), reading the kernel list from the code object",
                rt.library_api_exported, missing.join(", ")
            ));
        } else {
            push("ok", format!(
                "the runtime {rpath} exports all five library-API symbols: hipjit loads code objects through hipLibraryLoadData"
            ));
        }
        // Newer header sets on the machine than the runtime.
        if let Some(code) = rt.version_code {
            let rmm = version_of_code(code);
            for h in &r.header_sets {
                if let (Some(hmm), Some(hv)) = (h.major_minor, &h.hip_version) {
                    if hmm > rmm && h.library_api_declared > rt.library_api_exported {
                        push("note", format!(
                            "runtime older than the headers: the header set {} (HIP {hv}) declares {}/5 library-API functions, the runtime {rpath} (HIP {rv}) exports {}/5: C++ code built against those headers and calling them fails to link or to load with this runtime; hipjit takes the module-API path",
                            h.path.display(), h.library_api_declared, rt.library_api_exported
                        ));
                    }
                }
            }
        }
    }

    // Which header set hipcc resolves against the runtime's.
    if let Some(rt_path) = in_use.map(|x| x.path.clone()) {
        if let Some(rt_inc) = runtime_include_dir(&rt_path) {
            for c in &r.compilers {
                let Some(h) = &c.hip_runtime_h else {
                    continue;
                };
                let Some(inc) = include_dir_of(h) else {
                    continue;
                };
                if inc == rt_inc {
                    push("ok", format!(
                        "{} resolves <hip/hip_runtime.h> to {}, the header set installed with the runtime {}",
                        c.path.display(), h.display(), rt_path.display()
                    ));
                } else {
                    let fix = fix_for(&c.path, &rt_inc);
                    push("warning", format!(
                        "{} resolves <hip/hip_runtime.h> to {} (asked with -H), not to the header set of the runtime {} ({}): {fix}",
                        c.path.display(), h.display(), rt_path.display(), rt_inc.display()
                    ));
                }
            }
        }
    }

    // A runtime found twice in different versions.
    let mut versions: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for rt in &r.runtimes {
        if let Some(v) = &rt.version {
            versions
                .entry(v.clone())
                .or_default()
                .push(rt.path.display().to_string());
        }
    }
    if versions.len() > 1 {
        let list: Vec<String> = versions
            .iter()
            .map(|(v, ps)| format!("HIP {v} at {}", ps.join(", ")))
            .collect();
        let used = r
            .runtime_in_use
            .path
            .as_ref()
            .map(|p| p.display().to_string())
            .unwrap_or_else(|| "none".into());
        push("warning", format!(
            "HIP runtimes of different versions on this machine: {}; hipjit loads {used} (set HIPJIT_HIP_LIBRARY to choose); a process that loads two of them gets two runtimes that share no streams or memory",
            list.join("; ")
        ));
    }

    // Devices.
    let p = &r.runtime_in_use;
    if let Some(rt_path) = &p.path {
        if p.devices.is_empty() {
            let why = p
                .device_error
                .clone()
                .unwrap_or_else(|| "hipGetDeviceCount reported 0 devices".into());
            let kfd = if p.platform.as_deref() == Some("nvidia") || Path::new("/dev/kfd").exists() {
                String::new()
            } else {
                "; /dev/kfd does not exist (no AMD GPU kernel driver)".into()
            };
            push("note", format!(
                "no device: {why} (runtime {}){kfd}; compiling, the cache and inspecting work without one",
                rt_path.display()
            ));
        } else {
            push(
                "ok",
                format!(
                    "{} device(s) through {}: {}",
                    p.devices.len(),
                    rt_path.display(),
                    p.devices.join(", ")
                ),
            );
        }
    }
    // ROCm's ISA override: every device (or node N's) is reported, and loads code, as the ISA named.
    for o in &r.gfx_override {
        let scope = if o.variable == gfx_override::VARIABLE {
            "every AMD GPU without its own HSA_OVERRIDE_GFX_VERSION_<N>".to_owned()
        } else {
            format!(
                "the GPU of topology node {} (node 0 is usually the CPU)",
                &o.variable[gfx_override::VARIABLE.len() + 1..]
            )
        };
        match &o.target {
            Some(t) => push("note", format!(
                "{}={} is set: ROCm's runtime reports {scope} as {t} and loads only code objects for {t}; hipjit compiles for the target the runtime reports, so its cache entries for {t} are apart from those of the real target",
                o.variable, o.value
            )),
            None => push("warning", format!(
                "{}={:?} is not MAJOR.MINOR.STEPPING (decimal; MAJOR <= 63, MINOR and STEPPING <= 255): ROCm's runtime fails to start with it set (e.g. 10.3.0 for gfx1030, 9.0.10 for gfx90a)",
                o.variable, o.value
            )),
        }
    }
    if let Some(e) = &r.cache.error {
        f.push(Finding {
            level: "warning",
            text: format!("the disk cache cannot be opened: {e}"),
        });
    }
    if let (Some(max), Some(root)) = (r.cache.max_bytes, r.cache.roots.first()) {
        if root.bytes > max {
            f.push(Finding {
                level: "note",
                text: format!(
                    "the written cache root {} holds {}, past its size cap of {}: the next write removes its least recently used entries (`hipjit cache prune --max-size SIZE` does it now)",
                    root.path.display(),
                    output::human_bytes(root.bytes),
                    output::human_bytes(max)
                ),
            });
        }
    }
    for v in &r.cache.reproducibility {
        if !v.reproducible {
            f.push(Finding {
                level: "warning",
                text: format!(
                    "the compiler {} {} ({}) is not reproducible: `hipjit cache verify --rebuild {}` compiled {} of {} requests to other bytes than their cache entries (a cached result is one of several it may give)",
                    v.kind,
                    v.path.display(),
                    v.version,
                    v.record.display(),
                    v.differing,
                    v.compared
                ),
            });
        }
    }
    nvidia::diagnose(&r.platform, &r.cuda_driver, &r.nvcc, &mut f);
    rtc::diagnose(&r.in_process, &mut |level, text| {
        f.push(Finding { level, text })
    });
    r.findings = f;
}

/// The fix for a compiler that resolves `<hip/...>` elsewhere: measured by asking the compiler
/// again with `-I DIR`, then `-isystem DIR`.
pub(super) fn fix_for(hipcc: &Path, want: &Path) -> String {
    let d = want.display().to_string();
    for flag in ["-I", "-isystem"] {
        let extra = [flag.to_owned(), d.clone()];
        if let Ok(h) = resolve_hip_runtime_h(hipcc, &extra) {
            if include_dir_of(&h).as_deref() == Some(want) {
                return format!(
                    "compile with `{flag} {d}` (measured: with it, this compiler includes {})",
                    h.display()
                );
            }
        }
    }
    let root = want.parent().map(|p| p.display().to_string()).unwrap_or(d);
    format!("neither -I nor -isystem makes this compiler take that set: use the hipcc of that installation or set HIP_PATH={root}")
}

// ---------------------------------------------------------------------------------------------
// Printing
