//! Fuzz target: the compiler-diagnostics parser (`hipjit::compiler::diagnostics::parse`) on
//! arbitrary text as a compiler's standard error, and the dependency-file reader
//! (`hipjit::compiler::parse_depfile`). Any panic is a bug.
#![no_main]

use hipjit::compiler::diagnostics::parse;
use hipjit::compiler::parse_depfile;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    for d in parse(&text, &|f: &str| f.replace("kernel.hip", "user/k.hip")) {
        let _ = d.to_string();
    }
    let _ = parse_depfile(&text);
});
