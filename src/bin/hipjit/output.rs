//! Shared output of the `hipjit` command: the error type with its exit status, JSON printing
//! with the schema version, and the text form of a kernel's arguments and resources.

use std::fmt::Write as _;

use hipjit::code_object::{Container, KernelInfo};

/// The version of every JSON document the command prints (the `"schema_version"` key). Raised
/// when a key is removed or changes meaning; new keys may appear without a raise.
pub const SCHEMA_VERSION: u32 = 1;

/// The version of `hipjit compile --json` documents: 2 since each result names its compiler
/// (`"compiler": {"kind", "path", "version", "reason"}`, per result and at the top), the top
/// level's `compiler` being the first result's (or the one that would compile, when none
/// succeeded; `null` when none is found).
pub const COMPILE_SCHEMA_VERSION: u32 = 2;

/// Exit status: success.
pub const EXIT_OK: u8 = 0;
/// Exit status: the work failed (compile error, unreadable or malformed input file, cache I/O
/// error, a runtime probe that could not run).
pub const EXIT_FAILED: u8 = 1;
/// Exit status: usage error (unknown option, missing argument, bad value such as a malformed
/// target ID or size). clap exits with the same status for the errors it finds itself.
pub const EXIT_USAGE: u8 = 2;

/// A failure of a subcommand: the message printed on stderr and the exit status.
#[derive(Debug)]
pub struct CliError {
    /// [`EXIT_FAILED`] or [`EXIT_USAGE`].
    pub status: u8,
    /// One or more lines naming the file, the target and what was wrong.
    pub message: String,
}

impl CliError {
    /// The work failed (exit status 1).
    pub fn failed(message: impl Into<String>) -> CliError {
        CliError {
            status: EXIT_FAILED,
            message: message.into(),
        }
    }

    /// A usage error (exit status 2).
    pub fn usage(message: impl Into<String>) -> CliError {
        CliError {
            status: EXIT_USAGE,
            message: message.into(),
        }
    }
}

/// Prints `value` (an object) as pretty JSON on stdout with the `"schema_version"` key added.
pub fn print_json(value: serde_json::Value) -> Result<(), CliError> {
    print_json_versioned(value, SCHEMA_VERSION)
}

/// [`print_json`] with the `"schema_version"` key set to `version` (a document whose schema
/// moved on its own, such as [`COMPILE_SCHEMA_VERSION`]).
pub fn print_json_versioned(mut value: serde_json::Value, version: u32) -> Result<(), CliError> {
    if let serde_json::Value::Object(map) = &mut value {
        map.insert("schema_version".into(), version.into());
    }
    let text = serde_json::to_string_pretty(&value)
        .map_err(|e| CliError::failed(format!("cannot encode the JSON output: {e}")))?;
    println!("{text}");
    Ok(())
}

/// A path in JSON: its text as a string when it is UTF-8; otherwise an object
/// `{"text": <the path with each invalid sequence as U+FFFD>, "hex": <its bytes in hex>}`, so
/// that any path can be printed and the exact one recovered.
pub fn path_json(p: impl AsRef<std::path::Path>) -> serde_json::Value {
    use std::os::unix::ffi::OsStrExt;
    let p = p.as_ref();
    match p.to_str() {
        Some(s) => s.into(),
        None => {
            let bytes = p.as_os_str().as_bytes();
            let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
            serde_json::json!({ "text": String::from_utf8_lossy(bytes), "hex": hex })
        }
    }
}

/// A compiler's diagnostics in JSON, each file they name (`file`, `notes[].file`,
/// `included_from[].file`) as [`path_json`]. A diagnostic holds its file names as text, with
/// bytes that are not UTF-8 replaced; a name that is such text of one of `paths` (the input,
/// the include directories), or of a file under one of them, is given as that path, so its
/// exact bytes come out as `hex`.
pub fn diagnostics_json(
    diags: &[hipjit::compiler::diagnostics::Diagnostic],
    paths: &[&std::path::Path],
) -> serde_json::Value {
    let mut v = serde_json::to_value(diags).unwrap_or(serde_json::Value::Null);
    if let serde_json::Value::Array(list) = &mut v {
        for d in list {
            diagnostic_paths(d, paths);
        }
    }
    v
}

/// Replaces the file names of one diagnostic's JSON (its notes' too) with [`path_json`]s.
fn diagnostic_paths(d: &mut serde_json::Value, paths: &[&std::path::Path]) {
    let Some(d) = d.as_object_mut() else {
        return;
    };
    if let Some(f) = d.get_mut("file") {
        user_path(f, paths);
    }
    if let Some(serde_json::Value::Array(chain)) = d.get_mut("included_from") {
        for i in chain {
            if let Some(f) = i.get_mut("file") {
                user_path(f, paths);
            }
        }
    }
    if let Some(serde_json::Value::Array(notes)) = d.get_mut("notes") {
        for n in notes {
            diagnostic_paths(n, paths);
        }
    }
}

/// `f`, a file name as text (or null), as [`path_json`] of the path of `paths` it names, or of
/// the file under the longest one it names; otherwise as the text.
fn user_path(f: &mut serde_json::Value, paths: &[&std::path::Path]) {
    let Some(text) = f.as_str() else {
        return;
    };
    let mut best: Option<(usize, std::path::PathBuf)> = None;
    for p in paths {
        let lossy = p.to_string_lossy();
        let found = if text == lossy {
            Some(p.to_path_buf())
        } else {
            text.strip_prefix(&*lossy)
                .and_then(|r| r.strip_prefix('/'))
                .filter(|r| !r.is_empty())
                .map(|r| p.join(r))
        };
        if let Some(found) = found {
            if best.as_ref().is_none_or(|(len, _)| lossy.len() > *len) {
                best = Some((lossy.len(), found));
            }
        }
    }
    *f = path_json(best.map_or_else(|| std::path::PathBuf::from(text), |(_, p)| p));
}

/// A list of paths in JSON, each as [`path_json`].
pub fn paths_json<P: AsRef<std::path::Path>>(ps: impl IntoIterator<Item = P>) -> serde_json::Value {
    ps.into_iter().map(path_json).collect::<Vec<_>>().into()
}

/// The name of a container as the command prints it (text and JSON).
pub fn container_name(c: Container) -> &'static str {
    match c {
        Container::Elf => "elf",
        Container::OffloadBundle => "offload-bundle",
        Container::CompressedOffloadBundle => "compressed-offload-bundle",
    }
}

/// A description of a container for the text output.
pub fn container_text(c: Container) -> &'static str {
    match c {
        Container::Elf => "raw ELF code object",
        Container::OffloadBundle => "clang offload bundle (__CLANG_OFFLOAD_BUNDLE__)",
        Container::CompressedOffloadBundle => "compressed clang offload bundle (CCOB)",
    }
}

/// A byte count for people: `512 B`, `1.5 KiB`, `2.0 GiB`.
pub fn human_bytes(n: u64) -> String {
    const UNITS: [&str; 5] = ["KiB", "MiB", "GiB", "TiB", "PiB"];
    if n < 1024 {
        return format!("{n} B");
    }
    let mut v = n as f64 / 1024.0;
    let mut unit = 0;
    while v >= 1024.0 && unit + 1 < UNITS.len() {
        v /= 1024.0;
        unit += 1;
    }
    format!("{v:.1} {}", UNITS[unit])
}

/// A duration in milliseconds with one decimal.
pub fn ms(d: std::time::Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1000.0)
}

/// The JSON form of a kernel: the reader's [`KernelInfo`] fields as they are (sizes in bytes),
/// so the keys are those of `hipjit::code_object::KernelInfo` and `KernelArg`.
pub fn kernel_json(k: &KernelInfo) -> serde_json::Value {
    serde_json::to_value(k).unwrap_or_else(|e| serde_json::json!({ "error": e.to_string() }))
}

/// The text form of one kernel: its name, its explicit and hidden arguments (offset, size,
/// value kind, address space) and its resources, indented by `indent` spaces.
pub fn kernel_text(k: &KernelInfo, indent: usize) -> String {
    let pad = " ".repeat(indent);
    let mut s = String::new();
    let _ = writeln!(s, "{pad}kernel {} (descriptor {})", k.name, k.symbol);
    if let Some(d) = demangled(&k.name) {
        let _ = writeln!(s, "{pad}  demangled: {d}");
    }
    let _ = writeln!(
        s,
        "{pad}  resources: SGPR {}, VGPR {}, AGPR {}, LDS {} B, scratch {} B/work-item, spills SGPR {} VGPR {}, wavefront {}, max flat workgroup size {}{}",
        k.sgpr_count,
        k.vgpr_count,
        k.agpr_count.map_or_else(|| "-".to_owned(), |a| a.to_string()),
        k.group_segment_fixed_size,
        k.private_segment_fixed_size,
        k.sgpr_spill_count,
        k.vgpr_spill_count,
        k.wavefront_size,
        k.max_flat_workgroup_size,
        if k.uses_dynamic_stack { ", dynamic stack" } else { "" },
    );
    let _ = writeln!(
        s,
        "{pad}  kernarg segment: {} B, align {}",
        k.kernarg_segment_size, k.kernarg_segment_align
    );
    let _ = writeln!(
        s,
        "{pad}  {:>6} {:>5}  {:<28} {:<9} name",
        "offset", "size", "value kind", "addrspace"
    );
    for a in &k.args {
        let name = match (&a.name, &a.type_name) {
            (Some(n), Some(t)) => format!("{n}: {t}"),
            (Some(n), None) => n.clone(),
            (None, Some(t)) => format!(": {t}"),
            (None, None) => String::new(),
        };
        let _ = writeln!(
            s,
            "{pad}  {:>6} {:>5}  {:<28} {:<9} {}",
            a.offset,
            a.size,
            a.value_kind,
            a.address_space.as_deref().unwrap_or("-"),
            name
        );
    }
    s
}

/// What hipjit says of a cubin kernel's registers and shared memory: a cubin does not record
/// them (the CUDA driver reports them per kernel, `cuFuncGetAttribute`).
pub const CUBIN_RESOURCES_NOTE: &str =
    "not recorded in a cubin (the CUDA driver reports registers and shared memory per kernel)";

/// The text form of one cubin kernel: its name, its parameter block and each parameter
/// (offset, size in bytes), and a line saying that registers are not in the cubin; indented by
/// `indent` spaces.
pub fn cubin_kernel_text(k: &KernelInfo, indent: usize) -> String {
    let pad = " ".repeat(indent);
    let mut s = String::new();
    let _ = writeln!(s, "{pad}kernel {}", k.name);
    if let Some(d) = demangled(&k.name) {
        let _ = writeln!(s, "{pad}  demangled: {d}");
    }
    let _ = writeln!(s, "{pad}  resources: {CUBIN_RESOURCES_NOTE}");
    if k.max_flat_workgroup_size > 0 {
        let _ = writeln!(
            s,
            "{pad}  max threads per block: {} (__launch_bounds__)",
            k.max_flat_workgroup_size
        );
    }
    let _ = writeln!(
        s,
        "{pad}  parameters: {} B, {} parameter(s)",
        k.kernarg_segment_size,
        k.args.len()
    );
    let _ = writeln!(s, "{pad}  {:>6} {:>5}  #", "offset", "size");
    for (i, a) in k.args.iter().enumerate() {
        let _ = writeln!(s, "{pad}  {:>6} {:>5}  {i}", a.offset, a.size);
    }
    s
}

/// The JSON form of one cubin kernel: `name`, `symbol`, `demangled` (or null), `params` (each
/// `index`, `offset`, `size`, bytes), `param_size` (bytes), `max_threads_per_block` (0: no
/// `__launch_bounds__`), `registers` null and `resources_note` saying why.
pub fn cubin_kernel_json(k: &KernelInfo) -> serde_json::Value {
    serde_json::json!({
        "name": k.name,
        "symbol": k.symbol,
        "demangled": demangled(&k.name),
        "params": k.args.iter().enumerate().map(|(i, a)| serde_json::json!({
            "index": i, "offset": a.offset, "size": a.size,
        })).collect::<Vec<_>>(),
        "param_size": k.kernarg_segment_size,
        "max_threads_per_block": k.max_flat_workgroup_size,
        "registers": null,
        "resources_note": CUBIN_RESOURCES_NOTE,
    })
}

/// The demangled form of a C++ kernel name (`_Z5scalePdd` -> `scale(double*, double)`).
pub fn demangled(name: &str) -> Option<String> {
    if !name.starts_with("_Z") {
        return None;
    }
    let sym = cpp_demangle::Symbol::new(name).ok()?;
    sym.demangle(&cpp_demangle::DemangleOptions::default()).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_diagnostic_under_a_non_utf8_include_dir_names_its_bytes() {
        use hipjit::compiler::diagnostics::{Diagnostic, IncludedFrom, Severity};
        use std::os::unix::ffi::OsStrExt;
        let dir = std::path::Path::new(std::ffi::OsStr::from_bytes(b"i\xff"));
        let src = std::path::Path::new("k.hip");
        let mut d = Diagnostic::new(
            Severity::Error,
            Some("i\u{fffd}/v.h".into()),
            Some(1),
            Some(2),
            "x",
        );
        d.included_from.push(IncludedFrom {
            file: "k.hip".into(),
            line: 1,
        });
        d.notes.push(Diagnostic::new(
            Severity::Note,
            Some("i\u{fffd}/w.h".into()),
            None,
            None,
            "y",
        ));
        let v = diagnostics_json(&[d], &[src, dir]);
        assert_eq!(
            v[0]["file"],
            serde_json::json!({"text": "i\u{fffd}/v.h", "hex": "69ff2f762e68"})
        );
        assert_eq!(v[0]["included_from"][0]["file"], "k.hip");
        assert_eq!(v[0]["notes"][0]["file"]["hex"], "69ff2f772e68");
    }

    #[test]
    fn a_non_utf8_path_is_text_and_hex() {
        use std::os::unix::ffi::OsStrExt;
        let p = std::path::Path::new(std::ffi::OsStr::from_bytes(b"/tmp/a\xffb"));
        assert_eq!(
            path_json(p),
            serde_json::json!({"text": "/tmp/a\u{fffd}b", "hex": "2f746d702f61ff62"})
        );
        assert_eq!(path_json("/tmp/k.hip"), serde_json::json!("/tmp/k.hip"));
    }

    #[test]
    fn human_bytes_uses_binary_units() {
        assert_eq!(human_bytes(512), "512 B");
        assert_eq!(human_bytes(1536), "1.5 KiB");
        assert_eq!(human_bytes(3 << 30), "3.0 GiB");
    }
}
