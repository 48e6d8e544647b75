//! Occupancy from metadata against the compiler's own figure: LLVM prints `; Occupancy: N`
//! (waves per SIMD) for each kernel in its assembly output. Each test compiles kernels of rising
//! register pressure with the installed hipcc (`--save-temps` keeps the assembly beside the code
//! object), reads `.vgpr_count`/`.sgpr_count` from the code object with hipjit's reader, and
//! compares hipjit's waves per SIMD with LLVM's. The kernels use no LDS and declare
//! `__launch_bounds__(256)`, so registers and wave slots alone decide LLVM's figure.

use std::path::Path;
use std::process::Command;

use hipjit::code_object::CodeObject;
use hipjit::occupancy::occupancy;
use hipjit::target_id::TargetId;

/// `kN` keeps N floats live per thread.
fn source() -> String {
    let mut src = String::from("#include <hip/hip_runtime.h>\n");
    for n in [4, 24, 48, 96, 160] {
        src.push_str(&format!(
            r#"extern "C" __global__ void __launch_bounds__(256) k{n}(float* x) {{
    float acc[{n}];
    #pragma unroll
    for (int j = 0; j < {n}; j++) acc[j] = x[threadIdx.x + j * 256];
    #pragma unroll
    for (int k = 0; k < 8; k++)
    #pragma unroll
    for (int j = 0; j < {n}; j++) acc[j] = acc[j] * acc[(j + k + 1) % {n}] + 1.0f;
    float s = 0;
    #pragma unroll
    for (int j = 0; j < {n}; j++) s += acc[j];
    x[blockIdx.x * 256 + threadIdx.x] = s;
}}
"#
        ));
    }
    src
}

/// Compiles [`source`] for `arch`; returns the code object and LLVM's `; Occupancy:` per kernel.
fn compile(arch: &str) -> (CodeObject, Vec<(String, u32)>) {
    compile_with(arch, &[])
}

fn compile_with(arch: &str, flags: &[&str]) -> (CodeObject, Vec<(String, u32)>) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("k.hip"), source()).unwrap();
    let out = Command::new("/usr/bin/hipcc")
        .current_dir(dir.path())
        .args([
            "-x",
            "hip",
            "--genco",
            "-O3",
            "--no-gpu-bundle-output",
            "--save-temps",
        ])
        .arg(format!("--offload-arch={arch}"))
        .args(flags)
        .args(["-o", "k.co", "k.hip"])
        .output()
        .unwrap_or_else(|e| panic!("cannot run /usr/bin/hipcc ({e}): apt-get install hipcc"));
    assert!(
        out.status.success(),
        "hipcc failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let asm = std::fs::read_to_string(dir.path().join(format!("k-hip-amdgcn-amd-amdhsa-{arch}.s")))
        .unwrap();
    let co =
        CodeObject::from_bytes(&std::fs::read(dir.path().join("k.co")).unwrap(), None).unwrap();
    (co, llvm_occupancy(&asm))
}

/// `(kernel, waves)` from each `; Occupancy: N` line, in the order of the kernels' symbols.
fn llvm_occupancy(asm: &str) -> Vec<(String, u32)> {
    let mut current = None;
    let mut found = Vec::new();
    for line in asm.lines() {
        // A kernel's label: `k24:                                   ; @k24`.
        if let Some((label, _)) = line.split_once(':') {
            if label.starts_with('k') && !label.contains(' ') {
                current = Some(label.to_owned());
            }
        }
        if let Some(n) = line.trim().strip_prefix("; Occupancy: ") {
            found.push((current.clone().unwrap(), n.trim().parse().unwrap()));
        }
    }
    found
}

fn check(arch: &str) {
    assert!(
        Path::new("/usr/bin/hipcc").exists(),
        "/usr/bin/hipcc is missing: apt-get install hipcc"
    );
    let (co, llvm) = compile(arch);
    assert_eq!(llvm.len(), 5, "{llvm:?}");
    let target = TargetId::parse(arch).unwrap();
    let mut distinct = std::collections::BTreeSet::new();
    for (name, waves) in &llvm {
        let info = co.kernel(name).unwrap();
        let ours = occupancy(info, &target, 256, 0).unwrap();
        assert_eq!(
            ours.waves_per_simd, *waves,
            "{arch} {name}: .vgpr_count {} .sgpr_count {} wave{}",
            info.vgpr_count, info.sgpr_count, info.wavefront_size
        );
        distinct.insert(*waves);
    }
    // The kernels span several register-limited occupancies, not one value.
    assert!(distinct.len() >= 3, "{arch}: {llvm:?}");
}

#[test]
fn gfx90a_waves_per_simd_match_llvm() {
    check("gfx90a");
}

#[test]
fn gfx908_waves_per_simd_match_llvm() {
    check("gfx908");
}

#[test]
fn gfx940_waves_per_simd_match_llvm() {
    check("gfx940");
}

#[test]
fn gfx1030_wave32_waves_per_simd_match_llvm() {
    check("gfx1030");
}

#[test]
fn gfx1030_cu_mode_from_the_kernel_descriptor_halves_blocks_per_compute_unit() {
    // The lightest kernel (k4): 16 waves per SIMD32 either way (LLVM's figure). hipcc compiles
    // for WGP mode by default: 4 SIMDs x 16 = 64 waves per WGP; blocks of 256 threads are 8
    // waves: 8 blocks. With -mcumode the descriptor's WGP_MODE bit is clear: 2 SIMDs x 16 = 32
    // waves per CU: 4 blocks.
    let (wgp, llvm) = compile("gfx1030");
    let (cu, llvm_cu) = compile_with("gfx1030", &["-mcumode"]);
    assert_eq!(llvm[0], ("k4".to_string(), 16));
    assert_eq!(llvm_cu[0], ("k4".to_string(), 16));
    assert!(wgp.kernel_descriptor("k4").unwrap().wgp_mode());
    assert!(!cu.kernel_descriptor("k4").unwrap().wgp_mode());
    let a = hipjit::occupancy::occupancy_of(&wgp, "k4", 256, 0).unwrap();
    let b = hipjit::occupancy::occupancy_of(&cu, "k4", 256, 0).unwrap();
    assert_eq!((a.waves_per_simd, a.blocks_per_cu), (16, 8));
    assert_eq!((b.waves_per_simd, b.blocks_per_cu), (16, 4));
    let err = hipjit::occupancy::occupancy_of(&cu, "nope", 256, 0).unwrap_err();
    assert!(err.to_string().contains("nope"), "{err}");
}
