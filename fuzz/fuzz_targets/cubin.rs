//! Fuzz target: `Cubin::from_bytes` on arbitrary bytes, then everything a caller reads from a
//! cubin (SM target, ELF ABI version, kernels and their parameters, kernel lookup). Any panic
//! is a bug.
#![no_main]

use hipjit::code_object::cubin::Cubin;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(c) = Cubin::from_bytes(data) {
        let _ = c.target().to_string();
        let _ = c.abi_version();
        let _ = c.elf().len();
        for k in c.kernels() {
            let _ = c.kernel(&k.name);
            let _ = k.args.iter().map(|a| a.offset + a.size).max();
        }
        let _ = c.kernel("scale");
    }
});
