//! `hipjit cache freeze RECORD -o FILE`: the requests of a record file (`HIPJIT_RECORD`),
//! compiled or found in the cache, frozen into a bundle a machine without a compiler serves
//! (`HIPJIT_FROZEN`, `hipjit::jit::JitOptions::frozen`).

use std::path::Path;

use hipjit::jit::{FreezeError, Freezer, JitOptions};

use crate::output::{self, human_bytes, CliError};

/// Freezes the requests of `record` into `out`.
///
/// Errors: exit status 1 when a request cannot be compiled or frozen, or the bundle cannot
/// be written; 2 for a record line that does not read, or an output that cannot be written
/// to (a FIFO, socket, block device or directory).
pub fn run(record: &Path, out: &Path, json: bool) -> Result<(), CliError> {
    let mut freezer = Freezer::new(JitOptions::default())
        .map_err(|e| CliError::failed(format!("cannot compile: {e}")))?;
    let n = freezer.add_records(record).map_err(|e| match e {
        e @ (FreezeError::BadRecord { .. } | FreezeError::Record { .. }) => {
            CliError::usage(e.to_string())
        }
        e => CliError::failed(format!("cannot freeze: {e}")),
    })?;
    let bundle = freezer.finish();
    bundle.write(out).map_err(|e| match e {
        hipjit::cache::FrozenError::Write(
            e @ hipjit::file_write::WriteError::NotRegular { .. },
        ) => CliError::usage(format!("-o {}: {e}", out.display())),
        e => CliError::failed(format!("cannot write {}: {e}", out.display())),
    })?;
    let file_bytes = std::fs::metadata(out).map_or(0, |m| m.len());
    if json {
        output::print_json(serde_json::json!({
            "bundle": output::path_json(out), "record": output::path_json(record),
            "requests": n, "entries": bundle.entries().len(), "file_bytes": file_bytes,
        }))
    } else {
        println!(
            "{}: {} requests frozen ({} entries, {})",
            out.display(),
            n,
            bundle.entries().len(),
            human_bytes(file_bytes)
        );
        Ok(())
    }
}
