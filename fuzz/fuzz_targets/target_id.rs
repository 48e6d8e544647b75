//! Fuzz target: the target-ID parsers (`TargetId::parse` on text, `TargetId::from_e_flags` on
//! ELF flags and ABI version, `SmTarget::parse`) and what callers do with a parsed ID (print,
//! compare, check a list). Any panic is a bug.
#![no_main]

use hipjit::cuda::target::SmTarget;
use hipjit::target_id::{check_target_list, TargetId};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if data.len() >= 5 {
        let flags = u32::from_le_bytes([data[0], data[1], data[2], data[3]]);
        if let Ok(t) = TargetId::from_e_flags(flags, data[4]) {
            let _ = t.to_string();
            let _ = t.e_flags_mach();
        }
    }
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let ids: Vec<TargetId> = text
        .split(',')
        .filter_map(|s| TargetId::parse(s).ok())
        .collect();
    for t in &ids {
        let _ = t.to_string();
        let _ = (t.processor(), t.xnack(), t.sramecc(), t.is_generic(), t.specificity());
        let _ = t.e_flags_mach();
        for d in &ids {
            let _ = t.runs_on(d);
        }
    }
    let _ = check_target_list(&ids);
    if let Ok(s) = SmTarget::parse(text) {
        let _ = (s.to_string(), s.major(), s.minor(), s.runs_on(s));
    }
});
