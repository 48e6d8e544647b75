//! `hipjit inspect FILE [--target T] [--json]`: what hipjit's code-object reader finds in a file
//! (raw ELF, offload bundle or compressed offload bundle): container, target ID, code object
//! version, and each kernel with its arguments and resources. A CUDA cubin (ELF `EM_CUDA`, the
//! code object of HIP's NVIDIA platform) is read by hipjit's cubin reader: SM target, ELF ABI
//! version and each kernel's parameter layout.

use std::path::PathBuf;

use hipjit::code_object::cubin::{Cubin, EM_CUDA};
use hipjit::code_object::{bundle_entries, CodeObject, CodeObjectError};
use hipjit::file_read::{read_file, Streams, CODE_OBJECT_LIMIT};
use hipjit::target_id::TargetId;

use crate::output::{self, CliError};

/// Arguments of `hipjit inspect`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The code object: raw ELF (.hsaco), offload bundle (.hipfb), compressed bundle (CCOB) or
    /// CUDA cubin (.cubin); `-` or /dev/stdin reads standard input. A regular file of at most
    /// 512 MiB (hipjit::file_read::CODE_OBJECT_LIMIT): FIFOs and devices are refused.
    pub file: PathBuf,
    /// From a bundle, read only the entry that runs on this target ID (e.g. `gfx90a`,
    /// `gfx942:sramecc+:xnack-`); without it, every AMDGPU entry of a bundle is read and
    /// listed. For a raw ELF, checks that it runs on this target.
    #[arg(long, value_name = "TARGET_ID")]
    pub target: Option<TargetId>,
    /// Print JSON (with "schema_version": 1) instead of text.
    #[arg(long)]
    pub json: bool,
}

/// Runs `hipjit inspect`. A bundle is listed entry by entry; without `--target`, every AMDGPU
/// entry of a bundle is read, with it only the entry that runs on the target.
///
/// JSON keys: `file`, `file_size`, `container`, `entries` (bundle entries: `id`, `offset`,
/// `size`, `target_id`), `code_objects` (each: `bundle_entry`, `target_id`, `processor`,
/// `code_object_version`, `elf_size`, `kernels`), and `target_id`, `code_object_version`,
/// `kernels` of the first code object.
///
/// A cubin prints `file`, `file_size`, `container` ("cubin"), `platform` ("nvidia"),
/// `target_id` (`sm_90`), `elf_abi_version` and `kernels` (see `output::cubin_kernel_json`);
/// AMDGPU code objects carry `platform` "amd".
///
/// Errors: exit status 1 when the file cannot be read or is no code object hipjit reads (the
/// message names the file, the format found and, with `--target`, the target); 2 for
/// `--target` with a cubin.
pub fn run(args: &Args) -> Result<(), CliError> {
    let path = &args.file;
    let bytes =
        read_file(path, CODE_OBJECT_LIMIT, "a code object", Streams::Stdin).map_err(|e| {
            CliError::failed(format!(
                "{}: cannot read the file: {}",
                path.display(),
                e.reason()
            ))
        })?;
    if is_cubin(&bytes) {
        return run_cubin(args, &bytes);
    }
    let with_target = |e: CodeObjectError, t: Option<&TargetId>| {
        let target = t.map(|t| format!(" (target {t})")).unwrap_or_default();
        CliError::failed(format!("{}{target}: {e}", path.display()))
    };
    let entries = bundle_entries(&bytes).map_err(|e| with_target(e, args.target.as_ref()))?;
    let amdgpu: Vec<&TargetId> = entries
        .iter()
        .filter_map(|e| e.target_id.as_ref())
        .collect();
    let objects: Vec<CodeObject> = if args.target.is_none() && amdgpu.len() > 1 {
        amdgpu
            .iter()
            .map(|t| CodeObject::from_bytes(&bytes, Some(t)).map_err(|e| with_target(e, Some(t))))
            .collect::<Result<_, _>>()?
    } else {
        vec![CodeObject::from_bytes(&bytes, args.target.as_ref())
            .map_err(|e| with_target(e, args.target.as_ref()))?]
    };
    let container = objects[0].container();
    if args.json {
        let cos: Vec<serde_json::Value> = objects
            .iter()
            .map(|co| {
                serde_json::json!({
                    "bundle_entry": co.bundle_entry(),
                    "target_id": co.target_id().to_string(),
                    "processor": co.target_id().processor(),
                    "code_object_version": co.code_object_version(),
                    "elf_size": co.elf().len(),
                    "kernels": co.kernels().iter().map(output::kernel_json).collect::<Vec<_>>(),
                })
            })
            .collect();
        let first = &objects[0];
        output::print_json(serde_json::json!({
            "file": output::path_json(path),
            "file_size": bytes.len(),
            "platform": "amd",
            "container": output::container_name(container),
            "entries": entries.iter().map(|e| serde_json::json!({
                "id": e.id, "offset": e.offset, "size": e.size,
                "target_id": e.target_id.as_ref().map(ToString::to_string),
            })).collect::<Vec<_>>(),
            "code_objects": cos,
            "target_id": first.target_id().to_string(),
            "code_object_version": first.code_object_version(),
            "kernels": first.kernels().iter().map(output::kernel_json).collect::<Vec<_>>(),
        }))
    } else {
        println!(
            "file:                {} ({} B)",
            path.display(),
            bytes.len()
        );
        println!("container:           {}", output::container_text(container));
        for e in &entries {
            println!("  entry {} ({} B at offset {:#x})", e.id, e.size, e.offset);
        }
        for co in &objects {
            println!();
            if let Some(e) = co.bundle_entry() {
                println!("bundle entry:        {e}");
            }
            println!("target ID:           {}", co.target_id());
            println!("code object version: v{}", co.code_object_version());
            println!("ELF size:            {} B", co.elf().len());
            println!("kernels:             {}", co.kernels().len());
            for k in co.kernels() {
                println!();
                print!("{}", output::kernel_text(k, 0));
            }
        }
        Ok(())
    }
}

/// Whether `bytes` is an ELF whose `e_machine` is `EM_CUDA` (little-endian, as cubins are).
fn is_cubin(bytes: &[u8]) -> bool {
    bytes.len() >= 20
        && bytes.starts_with(b"\x7fELF")
        && u16::from_le_bytes([bytes[18], bytes[19]]) == EM_CUDA
}

fn run_cubin(args: &Args, bytes: &[u8]) -> Result<(), CliError> {
    let path = &args.file;
    if let Some(t) = &args.target {
        return Err(CliError::usage(format!(
            "--target {t}: {} is a CUDA cubin, which holds one SM target and no bundle; \
             --target selects AMDGPU bundle entries",
            path.display()
        )));
    }
    let cubin = Cubin::from_bytes(bytes)
        .map_err(|e| CliError::failed(format!("{}: {e}", path.display())))?;
    if args.json {
        return output::print_json(serde_json::json!({
            "file": output::path_json(path),
            "file_size": bytes.len(),
            "platform": "nvidia",
            "container": "cubin",
            "target_id": cubin.target().to_string(),
            "elf_abi_version": cubin.abi_version(),
            "kernels": cubin.kernels().iter().map(output::cubin_kernel_json).collect::<Vec<_>>(),
        }));
    }
    println!(
        "file:                {} ({} B)",
        path.display(),
        bytes.len()
    );
    println!("container:           CUDA cubin (HIP's NVIDIA platform)");
    println!("SM target:           {}", cubin.target());
    println!("ELF ABI version:     {}", cubin.abi_version());
    println!("kernels:             {}", cubin.kernels().len());
    for k in cubin.kernels() {
        println!();
        print!("{}", output::cubin_kernel_text(k, 0));
    }
    Ok(())
}
