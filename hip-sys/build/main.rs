//! hip-sys build script: finds a HIP header set (`find`), generates bindings from it
//! (`run_bindgen`) or takes the committed pregenerated ones, probes what they declare
//! (`probe`), and emits cfg flags, links metadata and the generated modules. Without the
//! feature `bindgen` it neither looks for headers nor parses anything: it takes the
//! pregenerated bindings with their committed probe.

// Without bindgen no header set is looked for (only its variables are watched).
#[cfg_attr(not(feature = "bindgen"), allow(dead_code))]
mod find;
mod probe;
#[cfg(feature = "bindgen")]
mod run_bindgen;

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// Chooses generated or pregenerated bindings: unset or `auto` (headers when found,
/// pregenerated otherwise), `generated` (headers required), `pregenerated` (never look).
const HIP_SYS_BINDINGS: &str = "HIP_SYS_BINDINGS";

/// The committed bindings, relative to the package root.
const PREGENERATED: &str = "pregenerated/hip_runtime_api.rs";

/// The line of the pregenerated file's header that carries its HIP version.
const PREGENERATED_VERSION_TAG: &str = "// HIP version: ";

#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    Auto,
    Generated,
    Pregenerated,
}

fn main() {
    if let Err(message) = run() {
        eprintln!("error: hip-sys: {message}");
        std::process::exit(1);
    }
}

fn run() -> Result<(), String> {
    println!("cargo::rerun-if-changed=build");
    println!("cargo::rerun-if-changed={PREGENERATED}");
    let mut vars = vec![HIP_SYS_BINDINGS];
    vars.extend(find::env_vars());
    #[cfg(feature = "bindgen")]
    vars.extend_from_slice(run_bindgen::CLANG_ENV_VARS);
    for var in vars {
        println!("cargo::rerun-if-env-changed={var}");
    }

    println!("cargo::rerun-if-env-changed=DOCS_RS");
    let mode = match std::env::var(HIP_SYS_BINDINGS).as_deref() {
        // docs.rs (which sets DOCS_RS) has no ROCm: document the pregenerated bindings.
        Err(std::env::VarError::NotPresent) if std::env::var_os("DOCS_RS").is_some() => {
            Mode::Pregenerated
        }
        Err(std::env::VarError::NotPresent) | Ok("") | Ok("auto") => Mode::Auto,
        Ok("generated") => Mode::Generated,
        Ok("pregenerated") => Mode::Pregenerated,
        Ok(other) => {
            return Err(format!(
                "{HIP_SYS_BINDINGS}={other:?} is not one of auto, generated, pregenerated"
            ))
        }
        Err(std::env::VarError::NotUnicode(v)) => {
            return Err(format!(
                "{HIP_SYS_BINDINGS}={v:?} is not one of auto, generated, pregenerated"
            ))
        }
    };
    let manifest_dir = PathBuf::from(env("CARGO_MANIFEST_DIR")?);
    let out_dir = PathBuf::from(env("OUT_DIR")?);

    if mode == Mode::Generated && !cfg!(feature = "bindgen") {
        return Err(format!(
            "{HIP_SYS_BINDINGS}=generated, but hipjit-sys is built without its feature \
             `bindgen` (on by default; hipjit's feature `bindgen` turns it on)"
        ));
    }
    let source = if mode == Mode::Pregenerated || !cfg!(feature = "bindgen") {
        None
    } else {
        match find::find_headers(&find::ProcessEnv, Path::new("/opt"))? {
            find::Headers::Found(found) => Some(found),
            find::Headers::NotFound(tried) => {
                let list: Vec<String> = tried.iter().map(ToString::to_string).collect();
                if mode == Mode::Generated {
                    return Err(format!(
                        "{HIP_SYS_BINDINGS}=generated but no HIP headers were found; tried: {}",
                        list.join("; ")
                    ));
                }
                watch_candidates(&tried);
                println!(
                    "cargo::warning=no HIP headers found, using the pregenerated bindings; \
                     tried: {}",
                    list.join("; ")
                );
                None
            }
        }
    };

    let (bindings, include_dir, hip_version) = match &source {
        Some(found) => {
            let text = generate(&found.dir)?;
            let version = find::hip_version(&found.dir).unwrap_or_else(|| "unknown".into());
            (text, Some(found.dir.clone()), version)
        }
        None => {
            let path = manifest_dir.join(PREGENERATED);
            let text = std::fs::read_to_string(&path).map_err(|e| {
                format!(
                    "cannot read the pregenerated bindings {}: {e}",
                    path.display()
                )
            })?;
            let version = text
                .lines()
                .find_map(|l| l.strip_prefix(PREGENERATED_VERSION_TAG))
                .map(str::trim)
                .unwrap_or("unknown")
                .to_string();
            (text, None, version)
        }
    };

    let probed = probe_bindings(&bindings, &manifest_dir)?;

    write(&out_dir.join("bindings.rs"), &bindings)?;
    write(&out_dir.join("pfn.rs"), &probed.pfn)?;

    let apis: Vec<(&str, bool)> = probe::PROBED_APIS
        .iter()
        .map(|&api| (api, probed.declares(api)))
        .collect();
    write(
        &out_dir.join("build_info.rs"),
        &build_info(
            source.is_some(),
            include_dir.as_deref(),
            &hip_version,
            &apis,
        ),
    )?;

    // cfg flags, declared for every probed API whatever the headers.
    let mut declared = Vec::new();
    for (api, present) in &apis {
        let cfg = probe::cfg_name(api);
        println!("cargo::rustc-check-cfg=cfg({cfg})");
        if *present {
            println!("cargo::rustc-cfg={cfg}");
            declared.push(cfg);
        }
    }
    let type_values: Vec<String> = probe::PROBED_TYPES
        .iter()
        .map(|t| format!("{t:?}"))
        .collect();
    println!(
        "cargo::rustc-check-cfg=cfg(hip_sys_type, values({}))",
        type_values.join(", ")
    );
    for ty in probe::PROBED_TYPES {
        if probed.declares(ty) {
            println!("cargo::rustc-cfg=hip_sys_type=\"{ty}\"");
        }
    }

    // Links metadata: DEP_HIPJIT_HIP_SYS_<KEY> for dependents' build scripts.
    let probed: Vec<String> = probe::PROBED_APIS
        .iter()
        .map(|a| probe::cfg_name(a))
        .collect();
    println!("cargo::metadata=probed_cfgs={}", probed.join(","));
    println!("cargo::metadata=cfgs={}", declared.join(","));
    println!(
        "cargo::metadata=bindings={}",
        if source.is_some() {
            "generated"
        } else {
            "pregenerated"
        }
    );
    println!("cargo::metadata=hip_version={hip_version}");
    if let Some(found) = &source {
        println!("cargo::metadata=include_dir={}", found.dir.display());
        println!("cargo::metadata=include_origin={}", found.origin);
    }

    if std::env::var_os("CARGO_FEATURE_LINK").is_some() {
        if let Some(lib) = include_dir
            .as_deref()
            .and_then(Path::parent)
            .map(|root| root.join("lib"))
            .filter(|lib| lib.join("libamdhip64.so").exists())
        {
            println!("cargo::rustc-link-search=native={}", lib.display());
        }
        println!("cargo::rustc-link-lib=dylib=amdhip64");
    }
    Ok(())
}

/// Runs bindgen on the header set in `dir` and returns the bindings' source.
#[cfg(feature = "bindgen")]
fn generate(dir: &Path) -> Result<String, String> {
    let generated = run_bindgen::generate(dir)?;
    for file in &generated.files {
        println!("cargo::rerun-if-changed={}", file.display());
    }
    Ok(generated.text)
}

/// Without bindgen no header set is looked for, so none is ever found.
#[cfg(not(feature = "bindgen"))]
fn generate(dir: &Path) -> Result<String, String> {
    Err(format!(
        "headers found in {}, but hipjit-sys is built without its feature `bindgen`",
        dir.display()
    ))
}

/// What the bindings declare: read from them by the probe (syn).
#[cfg(feature = "bindgen")]
fn probe_bindings(bindings: &str, _manifest_dir: &Path) -> Result<probe::Probed, String> {
    let file =
        syn::parse_file(bindings).map_err(|e| format!("the bindings do not parse as Rust: {e}"))?;
    Ok(probe::Inventory::of(&file).probed())
}

/// Without syn, the bindings are the pregenerated ones: their committed probe.
#[cfg(not(feature = "bindgen"))]
fn probe_bindings(_bindings: &str, manifest_dir: &Path) -> Result<probe::Probed, String> {
    let read = |rel: &str| {
        let path = manifest_dir.join(rel);
        println!("cargo::rerun-if-changed={rel}");
        std::fs::read_to_string(&path)
            .map_err(|e| format!("cannot read the pregenerated probe {}: {e}", path.display()))
    };
    Ok(probe::Probed::committed(
        read(probe::PREGENERATED_PFN)?,
        &read(probe::PREGENERATED_PROBE)?,
    ))
}

fn env(name: &str) -> Result<String, String> {
    std::env::var(name).map_err(|e| format!("cargo did not set {name}: {e}"))
}

fn write(path: &Path, text: &str) -> Result<(), String> {
    std::fs::write(path, text).map_err(|e| format!("cannot write {}: {e}", path.display()))
}

/// With no headers found, rebuild when a candidate's `include/` directory appears or changes:
/// watch the existing ones (cargo treats a missing path as always changed, which would rerun
/// this script on every build).
#[cfg_attr(not(feature = "bindgen"), allow(dead_code))]
fn watch_candidates(tried: &[find::Tried]) {
    for dir in tried.iter().filter_map(|t| t.dir.as_ref()) {
        if dir.is_dir() {
            println!("cargo::rerun-if-changed={}", dir.display());
        }
    }
}

fn build_info(
    generated: bool,
    include_dir: Option<&Path>,
    hip_version: &str,
    apis: &[(&str, bool)],
) -> String {
    let mut s = String::new();
    let bindings = if generated {
        "generated"
    } else {
        "pregenerated"
    };
    let dir = match include_dir {
        Some(d) => format!("Some({:?})", d.display().to_string()),
        None => "None".to_string(),
    };
    let _ = writeln!(
        s,
        "/// How the bindings were made: `\"generated\"` (bindgen on this machine's headers) or \
         `\"pregenerated\"` (committed in hip-sys).\npub const BINDINGS: &str = {bindings:?};"
    );
    let _ = writeln!(
        s,
        "/// The header directory the bindings were generated from (the one holding `hip/`); \
         `None` for pregenerated bindings.\npub const INCLUDE_DIR: Option<&str> = {dir};"
    );
    let _ = writeln!(
        s,
        "/// `HIP_VERSION_MAJOR.MINOR.PATCH` from `hip/hip_version.h` of that header set (for \
         pregenerated bindings, of the set they were made from). Informational only: APIs are \
         probed by declaration.\npub const HIP_VERSION: &str = {hip_version:?};"
    );
    let entries: Vec<String> = apis.iter().map(|(a, p)| format!("({a:?}, {p})")).collect();
    let _ = writeln!(
        s,
        "/// Each probed C function and whether the bindings declare it (the same facts as the \
         `hip_api_*` cfg flags).\npub const APIS: &[(&str, bool)] = &[{}];",
        entries.join(", ")
    );
    s
}
