//! The code-object reader on real code objects from hipcc 5.2.3 (Debian bookworm) and hipcc
//! 7.0.2 (Debian sid), made by tests/data/code-objects/regen.sh. Kernel metadata is checked
//! against what `llvm-readelf-15 --notes` prints for the same bytes.

use std::collections::BTreeMap;
use std::process::Command;

use hipjit::code_object::{CodeObject, CodeObjectError, Container, KernelInfo};
use hipjit::target_id::TargetId;

fn read(name: &str) -> Vec<u8> {
    let path = crate::common::code_object(name);
    std::fs::read(&path).unwrap_or_else(|e| {
        panic!(
            "{}: {e}; rebuild the test objects with tests/data/code-objects/regen.sh",
            path.display()
        )
    })
}

fn tid(s: &str) -> TargetId {
    TargetId::parse(s).unwrap()
}

/// Raw code objects: file, the --offload-arch regen.sh used, and the code object version that
/// compiler writes (hipcc 5.2.3: v4, or v5 with -mcode-object-version=5; hipcc 7.0.2: v6).
const RAW: &[(&str, &str, u32)] = &[
    ("kernels-gfx90a.hsaco", "gfx90a", 4),
    ("kernels-gfx908.hsaco", "gfx908", 4),
    ("kernels-gfx1030.hsaco", "gfx1030", 4),
    ("kernels-gfx90a_xnack-.hsaco", "gfx90a:xnack-", 4),
    ("kernels-gfx90a-v5.hsaco", "gfx90a", 5),
    ("kernels-gfx942.hsaco", "gfx942", 6),
    ("kernels-gfx950.hsaco", "gfx950", 6),
    ("kernels-gfx1100.hsaco", "gfx1100", 6),
    ("kernels-gfx1151.hsaco", "gfx1151", 6),
    (
        "kernels-gfx942_sramecc+_xnack-.hsaco",
        "gfx942:sramecc+:xnack-",
        6,
    ),
    ("single-gfx90a.hsaco", "gfx90a", 4),
    ("single-gfx900.hsaco", "gfx900", 4),
    ("single-gfx906.hsaco", "gfx906", 4),
    ("single-gfx940.hsaco", "gfx940", 4),
    (
        "single-gfx908_sramecc-_xnack+.hsaco",
        "gfx908:sramecc-:xnack+",
        4,
    ),
    ("single-gfx942.hsaco", "gfx942", 6),
    ("single-gfx1201.hsaco", "gfx1201", 6),
    // Code object v3 (-mcode-object-version=3 --offload-arch=gfx906): LLVM sets the v3 xnack and
    // sramecc bits for "any", and the bits read as "on", as the ROCm loader reads them.
    ("single-gfx906-v3.hsaco", "gfx906:sramecc+:xnack+", 3),
];

const KERNELS: &[&str] = &[
    "mixed",
    "axpy_f32",
    "axpy_f64",
    "block_sum",
    "_Z5scalePdd",
    "_Z4fillIfEvPT_S0_i",
    "_ZN3ops4reluEPfi",
];

// ---- llvm-readelf --notes, parsed ------------------------------------------------------------

/// One kernel as llvm-readelf prints it: its scalar fields and its argument maps.
#[derive(Debug, Default)]
struct NotesKernel {
    fields: BTreeMap<String, String>,
    args: Vec<BTreeMap<String, String>>,
}

fn unquote(v: &str) -> String {
    let v = v.trim();
    if v.len() >= 2 && v.starts_with('\'') && v.ends_with('\'') {
        v[1..v.len() - 1].replace("''", "'")
    } else {
        v.to_owned()
    }
}

/// Runs `llvm-readelf-15 --notes` on `elf` and parses the `amdhsa.kernels` list of its YAML
/// rendering of NT_AMDGPU_METADATA.
fn readelf_kernels(elf: &[u8]) -> Vec<NotesKernel> {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("object.hsaco");
    std::fs::write(&path, elf).unwrap();
    let out = Command::new("llvm-readelf-15")
        .arg("--notes")
        .arg(&path)
        .output()
        .unwrap_or_else(|e| {
            panic!("cannot run llvm-readelf-15 ({e}); install it: apt-get install llvm-15")
        });
    assert!(out.status.success(), "llvm-readelf-15 failed: {out:?}");
    parse_notes(&String::from_utf8_lossy(&out.stdout))
}

fn parse_notes(text: &str) -> Vec<NotesKernel> {
    let mut kernels: Vec<NotesKernel> = Vec::new();
    let mut in_kernels = false;
    let mut kernel_key = String::new();
    for line in text.lines() {
        if line.starts_with("amdhsa.kernels:") {
            in_kernels = true;
            continue;
        }
        if !in_kernels {
            continue;
        }
        let indent = line.len() - line.trim_start().len();
        let body = line.trim_start();
        if indent == 0 {
            in_kernels = false;
            continue;
        }
        // "  - .key: value" starts a kernel, "      - .key: value" an argument.
        let (indent, body, starts_item) = match body.strip_prefix("- ") {
            Some(rest) => (indent + 2, rest, true),
            None => (indent, body, false),
        };
        if indent == 4 && starts_item {
            kernels.push(NotesKernel::default());
        }
        let Some(kernel) = kernels.last_mut() else {
            continue;
        };
        let Some((key, value)) = body.split_once(':') else {
            continue; // an item of a list value such as .language_version
        };
        match indent {
            4 => {
                kernel_key = key.to_owned();
                if !value.trim().is_empty() {
                    kernel.fields.insert(key.to_owned(), unquote(value));
                }
            }
            8 if kernel_key == ".args" => {
                if starts_item {
                    kernel.args.push(BTreeMap::new());
                }
                if let Some(arg) = kernel.args.last_mut() {
                    arg.insert(key.to_owned(), unquote(value));
                }
            }
            _ => {}
        }
    }
    kernels
}

/// Compares one kernel of the reader with llvm-readelf's rendering of the same metadata.
fn assert_same_kernel(file: &str, ours: &KernelInfo, theirs: &NotesKernel) {
    let f = &theirs.fields;
    let ctx = format!("{file}: kernel {}", ours.name);
    let opt = |key: &str| f.get(key).cloned();
    assert_eq!(Some(ours.name.clone()), opt(".name"), "{ctx}");
    assert_eq!(Some(ours.symbol.clone()), opt(".symbol"), "{ctx}");
    let numbers: [(&str, Option<u32>); 13] = [
        (".kernarg_segment_size", Some(ours.kernarg_segment_size)),
        (".kernarg_segment_align", Some(ours.kernarg_segment_align)),
        (
            ".group_segment_fixed_size",
            Some(ours.group_segment_fixed_size),
        ),
        (
            ".private_segment_fixed_size",
            Some(ours.private_segment_fixed_size),
        ),
        (".sgpr_count", Some(ours.sgpr_count)),
        (".vgpr_count", Some(ours.vgpr_count)),
        (".agpr_count", ours.agpr_count),
        (".wavefront_size", Some(ours.wavefront_size)),
        (
            ".max_flat_workgroup_size",
            Some(ours.max_flat_workgroup_size),
        ),
        (".sgpr_spill_count", Some(ours.sgpr_spill_count)),
        (".vgpr_spill_count", Some(ours.vgpr_spill_count)),
        (
            ".uses_dynamic_stack",
            Some(u32::from(ours.uses_dynamic_stack)),
        ),
        ("args", Some(ours.args.len() as u32)),
    ];
    for (key, value) in numbers {
        let expected = match key {
            "args" => Some(theirs.args.len().to_string()),
            ".uses_dynamic_stack" => match opt(key).as_deref() {
                Some("true") => Some("1".into()),
                Some("false") | None => Some("0".into()),
                Some(other) => panic!("{ctx}: .uses_dynamic_stack {other}"),
            },
            // Absent spill counts read as 0.
            ".sgpr_spill_count" | ".vgpr_spill_count" => Some(opt(key).unwrap_or("0".into())),
            _ => opt(key),
        };
        assert_eq!(value.map(|v| v.to_string()), expected, "{ctx}: {key}");
    }
    for (i, (a, b)) in ours.args.iter().zip(&theirs.args).enumerate() {
        let ctx = format!("{ctx}: argument {i}");
        assert_eq!(
            Some(a.offset.to_string()),
            b.get(".offset").cloned(),
            "{ctx}"
        );
        assert_eq!(Some(a.size.to_string()), b.get(".size").cloned(), "{ctx}");
        assert_eq!(Some(&a.value_kind), b.get(".value_kind"), "{ctx}");
        assert_eq!(a.address_space.as_ref(), b.get(".address_space"), "{ctx}");
        assert_eq!(a.name.as_ref(), b.get(".name"), "{ctx}");
        assert_eq!(a.type_name.as_ref(), b.get(".type_name"), "{ctx}");
    }
}

fn assert_matches_readelf(file: &str, co: &CodeObject) {
    let theirs = readelf_kernels(co.elf());
    assert!(
        !theirs.is_empty(),
        "{file}: llvm-readelf printed no kernels"
    );
    assert_eq!(co.kernels().len(), theirs.len(), "{file}: kernel count");
    for theirs in &theirs {
        let name = theirs.fields.get(".name").expect(".name");
        let ours = co.kernel(name).unwrap();
        assert_same_kernel(file, ours, theirs);
    }
}

// ---- raw code objects ------------------------------------------------------------------------

#[test]
fn raw_code_objects_match_llvm_readelf_notes() {
    for (file, _, _) in RAW {
        let co =
            CodeObject::from_bytes(&read(file), None).unwrap_or_else(|e| panic!("{file}: {e}"));
        assert_eq!(co.container(), Container::Elf, "{file}");
        assert_matches_readelf(file, &co);
    }
}

#[test]
fn target_id_and_version_come_from_the_elf_header() {
    for (file, arch, version) in RAW {
        let co = CodeObject::from_bytes(&read(file), None).unwrap();
        assert_eq!(co.target_id(), &tid(arch), "{file}");
        assert_eq!(co.target_id().to_string(), *arch, "{file}");
        assert_eq!(co.code_object_version(), *version, "{file}");
    }
}

#[test]
fn every_kernel_of_the_source_is_listed() {
    for (file, _, _) in RAW.iter().filter(|(f, _, _)| f.starts_with("kernels-")) {
        let co = CodeObject::from_bytes(&read(file), None).unwrap();
        let mut names: Vec<&str> = co.kernels().iter().map(|k| k.name.as_str()).collect();
        names.sort_unstable();
        let mut expected = KERNELS.to_vec();
        expected.sort_unstable();
        assert_eq!(names, expected, "{file}");
        for k in co.kernels() {
            assert_eq!(k.symbol, format!("{}.kd", k.name), "{file}");
        }
    }
}

#[test]
fn the_raw_elf_is_returned_unchanged() {
    let bytes = read("kernels-gfx90a.hsaco");
    let co = CodeObject::from_bytes(&bytes, None).unwrap();
    assert_eq!(co.elf(), &bytes[..]);
    assert_eq!(co.bundle_entry(), None);
}

#[test]
fn mixed_argument_types_have_the_abi_layout() {
    // The layout the AMDGPU ABI gives `mixed(char, double, int2, float4, Params, float*,
    // const int*)`, Params being 16-byte aligned and 16 bytes long; llvm-readelf agrees (above).
    for file in [
        "kernels-gfx90a.hsaco",
        "kernels-gfx942.hsaco",
        "kernels-gfx1100.hsaco",
    ] {
        let co = CodeObject::from_bytes(&read(file), None).unwrap();
        let k = co.kernel("mixed").unwrap();
        let layout: Vec<(u32, u32, &str)> = k
            .args
            .iter()
            .take(7)
            .map(|a| (a.offset, a.size, a.value_kind.as_str()))
            .collect();
        assert_eq!(
            layout,
            [
                (0, 1, "by_value"),
                (8, 8, "by_value"),
                (16, 8, "by_value"),
                (32, 16, "by_value"),
                (48, 16, "by_value"),
                (64, 8, "global_buffer"),
                (72, 8, "global_buffer"),
            ],
            "{file}"
        );
        assert_eq!(k.args[5].address_space.as_deref(), Some("global"), "{file}");
    }
}

#[test]
fn static_lds_shows_in_the_group_segment_size() {
    let co = CodeObject::from_bytes(&read("kernels-gfx90a.hsaco"), None).unwrap();
    assert_eq!(
        co.kernel("block_sum").unwrap().group_segment_fixed_size,
        1024
    );
    assert_eq!(co.kernel("axpy_f32").unwrap().group_segment_fixed_size, 0);
}

#[test]
fn wavefront_size_is_64_on_cdna_and_32_on_rdna() {
    let cdna = CodeObject::from_bytes(&read("kernels-gfx942.hsaco"), None).unwrap();
    assert!(cdna.kernels().iter().all(|k| k.wavefront_size == 64));
    let rdna = CodeObject::from_bytes(&read("kernels-gfx1100.hsaco"), None).unwrap();
    assert!(rdna.kernels().iter().all(|k| k.wavefront_size == 32));
}

#[test]
fn a_raw_elf_for_a_compatible_target_is_accepted() {
    let bytes = read("kernels-gfx90a.hsaco");
    let co = CodeObject::from_bytes(&bytes, Some(&tid("gfx90a:sramecc+:xnack-"))).unwrap();
    assert_eq!(co.target_id(), &tid("gfx90a"));
}

#[test]
fn a_raw_elf_for_another_target_is_rejected() {
    let bytes = read("kernels-gfx942_sramecc+_xnack-.hsaco");
    let err = CodeObject::from_bytes(&bytes, Some(&tid("gfx942:sramecc-:xnack-"))).unwrap_err();
    assert!(
        matches!(err, CodeObjectError::TargetMismatch { .. }),
        "{err:?}"
    );
    assert_eq!(
        err.to_string(),
        "the code object is built for gfx942:sramecc+:xnack-, which does not run on gfx942:sramecc-:xnack-"
    );
    let err =
        CodeObject::from_bytes(&read("kernels-gfx90a.hsaco"), Some(&tid("gfx942"))).unwrap_err();
    assert!(
        matches!(err, CodeObjectError::TargetMismatch { .. }),
        "{err:?}"
    );
}

// ---- kernel lookup -------------------------------------------------------------------------

#[test]
fn a_kernel_without_extern_c_is_found_by_its_mangled_name() {
    let co = CodeObject::from_bytes(&read("kernels-gfx90a.hsaco"), None).unwrap();
    let k = co.kernel("_Z5scalePdd").unwrap();
    assert_eq!(k.symbol, "_Z5scalePdd.kd");
}

#[test]
fn looking_up_the_demangled_name_suggests_the_mangled_one() {
    let co = CodeObject::from_bytes(&read("kernels-gfx942.hsaco"), None).unwrap();
    for asked in ["scale", "scale(double*, double)"] {
        let err = co.kernel(asked).unwrap_err();
        match &err {
            CodeObjectError::KernelNotFound(missing) => {
                assert_eq!(missing.suggestions, ["_Z5scalePdd".to_owned()], "{asked}")
            }
            other => panic!("{asked}: {other:?}"),
        }
        assert!(
            err.to_string().contains("did you mean \"_Z5scalePdd\""),
            "{err}"
        );
    }
}

#[test]
fn an_unknown_kernel_name_lists_the_kernels() {
    let co = CodeObject::from_bytes(&read("single-gfx90a.hsaco"), None).unwrap();
    let err = co.kernel("add_two").unwrap_err();
    assert!(
        matches!(&err, CodeObjectError::KernelNotFound(m)
            if m.suggestions.is_empty() && m.available == ["add_one".to_owned()]),
        "{err:?}"
    );
    assert_eq!(
        err.to_string(),
        "no kernel named \"add_two\" in the code object; kernels: add_one"
    );
}

// ---- offload bundles -----------------------------------------------------------------------

#[test]
fn an_offload_bundle_entry_is_picked_by_target_compatibility() {
    let bytes = read("kernels-gfx90a-gfx1030.hipfb");
    // The bundle holds hipv4-...--gfx90a (xnack and sramecc any): a device with settings runs it.
    let co = CodeObject::from_bytes(&bytes, Some(&tid("gfx90a:sramecc+:xnack-"))).unwrap();
    assert_eq!(co.container(), Container::OffloadBundle);
    assert_eq!(co.bundle_entry(), Some("hipv4-amdgcn-amd-amdhsa--gfx90a"));
    assert_eq!(co.target_id(), &tid("gfx90a"));
    let co = CodeObject::from_bytes(&bytes, Some(&tid("gfx1030"))).unwrap();
    assert_eq!(co.target_id(), &tid("gfx1030"));
    assert_matches_readelf("kernels-gfx90a-gfx1030.hipfb (gfx1030)", &co);
}

#[test]
fn bundle_entries_match_llvm_readelf_notes() {
    for (file, arch) in [
        ("kernels-gfx90a-gfx1030.hipfb", "gfx90a"),
        ("kernels-gfx942-gfx1100.hipfb", "gfx942"),
        ("kernels-gfx942-gfx1100.hipfb", "gfx1100"),
        ("kernels-gfx942-gfx1100-v2.ccob", "gfx942"),
        ("kernels-gfx942-gfx1100-v3.ccob", "gfx1100"),
    ] {
        let co = CodeObject::from_bytes(&read(file), Some(&tid(arch))).unwrap();
        assert_eq!(co.target_id().processor(), arch, "{file}");
        assert_matches_readelf(&format!("{file} ({arch})"), &co);
    }
}

#[test]
fn a_bundle_with_several_targets_needs_a_target() {
    let err = CodeObject::from_bytes(&read("kernels-gfx90a-gfx1030.hipfb"), None).unwrap_err();
    assert!(
        matches!(&err, CodeObjectError::AmbiguousBundle { entries } if entries.len() == 2),
        "{err:?}"
    );
    assert!(err.to_string().contains("give a target ID"), "{err}");
}

#[test]
fn a_bundle_without_a_compatible_entry_lists_its_entries() {
    let err = CodeObject::from_bytes(&read("kernels-gfx90a-gfx1030.hipfb"), Some(&tid("gfx942")))
        .unwrap_err();
    assert!(
        matches!(err, CodeObjectError::NoMatchingEntry { .. }),
        "{err:?}"
    );
    assert_eq!(
        err.to_string(),
        "the offload bundle has no AMDGPU entry that runs on gfx942 (entries: \
         hipv4-amdgcn-amd-amdhsa--gfx1030, hipv4-amdgcn-amd-amdhsa--gfx90a)"
    );
}

#[test]
fn compressed_bundles_v2_and_v3_from_hipcc_7_are_read() {
    for (file, version) in [
        ("kernels-gfx942-gfx1100-v2.ccob", 2u8),
        ("kernels-gfx942-gfx1100-v3.ccob", 3),
    ] {
        let bytes = read(file);
        assert_eq!(&bytes[..6], &[b'C', b'C', b'O', b'B', version, 0], "{file}");
        let co = CodeObject::from_bytes(&bytes, Some(&tid("gfx942:sramecc+:xnack-"))).unwrap();
        assert_eq!(co.container(), Container::CompressedOffloadBundle, "{file}");
        assert_eq!(co.target_id(), &tid("gfx942"), "{file}");
        assert_eq!(co.code_object_version(), 6, "{file}");
    }
}

#[test]
fn a_compressed_bundle_holds_the_same_elf_as_the_uncompressed_one() {
    let plain =
        CodeObject::from_bytes(&read("kernels-gfx942-gfx1100.hipfb"), Some(&tid("gfx1100")))
            .unwrap();
    let packed = CodeObject::from_bytes(
        &read("kernels-gfx942-gfx1100-v3.ccob"),
        Some(&tid("gfx1100")),
    )
    .unwrap();
    assert_eq!(plain.kernels(), packed.kernels());
    assert_eq!(plain.target_id(), packed.target_id());
}

#[test]
fn bundle_entries_list_host_and_device_entries_in_file_order() {
    let entries =
        hipjit::code_object::bundle_entries(&read("kernels-gfx90a-gfx1030.hipfb")).unwrap();
    let ids: Vec<&str> = entries.iter().map(|e| e.id.as_str()).collect();
    assert_eq!(
        ids,
        [
            "host-x86_64-unknown-linux",
            "hipv4-amdgcn-amd-amdhsa--gfx1030",
            "hipv4-amdgcn-amd-amdhsa--gfx90a"
        ]
    );
    assert_eq!(entries[0].target_id, None);
    assert_eq!(entries[1].target_id, Some(tid("gfx1030")));
    let packed =
        hipjit::code_object::bundle_entries(&read("kernels-gfx942-gfx1100-v3.ccob")).unwrap();
    let targets: Vec<String> = packed
        .iter()
        .filter_map(|e| e.target_id.as_ref().map(|t| t.to_string()))
        .collect();
    assert_eq!(targets, ["gfx1100", "gfx942"]);
    assert!(
        hipjit::code_object::bundle_entries(&read("single-gfx90a.hsaco"))
            .unwrap()
            .is_empty()
    );
}

#[test]
fn a_generic_entry_serves_members_that_have_no_entry_of_their_own() {
    // hipcc 7.0.2 --offload-arch=gfx11-generic --offload-arch=gfx1100.
    let bytes = read("single-gfx11-generic-gfx1100.hipfb");
    let co = CodeObject::from_bytes(&bytes, Some(&tid("gfx1151"))).unwrap();
    assert_eq!(
        co.bundle_entry(),
        Some("hipv4-amdgcn-amd-amdhsa--gfx11-generic")
    );
    assert_eq!(co.target_id(), &tid("gfx11-generic"));
    // llvm-readelf-21 -h: "Flags: 0x1000054, gfx11-generic, generic_v1".
    assert_eq!(co.e_flags(), 0x0100_0054);
    assert_eq!(co.generic_version(), Some(1));
    assert_eq!(co.code_object_version(), 6);
    assert_matches_readelf("single-gfx11-generic-gfx1100.hipfb (gfx1151)", &co);
}

#[test]
fn a_processor_entry_is_preferred_to_its_generic_family() {
    let bytes = read("single-gfx11-generic-gfx1100.hipfb");
    let co = CodeObject::from_bytes(&bytes, Some(&tid("gfx1100"))).unwrap();
    assert_eq!(co.bundle_entry(), Some("hipv4-amdgcn-amd-amdhsa--gfx1100"));
    assert_eq!(co.generic_version(), None);
    let err = CodeObject::from_bytes(&bytes, Some(&tid("gfx1200"))).unwrap_err();
    assert!(
        matches!(err, CodeObjectError::NoMatchingEntry { .. }),
        "{err:?}"
    );
}

#[test]
fn template_and_namespaced_kernels_are_suggested_by_their_demangled_names() {
    let co = CodeObject::from_bytes(&read("kernels-gfx90a.hsaco"), None).unwrap();
    let cases = [
        ("fill", "_Z4fillIfEvPT_S0_i"),
        ("fill<float>", "_Z4fillIfEvPT_S0_i"),
        ("fill<float>(float*, float, int)", "_Z4fillIfEvPT_S0_i"),
        ("void fill<float>(float*, float, int)", "_Z4fillIfEvPT_S0_i"),
        ("ops::relu", "_ZN3ops4reluEPfi"),
        ("relu", "_ZN3ops4reluEPfi"),
        ("ops::relu(float*, int)", "_ZN3ops4reluEPfi"),
        ("relu(float*,int)", "_ZN3ops4reluEPfi"),
    ];
    for (asked, mangled) in cases {
        match co.kernel(asked) {
            Err(CodeObjectError::KernelNotFound(m)) => {
                assert_eq!(m.suggestions, [mangled.to_owned()], "{asked}")
            }
            other => panic!("{asked}: {other:?}"),
        }
    }
}

#[test]
fn a_name_that_only_ends_like_a_kernel_is_not_suggested() {
    let co = CodeObject::from_bytes(&read("kernels-gfx90a.hsaco"), None).unwrap();
    for asked in [
        "elu",
        "ill",
        "s::relu",
        "fill<double>",
        "scale(float*, float)",
    ] {
        match co.kernel(asked) {
            Err(CodeObjectError::KernelNotFound(m)) => {
                assert!(m.suggestions.is_empty(), "{asked}: {:?}", m.suggestions)
            }
            other => panic!("{asked}: {other:?}"),
        }
    }
}

/// `split_for_comparison`: a real code object's code and metadata note are found, and a byte
/// changed in the code shows in the code only.
#[test]
fn split_for_comparison_tells_code_metadata_and_rest_apart() {
    let elf = std::fs::read(crate::common::code_object("single-gfx90a.hsaco")).unwrap();
    let parts = hipjit::code_object::split_for_comparison(&elf).unwrap();
    assert!(!parts.text.is_empty() && !parts.metadata.is_empty());
    assert_eq!(parts.rest.len(), elf.len());
    let at = elf
        .windows(parts.text.len())
        .position(|w| w == &parts.text[..])
        .unwrap();
    let mut changed = elf.clone();
    changed[at] ^= 0xff;
    let other = hipjit::code_object::split_for_comparison(&changed).unwrap();
    assert_ne!(other.text, parts.text);
    assert_eq!(
        (&other.metadata, &other.rest),
        (&parts.metadata, &parts.rest)
    );
}
