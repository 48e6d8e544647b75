//! A runtime compiler called directly, without hipjit: the library hipjit uses, opened with
//! `dlopen`, and the program hipjit hands it (`hipjit::compiler::RtcProgram`) created,
//! compiled, read and destroyed, as a caller of hipRTC or NVRTC would. The raw side of the
//! cold-compile benchmarks (`benches/compilers.rs`, `examples/nvidia_compilers.rs`).

use std::ffi::{c_char, c_int, c_void, CString};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

type Program = *mut c_void;
type Create = unsafe extern "C" fn(
    *mut Program,
    *const c_char,
    *const c_char,
    c_int,
    *const *const c_char,
    *const *const c_char,
) -> c_int;
type CompileProgram = unsafe extern "C" fn(Program, c_int, *const *const c_char) -> c_int;
type GetSize = unsafe extern "C" fn(Program, *mut usize) -> c_int;
type GetBytes = unsafe extern "C" fn(Program, *mut c_char) -> c_int;
type Destroy = unsafe extern "C" fn(*mut Program) -> c_int;

/// hipRTC's or NVRTC's entry points, by prefix (`hiprtc`, `nvrtc`).
pub struct RawRtc {
    create: Create,
    compile: CompileProgram,
    log_size: GetSize,
    log: GetBytes,
    code_size: GetSize,
    code: GetBytes,
    destroy: Destroy,
}

fn sym<T: Copy>(handle: *mut c_void, name: &str) -> T {
    let c = CString::new(name).unwrap();
    // SAFETY: `handle` is a live dlopen handle; the name is NUL-terminated.
    let p = unsafe { libc::dlsym(handle, c.as_ptr()) };
    assert!(!p.is_null(), "{name} not found");
    assert_eq!(std::mem::size_of::<T>(), std::mem::size_of::<*mut c_void>());
    // SAFETY: T is the function pointer type of the named C function (hiprtc.h, nvrtc.h).
    unsafe { std::mem::transmute_copy(&p) }
}

impl RawRtc {
    /// Opens `library` (never closed) and resolves hipRTC's entry points (`nvrtc: false`) or
    /// NVRTC's (`nvrtc: true`; the output is the cubin).
    pub fn open(library: &Path, nvrtc: bool) -> RawRtc {
        let c = CString::new(library.as_os_str().as_bytes()).unwrap();
        // SAFETY: a NUL-terminated path; the handle is never closed.
        let handle = unsafe { libc::dlopen(c.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL) };
        assert!(!handle.is_null(), "dlopen {}", library.display());
        let p = if nvrtc { "nvrtc" } else { "hiprtc" };
        let (size, code) = if nvrtc {
            ("nvrtcGetCUBINSize", "nvrtcGetCUBIN")
        } else {
            ("hiprtcGetCodeSize", "hiprtcGetCode")
        };
        RawRtc {
            create: sym(handle, &format!("{p}CreateProgram")),
            compile: sym(handle, &format!("{p}CompileProgram")),
            log_size: sym(handle, &format!("{p}GetProgramLogSize")),
            log: sym(handle, &format!("{p}GetProgramLog")),
            code_size: sym(handle, size),
            code: sym(handle, code),
            destroy: sym(handle, &format!("{p}DestroyProgram")),
        }
    }

    /// Creates, compiles, reads and destroys one program: the code, or the log of a compile
    /// that failed.
    pub fn compile(
        &self,
        source: &[u8],
        name: &str,
        headers: &[(String, Vec<u8>)],
        options: &[String],
    ) -> Result<Vec<u8>, String> {
        let c = |b: &[u8]| CString::new(b).expect("no NUL byte");
        let src = c(source);
        let name = c(name.as_bytes());
        let names: Vec<CString> = headers.iter().map(|h| c(h.0.as_bytes())).collect();
        let bodies: Vec<CString> = headers.iter().map(|h| c(&h.1)).collect();
        let opts: Vec<CString> = options.iter().map(|o| c(o.as_bytes())).collect();
        let names_p: Vec<*const c_char> = names.iter().map(|s| s.as_ptr()).collect();
        let bodies_p: Vec<*const c_char> = bodies.iter().map(|s| s.as_ptr()).collect();
        let opts_p: Vec<*const c_char> = opts.iter().map(|s| s.as_ptr()).collect();
        let mut prog: Program = std::ptr::null_mut();
        // SAFETY: every pointer is a live NUL-terminated string; the arrays hold as many
        // entries as passed.
        unsafe {
            let rc = (self.create)(
                &mut prog,
                src.as_ptr(),
                name.as_ptr(),
                bodies_p.len() as c_int,
                bodies_p.as_ptr(),
                names_p.as_ptr(),
            );
            if rc != 0 {
                return Err(format!("CreateProgram: {rc}"));
            }
            let rc = (self.compile)(prog, opts_p.len() as c_int, opts_p.as_ptr());
            let result = if rc != 0 {
                let mut n = 0usize;
                (self.log_size)(prog, &mut n);
                let mut log = vec![0u8; n];
                (self.log)(prog, log.as_mut_ptr().cast());
                Err(format!(
                    "CompileProgram: {rc}: {}",
                    String::from_utf8_lossy(&log)
                ))
            } else {
                let mut n = 0usize;
                (self.code_size)(prog, &mut n);
                let mut code = vec![0u8; n];
                (self.code)(prog, code.as_mut_ptr().cast());
                Ok(code)
            };
            (self.destroy)(&mut prog);
            result
        }
    }
}
