//! The report on the screen (`hipjit doctor` without `--json`).

use super::*;

pub(super) fn yes_no(b: bool) -> &'static str {
    if b {
        "yes"
    } else {
        "no"
    }
}

pub(super) fn apis_text(apis: &BTreeMap<String, bool>) -> String {
    let short = |n: &str| match n {
        "hipGetDevicePropertiesR0600" => "R0600 properties",
        "hipModuleLaunchCooperativeKernel" => "cooperative launch",
        "hipModuleOccupancyMaxActiveBlocksPerMultiprocessor" => "module occupancy",
        _ => "",
    };
    let mut parts = Vec::new();
    for (n, d) in apis {
        let s = short(n);
        if !s.is_empty() {
            parts.push(format!("{s} {}", yes_no(*d)));
        }
    }
    parts.join(", ")
}

pub(super) fn missing_list(apis: &BTreeMap<String, bool>) -> String {
    let m: Vec<&str> = LIBRARY_API
        .iter()
        .copied()
        .filter(|n| !apis.get(*n).copied().unwrap_or(false))
        .collect();
    if m.is_empty() || m.len() == LIBRARY_API.len() {
        String::new()
    } else {
        format!(" (missing {})", m.join(", "))
    }
}

pub(super) fn print_text(r: &Report) {
    println!("hipjit doctor: the HIP setup of this machine (AMD and NVIDIA platforms)\n");
    println!("Header sets");
    for h in &r.header_sets {
        println!(
            "  {}  HIP {}  [{}]",
            h.path.display(),
            h.hip_version.as_deref().unwrap_or("(no hip_version.h)"),
            h.origin
        );
        println!(
            "      declares library API {}/5{}; {}",
            h.library_api_declared,
            missing_list(&h.apis),
            apis_text(&h.apis)
        );
    }
    if r.header_sets.is_empty() {
        println!("  none found");
    }
    let b = &r.build;
    println!(
        "  hip-sys built from: {} ({} bindings, HIP {}); {}",
        b.include_dir.unwrap_or("no header set"),
        b.bindings,
        b.hip_version,
        apis_text(&b.apis)
    );
    println!("\nRuntimes");
    for rt in &r.runtimes {
        let used = r
            .runtime_in_use
            .path
            .as_ref()
            .is_some_and(|p| canonical(p) == rt.path);
        println!(
            "  {}{}",
            rt.path.display(),
            if used {
                "  <- hipjit loads this one"
            } else {
                ""
            }
        );
        println!(
            "      soname {}, HIP {}, library API {}/5 exported{}, device properties: {}  [{}]",
            rt.soname.as_deref().unwrap_or("(none)"),
            rt.version.as_deref().unwrap_or("?"),
            rt.library_api_exported,
            missing_list(&rt.library_api),
            match rt.device_properties_entry {
                Some("hipGetDevicePropertiesR0600") => "hipGetDevicePropertiesR0600 (6.0 layout)",
                Some(_) => "hipGetDeviceProperties (5.x layout)",
                None => "none exported",
            },
            rt.origin
        );
        if used {
            let p = &r.runtime_in_use;
            println!(
                "      code objects load through the {}; this runtime accepts code object {}",
                p.code_object_loader.as_deref().unwrap_or("?"),
                p.code_object_versions
                    .as_ref()
                    .map(|v| v
                        .iter()
                        .map(|n| format!("v{n}"))
                        .collect::<Vec<_>>()
                        .join(", "))
                    .unwrap_or_else(|| "versions unknown".into())
            );
        }
        if let Some(e) = &rt.error {
            println!("      error: {e}");
        }
    }
    if r.runtimes.is_empty() {
        println!("  none found");
    }
    println!("\nCompilers");
    for c in &r.compilers {
        println!(
            "  {}  HIP {}, {}  [{}]",
            c.path.display(),
            c.hip_version.as_deref().unwrap_or("?"),
            c.clang.as_deref().unwrap_or("clang ?"),
            c.origin
        );
        if let Some(h) = &c.hip_runtime_h {
            println!("      <hip/hip_runtime.h> -> {}", h.display());
        }
        if let Some(e) = &c.error {
            println!("      error: {e}");
        }
    }
    if r.compilers.is_empty() {
        println!("  none found");
    }
    println!("\nDevices");
    if r.devices.is_empty() {
        let why = r
            .runtime_in_use
            .device_error
            .as_deref()
            .or(r.runtime_in_use.load_error.as_deref())
            .unwrap_or("none reported");
        println!("  none: {why}");
    } else {
        for (i, d) in r.devices.iter().enumerate() {
            println!("  {i}: {d}");
        }
    }
    for o in &r.gfx_override {
        match &o.target {
            Some(t) => println!("  {}={}: reported as {t}", o.variable, o.value),
            None => println!("  {}={}: not an ISA version", o.variable, o.value),
        }
    }
    println!("\nCache");
    for root in &r.cache.roots {
        println!(
            "  {}  {} entries, {} ({} bytes){}",
            root.path.display(),
            root.entries,
            output::human_bytes(root.bytes),
            root.bytes,
            if root.written {
                ", written"
            } else {
                ", read-only"
            }
        );
    }
    if !r.cache.cap_text.is_empty() {
        println!("  {}", r.cache.cap_text);
    }
    if let Some(e) = &r.cache.error {
        println!("  error: {e}");
    }
    for v in &r.cache.reproducibility {
        println!(
            "  {} {} ({}): {} ({} of {} requests rebuilt differ, `cache verify --rebuild`)",
            v.kind,
            v.path.display(),
            v.version,
            if v.reproducible {
                "reproducible"
            } else {
                "not reproducible"
            },
            v.differing,
            v.compared
        );
    }
    nvidia::print_text(&r.platform, &r.cuda_driver, &r.nvcc);
    rtc::print_text(&r.in_process);
    super::python_env::print(&r.python);
    println!("\nDiagnosis");
    for f in &r.findings {
        println!("  {:<7} {}", f.level, f.text);
    }
}
