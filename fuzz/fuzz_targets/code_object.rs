//! Fuzz target: `CodeObject::from_bytes` on arbitrary bytes, with no target and with a few
//! target IDs, then everything a caller reads from a code object. Any panic is a bug.
#![no_main]

use hipjit::code_object::CodeObject;
use hipjit::target_id::TargetId;
use libfuzzer_sys::fuzz_target;

const TARGETS: &[&str] = &["gfx90a", "gfx942:sramecc+:xnack-", "gfx1100", "gfx1030"];

fn exercise(co: &CodeObject) {
    let _ = co.target_id().to_string();
    let _ = co.code_object_version();
    let _ = co.container();
    let _ = co.elf().len();
    for k in co.kernels() {
        let _ = co.kernel(&k.name);
    }
    // A miss runs the demangling suggestions over every kernel name.
    let _ = co.kernel("scale");
    let _ = co.kernel("scale(double*, double)");
}

fuzz_target!(|data: &[u8]| {
    if let Ok(co) = CodeObject::from_bytes(data, None) {
        exercise(&co);
    }
    for target in TARGETS {
        if let Ok(target) = TargetId::parse(target) {
            if let Ok(co) = CodeObject::from_bytes(data, Some(&target)) {
                exercise(&co);
            }
        }
    }
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = TargetId::parse(text);
    }
});
