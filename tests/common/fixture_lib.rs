//! The C fixtures of tests/fixtures built with `cc` into shared libraries (stand-ins for a HIP
//! runtime, hipRTC and the CUDA driver that cannot be had on a machine without the hardware),
//! and the fixture HIP runtime's record of calls.

use std::ffi::{c_char, CStr, CString};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// `cc -shared -fPIC -fvisibility=hidden -O1 -Wall <flags> -o <out> <sources>`, making `out`'s
/// directory first. The library is linked under a name of this process's beside `out` and
/// renamed over it: a fixture built once per process (a test binary, the children it runs) is
/// built again by the next process at the same path, and a reader of it (a copy, a `dlopen`)
/// sees the old file or the new one, never one half written. A `cc` that cannot run fails the
/// test naming `apt-get install gcc`; one that fails, with its stderr.
pub fn cc_shared(out: &Path, flags: &[&str], sources: &[&Path]) {
    cc_shared_or(out, flags, sources, "")
}

/// [`cc_shared`] whose failure names `hint` (a likely cause) too.
fn cc_shared_or(out: &Path, flags: &[&str], sources: &[&Path], hint: &str) {
    static BUILDS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    if let Some(dir) = out.parent() {
        std::fs::create_dir_all(dir).unwrap();
    }
    let mut linked = out.as_os_str().to_owned();
    linked.push(format!(
        ".{}-{}.tmp",
        std::process::id(),
        BUILDS.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    ));
    let linked = PathBuf::from(linked);
    let o = Command::new("cc")
        .args(["-shared", "-fPIC", "-fvisibility=hidden", "-O1", "-Wall"])
        .args(flags)
        .arg("-o")
        .arg(&linked)
        .args(sources)
        .output()
        .unwrap_or_else(|e| panic!("cannot run cc ({e}): apt-get install gcc"));
    assert!(
        o.status.success(),
        "cc failed for {}{hint}:\n{}",
        out.display(),
        String::from_utf8_lossy(&o.stderr)
    );
    std::fs::rename(&linked, out).unwrap_or_else(|e| {
        panic!(
            "cannot rename {} to {}: {e}",
            linked.display(),
            out.display()
        )
    });
}

/// The fixture HIP runtime (tests/fixtures/fake_hip.c with fake_hip_props.c, whose
/// `hipDeviceProp_t` layout is that of the HIP headers it finds) built at `out` for the AMD
/// platform, with `flags` (`-D` switches of fake_hip.c, `-I`, linker flags) added.
pub fn hip_runtime(out: &Path, flags: &[&str]) {
    let mut all = vec!["-D__HIP_PLATFORM_AMD__"];
    all.extend_from_slice(flags);
    cc_shared_or(
        out,
        &all,
        &[
            &crate::common::fixture("fake_hip.c"),
            &crate::common::fixture("fake_hip_props.c"),
        ],
        " (fake_hip_props.c needs HIP's headers: apt-get install libamdhip64-dev)",
    );
}

/// The fixture HIP runtime of a HIP 6.1+ shape: tests/fixtures/fake_hip.c with
/// fake_hip_proc_address.c (`hipGetProcAddress`) and fake_hip_props.c compiled twice, so that it
/// exports both device-properties layouts as HIP 6.x runtimes do: the unversioned
/// `hipGetDeviceProperties` with the 5.x layout (against the HIP 5.x headers of `hip5`, a
/// directory holding `hip/`; `None`: the system's `/usr/include`) and
/// `hipGetDevicePropertiesR0600` with the 6.0 layout (against `hip6`). Built at `out` for the
/// AMD platform with `flags` added to every compilation.
pub fn hip_runtime_both_layouts(out: &Path, flags: &[&str], hip5: Option<&Path>, hip6: &Path) {
    let dir = out.parent().expect("a file path");
    std::fs::create_dir_all(dir).unwrap();
    let props = crate::common::fixture("fake_hip_props.c");
    let mut objects = Vec::new();
    for (tag, include) in [("5", hip5), ("6", Some(hip6))] {
        let obj = dir.join(format!("props{tag}.o"));
        let mut c = Command::new("cc");
        c.args(["-c", "-fPIC", "-fvisibility=hidden", "-O1", "-Wall"])
            .arg("-D__HIP_PLATFORM_AMD__")
            .args(flags);
        if let Some(inc) = include {
            c.arg("-I").arg(inc);
        }
        let o = c
            .arg("-o")
            .arg(&obj)
            .arg(&props)
            .output()
            .unwrap_or_else(|e| panic!("cannot run cc ({e}): apt-get install gcc"));
        assert!(
            o.status.success(),
            "cc failed for {} (against HIP {tag}.x headers):\n{}",
            obj.display(),
            String::from_utf8_lossy(&o.stderr)
        );
        objects.push(obj);
    }
    let mut all = vec!["-D__HIP_PLATFORM_AMD__"];
    all.extend_from_slice(flags);
    let fake = crate::common::fixture("fake_hip.c");
    let proc_address = crate::common::fixture("fake_hip_proc_address.c");
    let mut sources: Vec<&Path> = vec![&fake, &proc_address];
    sources.extend(objects.iter().map(PathBuf::as_path));
    cc_shared(out, &all, &sources);
}

/// The fixture HIP runtime's record of calls (its exported `fixture_log`), one call per line;
/// the library at `lib` must be loaded already (by the `Runtime` under test).
pub fn log(lib: &Path) -> Vec<String> {
    let c = CString::new(lib.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: RTLD_NOLOAD only finds the library the runtime already loaded; never closed.
    let h = unsafe { libc::dlopen(c.as_ptr(), libc::RTLD_NOW | libc::RTLD_NOLOAD) };
    assert!(!h.is_null(), "fixture {} is not loaded", lib.display());
    // SAFETY: every fixture exports fixture_log.
    let f = unsafe { libc::dlsym(h, c"fixture_log".as_ptr()) };
    assert!(!f.is_null());
    // SAFETY: fixture_log is `const char *(void)`.
    let f: unsafe extern "C" fn() -> *const c_char = unsafe { std::mem::transmute(f) };
    // SAFETY: it returns a NUL-terminated static buffer.
    let text = unsafe { CStr::from_ptr(f()) }
        .to_string_lossy()
        .into_owned();
    text.lines().map(str::to_owned).collect()
}

/// The stand-in hipRTC of tests/fixtures/fake_hiprtc.c, built once a process: it aborts on a
/// source holding HIPJIT_ABORT and otherwise returns 4 bytes (`CODE`) that are not a code
/// object (its other triggers are in the C source).
pub fn fake_hiprtc() -> &'static Path {
    static F: OnceLock<PathBuf> = OnceLock::new();
    F.get_or_init(|| {
        let out = Path::new(env!("CARGO_TARGET_TMPDIR")).join("fake-hiprtc/libfakehiprtc.so");
        cc_shared(&out, &[], &[&crate::common::fixture("fake_hiprtc.c")]);
        out
    })
}

/// The fixture CUDA driver of tests/fixtures/fake_cuda.c (`libcuda.so.1`), built once a
/// process: CUDA 12.4, the five library-API symbols, one compute capability 9.0 device named
/// "Fixture GPU".
pub fn fake_cuda() -> &'static Path {
    static F: OnceLock<PathBuf> = OnceLock::new();
    F.get_or_init(|| {
        let out = Path::new(env!("CARGO_TARGET_TMPDIR")).join("fixture-cuda/libcuda.so.1");
        cc_shared(&out, &[], &[&crate::common::fixture("fake_cuda.c")]);
        out
    })
}
