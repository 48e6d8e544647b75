//! `hipjit inspect FILE [--target T] [--json]`: what hipjit's code-object reader finds in a file
//! (raw ELF, offload bundle or compressed offload bundle): container, target ID, code object
//! version, and each kernel with its arguments and resources.

use std::path::PathBuf;

use hipjit::code_object::CodeObject;
use hipjit::target_id::TargetId;

use crate::output::{self, CliError};

/// Arguments of `hipjit inspect`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The code object: raw ELF (.hsaco), offload bundle (.hipfb) or compressed bundle (CCOB).
    pub file: PathBuf,
    /// From a bundle, the entry that runs on this target ID (e.g. `gfx90a`,
    /// `gfx942:sramecc+:xnack-`); required when the bundle holds several AMDGPU entries. For a
    /// raw ELF, checks that it runs on this target.
    #[arg(long, value_name = "TARGET_ID")]
    pub target: Option<TargetId>,
    /// Print JSON (with "schema_version": 1) instead of text.
    #[arg(long)]
    pub json: bool,
}

/// Runs `hipjit inspect`.
///
/// Errors: exit status 1 when the file cannot be read or is no code object hipjit reads (the
/// message names the file, the format found and, with `--target`, the target).
pub fn run(args: &Args) -> Result<(), CliError> {
    let path = &args.file;
    let bytes = std::fs::read(path)
        .map_err(|e| CliError::failed(format!("{}: cannot read the file: {e}", path.display())))?;
    let co = CodeObject::from_bytes(&bytes, args.target.as_ref()).map_err(|e| {
        let target = args
            .target
            .as_ref()
            .map(|t| format!(" (target {t})"))
            .unwrap_or_default();
        CliError::failed(format!("{}{target}: {e}", path.display()))
    })?;
    if args.json {
        output::print_json(serde_json::json!({
            "file": path,
            "file_size": bytes.len(),
            "container": output::container_name(co.container()),
            "bundle_entry": co.bundle_entry(),
            "target_id": co.target_id().to_string(),
            "processor": co.target_id().processor(),
            "code_object_version": co.code_object_version(),
            "elf_size": co.elf().len(),
            "kernels": co.kernels().iter().map(output::kernel_json).collect::<Vec<_>>(),
        }))
    } else {
        println!("file:                {}", path.display());
        println!(
            "container:           {}{}",
            output::container_text(co.container()),
            co.bundle_entry()
                .map(|e| format!(", entry {e}"))
                .unwrap_or_default()
        );
        println!("target ID:           {}", co.target_id());
        println!("code object version: v{}", co.code_object_version());
        println!("ELF size:            {} B", co.elf().len());
        println!("kernels:             {}", co.kernels().len());
        for k in co.kernels() {
            println!();
            print!("{}", output::kernel_text(k, 0));
        }
        Ok(())
    }
}
