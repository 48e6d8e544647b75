//! nvcc (no GPU needed) compiles HIP source through hipjit's prelude to cubins that hipjit's
//! cubin reader checks. nvcc comes from `HIPJIT_NVCC`, else the venv scripts/setup.sh makes
//! (`$HIPJIT_CI_CACHE/nvcc-venv`, PyPI nvidia-cuda-nvcc), else hipjit's discovery.

use crate::common;

use hipjit::cache::key::CacheKey;
use hipjit::code_object::cubin::{Cubin, CubinError};
use hipjit::cuda::target::SmTarget;

use common::toolchain::nvcc;

const HIP_SOURCE: &str = r#"
#include <hip/hip_runtime.h>
struct __align__(16) Pair { int a; double b; };
extern "C" __global__ void mixed(char c, double d, float4 f, Pair p, double* out) {
    out[hipThreadIdx_x] = c + d + f.x + p.a + p.b;
}
extern "C" __global__ void block_sum(const int* in, int* out, unsigned n) {
    HIP_DYNAMIC_SHARED(int, sdata)
    unsigned t = hipThreadIdx_x;
    sdata[t] = t < n ? in[hipBlockIdx_x * hipBlockDim_x + t] : 0;
    __syncthreads();
    if (t == 0) out[hipBlockIdx_x] = __shfl_xor(sdata[0], 1);
}
__global__ void __launch_bounds__(128) bounded(float* x) { x[hipThreadIdx_x] = 1.0f; }
__device__ float helper(float v) { return v * 2.0f; }
"#;

#[test]
fn hip_source_compiles_unchanged_through_the_prelude() {
    let bytes = nvcc()
        .compile(HIP_SOURCE, SmTarget::new(90), &[])
        .expect("nvcc compiles the HIP source");
    let cubin = Cubin::from_bytes(&bytes).expect("reads as a cubin");
    let mut names: Vec<&str> = cubin.kernels().iter().map(|k| k.name.as_str()).collect();
    names.sort();
    assert_eq!(names, ["_Z7boundedPf", "block_sum", "mixed"]);
}

#[test]
fn sm_target_read_from_e_flags() {
    let n = nvcc();
    for sm in [75, 80, 90] {
        let bytes = n
            .compile(HIP_SOURCE, SmTarget::new(sm), &[])
            .expect("compiles");
        assert_eq!(
            Cubin::from_bytes(&bytes).unwrap().target(),
            SmTarget::new(sm)
        );
    }
}

#[test]
fn arch_specific_target_reads_as_its_sm_number() {
    let bytes = nvcc()
        .compile(HIP_SOURCE, SmTarget::parse("sm_90a").unwrap(), &[])
        .expect("compiles");
    assert_eq!(
        Cubin::from_bytes(&bytes).unwrap().target().to_string(),
        "sm_90"
    );
}

#[test]
fn kernel_parameters_read_from_nv_info() {
    let bytes = nvcc().compile(HIP_SOURCE, SmTarget::new(90), &[]).unwrap();
    let cubin = Cubin::from_bytes(&bytes).unwrap();
    let mixed = cubin.kernel("mixed").unwrap();
    let layout: Vec<(u32, u32)> = mixed.args.iter().map(|a| (a.offset, a.size)).collect();
    // char at 0, double at 8, float4 at 16, the 16-byte-aligned struct at 32, a pointer at 48.
    assert_eq!(layout, [(0, 1), (8, 8), (16, 16), (32, 16), (48, 8)]);
    assert_eq!(mixed.kernarg_segment_size, 56);
    assert_eq!(cubin.kernel("block_sum").unwrap().args.len(), 3);
}

#[test]
fn launch_bounds_read_as_max_block_size() {
    let bytes = nvcc().compile(HIP_SOURCE, SmTarget::new(90), &[]).unwrap();
    let cubin = Cubin::from_bytes(&bytes).unwrap();
    assert_eq!(
        cubin
            .kernel("_Z7boundedPf")
            .unwrap()
            .max_flat_workgroup_size,
        128
    );
    assert_eq!(cubin.kernel("mixed").unwrap().max_flat_workgroup_size, 0);
}

#[test]
fn device_functions_are_not_kernels() {
    let bytes = nvcc().compile(HIP_SOURCE, SmTarget::new(90), &[]).unwrap();
    let err = Cubin::from_bytes(&bytes)
        .unwrap()
        .kernel("_Z6helperf")
        .unwrap_err();
    assert!(
        matches!(&err, CubinError::KernelNotFound { available, .. } if available.len() == 3),
        "{err}"
    );
}

#[test]
fn compile_error_names_the_command_and_nvcc_output() {
    let err = nvcc()
        .compile("__global__ void broken( {", SmTarget::new(90), &[])
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("-arch=sm_90") && err.contains("-cubin"),
        "{err}"
    );
    assert!(err.contains("error"), "{err}");
}

#[test]
fn cache_key_changes_with_source_target_and_flags() {
    let n = nvcc();
    let key = |source: &str, sm: u32, flags: &[String]| -> CacheKey {
        n.key(source, SmTarget::new(sm), flags)
    };
    let k = key("a", 90, &[]);
    assert_eq!(k.to_hex().len(), 64);
    assert_eq!(k, key("a", 90, &[]));
    assert_ne!(k, key("b", 90, &[]));
    assert_ne!(k, key("a", 80, &[]));
    assert_ne!(k, key("a", 90, &["-G".to_owned()]));
}

#[test]
fn amdgpu_code_object_is_refused_as_another_machine() {
    let co = std::fs::read(crate::common::code_object("kernels-gfx90a.hsaco"));
    let Ok(co) = co else {
        panic!("tests/data/code-objects/kernels-gfx90a.hsaco is missing");
    };
    assert_eq!(
        Cubin::from_bytes(&co).unwrap_err(),
        CubinError::Machine { found: 224 }
    );
}

/// Kernels using registers, a stack frame (a local array indexed at run time), static shared
/// memory, dynamic shared memory only (which gives every kernel of the cubin a 1 KiB
/// `.nv.shared` section on sm_90+), and none of them.
const RESOURCE_SOURCE: &str = r#"
extern "C" __global__ void plain(float* x) { x[threadIdx.x] += 1.0f; }
extern "C" __global__ void __launch_bounds__(256) heavy(float* out, const float* in, int n) {
    __shared__ float tile[1024];
    float acc[64];
    for (int i = 0; i < 64; ++i) acc[i] = in[(threadIdx.x * 64 + i) % n];
    tile[threadIdx.x] = acc[threadIdx.x % 64];
    __syncthreads();
    float s = 0;
    for (int i = 0; i < 64; ++i) s += acc[(i * 7 + n) % 64] * tile[(threadIdx.x + i) % 1024];
    out[blockIdx.x * blockDim.x + threadIdx.x] = s;
}
extern "C" __global__ void dynamic_only(float* out) {
    extern __shared__ float d[];
    d[threadIdx.x] = 1.0f;
    __syncthreads();
    out[threadIdx.x] = d[(threadIdx.x + 1) % 32];
}
extern "C" __global__ void small_tile(double* out) {
    __shared__ double t[40];
    t[threadIdx.x % 40] = threadIdx.x;
    __syncthreads();
    out[threadIdx.x] = t[(threadIdx.x + 1) % 40];
}
"#;

/// `ptxas -v`'s figures per kernel, as nvcc `--resource-usage` prints them: (registers,
/// stack frame bytes, smem bytes).
fn ptxas_report(stderr: &str) -> std::collections::HashMap<String, (u32, u32, u32)> {
    let number_before = |line: &str, unit: &str| -> Option<u32> {
        let end = line.find(unit)?;
        line[..end].split_whitespace().last()?.parse().ok()
    };
    let mut report = std::collections::HashMap::new();
    let mut current: Option<String> = None;
    for line in stderr.lines() {
        if let Some(rest) = line.split("Compiling entry function '").nth(1) {
            let name = rest.split('\'').next().unwrap().to_owned();
            report.insert(name.clone(), (0, 0, 0));
            current = Some(name);
        } else if let Some(name) = &current {
            let entry = report.get_mut(name).unwrap();
            if let Some(frame) = number_before(line, " bytes stack frame") {
                entry.1 = frame;
            }
            if let Some(regs) = number_before(line, " registers") {
                entry.0 = regs;
            }
            if let Some(smem) = number_before(line, " bytes smem") {
                entry.2 = smem;
            }
        }
    }
    report
}

#[test]
fn registers_stack_frame_and_static_shared_memory_match_what_ptxas_reports() {
    let nvcc = nvcc();
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("resources.cu");
    std::fs::write(&src, RESOURCE_SOURCE).unwrap();
    for sm in [75, 80, 90, 100] {
        let out = dir.path().join(format!("resources-{sm}.cubin"));
        let o = std::process::Command::new(nvcc.path())
            .arg("-cubin")
            .arg(format!("-arch=sm_{sm}"))
            .arg("--resource-usage")
            .arg("-o")
            .arg(&out)
            .arg(&src)
            .output()
            .unwrap();
        let stderr =
            String::from_utf8_lossy(&o.stderr).into_owned() + &String::from_utf8_lossy(&o.stdout);
        assert!(o.status.success(), "sm_{sm}: {stderr}");
        let report = ptxas_report(&stderr);
        assert_eq!(report.len(), 4, "sm_{sm}: {stderr}");
        let cubin = Cubin::from_bytes(&std::fs::read(&out).unwrap()).unwrap();
        for (name, &(regs, frame, smem)) in &report {
            let k = cubin.kernel(name).unwrap();
            assert!(regs > 0, "sm_{sm} {name}: {stderr}");
            assert_eq!(k.vgpr_count, regs, "sm_{sm} {name} registers: {stderr}");
            assert_eq!(
                k.private_segment_fixed_size, frame,
                "sm_{sm} {name} stack frame: {stderr}"
            );
            assert_eq!(
                k.group_segment_fixed_size, smem,
                "sm_{sm} {name} static shared memory: {stderr}"
            );
        }
        let heavy = report["heavy"];
        assert!(heavy.1 >= 256 && heavy.2 == 4096, "sm_{sm}: {heavy:?}");
        assert_eq!(report["small_tile"].2, 320, "sm_{sm}");
    }
}
