//! What hipjit, built against one HIP header set, makes of one HIP runtime: the probe of
//! the header × runtime matrix (`scripts/runtime-matrix.sh`).
//!
//! ```text
//! cargo run --example runtime_probe -- /usr/lib/x86_64-linux-gnu/libamdhip64.so.5
//! ```
//!
//! Prints one line of `key=value` words: `headers` (the headers' HIP version as
//! `hipGetProcAddress` takes it), `binding` (`proc-address`, `dlsym`, or
//! `dlsym-after-<error name>`), `props` (the device-properties entry point bound), `loader`
//! (`library-api`, `module-api`), `devices` (the count, or the error name of
//! `hipGetDeviceCount`), `device0` (`gfx...` target ID or the error name of opening device 0),
//! or `load=<error>` when the runtime did not load. Exit status 0 whenever the line was
//! printed; 2 without an argument.

use std::process::ExitCode;

use hipjit::runtime::{CodeObjectLoader, DevicePropertiesEntry, Runtime, SymbolBinding};

fn main() -> ExitCode {
    let Some(path) = std::env::args_os().nth(1) else {
        eprintln!("usage: runtime_probe LIBRARY");
        return ExitCode::from(2);
    };
    let mut words = vec![format!("headers={}", hipjit::runtime::HEADER_HIP_VERSION)];
    match Runtime::load_from(&path) {
        Err(e) => words.push(format!("load={}", e.to_string().replace(' ', "_"))),
        Ok(rt) => {
            words.push(format!(
                "binding={}",
                match rt.symbol_binding() {
                    SymbolBinding::ProcAddress { .. } => "proc-address".to_owned(),
                    SymbolBinding::Dlsym => "dlsym".to_owned(),
                    SymbolBinding::DlsymAfterRefusal { code, .. } => format!(
                        "dlsym-after-{}",
                        hipjit::error::hip_error_name(code).unwrap_or("unknown")
                    ),
                }
            ));
            words.push(format!(
                "props={}",
                match rt.device_properties_entry() {
                    DevicePropertiesEntry::R0600 => "R0600",
                    DevicePropertiesEntry::R0000 => "R0000",
                }
            ));
            words.push(format!(
                "loader={}",
                match rt.code_object_loader() {
                    CodeObjectLoader::LibraryApi => "library-api",
                    CodeObjectLoader::ModuleApi => "module-api",
                }
            ));
            match rt.device_count() {
                Ok(n) => words.push(format!("devices={n}")),
                Err(e) => words.push(format!("devices={}", e.name())),
            }
            match rt.device(0) {
                Ok(d) => words.push(format!(
                    "device0={}",
                    d.target_id()
                        .map(|t| t.to_string())
                        .unwrap_or_else(|| d.arch_name().to_owned())
                )),
                Err(e) => words.push(format!("device0={}", e.name())),
            }
        }
    }
    println!("{}", words.join(" "));
    ExitCode::SUCCESS
}
