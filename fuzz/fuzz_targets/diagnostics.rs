//! Fuzz target: the compiler-diagnostics parsers (`hipjit::compiler::diagnostics::parse` for
//! clang's format, `parse_nvcc` for nvcc's) on arbitrary bytes as a compiler's output, with
//! each diagnostic rendered and round-tripped through its cache artefact form, and the
//! dependency-file reader (`hipjit::compiler::depfile::parse`, then `map_build_paths`). Any panic is a bug.
#![no_main]

use hipjit::compiler::diagnostics::{from_artefact, parse, parse_nvcc, render_all, to_artefact};
use hipjit::compiler::depfile;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let rename = |f: &str| f.replace("kernel.hip", "user/k.hip");
    for diags in [parse(data, &rename), parse_nvcc(data, &rename)] {
        for d in &diags {
            let _ = d.to_string();
        }
        let _ = render_all(&diags);
        let _ = from_artefact(to_artefact(&diags).as_deref());
    }
    if let Some(deps) = depfile::parse(data) {
        let includes = [std::path::PathBuf::from("/usr/include"), "inc".into()];
        let _ = depfile::map_build_paths(
            &deps,
            "kernel.hip",
            "include",
            &includes,
            std::path::Path::new("/tmp/hipjit-build-1-x"),
        );
    }
});
