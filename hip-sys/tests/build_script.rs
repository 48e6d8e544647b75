//! The build script's header search and probe, tested on their own (the modules of
//! `build/` are included here as they are).

#[allow(dead_code, unused_imports)]
#[path = "../build/find.rs"]
mod find;
#[allow(dead_code)]
#[path = "../build/probe.rs"]
mod probe;

use std::ffi::OsString;
use std::path::{Path, PathBuf};

/// A directory tree under the system temp dir, removed on drop.
struct Scratch(PathBuf);

impl Scratch {
    fn new(name: &str) -> Scratch {
        let dir = std::env::temp_dir().join(format!("hip-sys-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Scratch(dir)
    }

    /// Makes `<root>/include/hip/hip_runtime_api.h` (an empty file: the search only checks
    /// that it exists) and returns `<root>`.
    fn install(&self, root: &str) -> PathBuf {
        let root = self.0.join(root);
        std::fs::create_dir_all(root.join("include/hip")).unwrap();
        std::fs::write(root.join("include/hip/hip_runtime_api.h"), "").unwrap();
        root
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn env(vars: Vec<(&'static str, OsString)>) -> impl find::Env {
    move |name: &str| {
        vars.iter()
            .find(|(k, _)| *k == name)
            .map(|(_, v)| v.clone())
    }
}

fn found_dir(headers: find::Headers) -> PathBuf {
    match headers {
        find::Headers::Found(found) => found.dir,
        find::Headers::NotFound(tried) => panic!("nothing found; tried {tried:?}"),
    }
}

#[test]
fn hip_include_dir_without_headers_is_an_error_naming_it() {
    let scratch = Scratch::new("find-invalid");
    let e = env(vec![("HIP_INCLUDE_DIR", scratch.0.clone().into())]);
    let error = find::find_headers(&e, Path::new("/nonexistent-opt")).unwrap_err();
    assert!(error.contains(&scratch.0.display().to_string()), "{error}");
    assert!(error.contains("hip/hip_runtime_api.h"), "{error}");
}

#[test]
fn hip_include_dir_wins_over_hip_path() {
    let scratch = Scratch::new("find-explicit");
    let explicit = scratch.install("explicit");
    let hip_path = scratch.install("hip-path");
    let e = env(vec![
        ("HIP_INCLUDE_DIR", explicit.join("include").into()),
        ("HIP_PATH", hip_path.into()),
    ]);
    let dir = found_dir(find::find_headers(&e, Path::new("/nonexistent-opt")).unwrap());
    assert_eq!(dir, explicit.join("include"));
}

#[test]
fn hip_path_wins_over_rocm_path() {
    let scratch = Scratch::new("find-hip-path");
    let hip_path = scratch.install("hip-path");
    let rocm_path = scratch.install("rocm-path");
    let e = env(vec![
        ("HIP_PATH", hip_path.clone().into()),
        ("ROCM_PATH", rocm_path.into()),
    ]);
    let dir = found_dir(find::find_headers(&e, Path::new("/nonexistent-opt")).unwrap());
    assert_eq!(dir, hip_path.join("include"));
}

#[test]
fn root_without_headers_is_skipped_for_the_next_one() {
    let scratch = Scratch::new("find-skip");
    std::fs::create_dir_all(scratch.0.join("empty/include")).unwrap();
    let rocm_path = scratch.install("rocm-path");
    let e = env(vec![
        ("HIP_PATH", scratch.0.join("empty").into()),
        ("ROCM_PATH", rocm_path.clone().into()),
    ]);
    let dir = found_dir(find::find_headers(&e, Path::new("/nonexistent-opt")).unwrap());
    assert_eq!(dir, rocm_path.join("include"));
}

#[test]
fn newest_versioned_opt_rocm_wins_over_older() {
    let scratch = Scratch::new("find-opt");
    scratch.install("rocm-6.9.0");
    let newest = scratch.install("rocm-6.10.1");
    let e = env(vec![]);
    let dir = found_dir(find::find_headers(&e, &scratch.0).unwrap());
    assert_eq!(dir, newest.join("include"));
}

#[test]
fn not_found_lists_every_candidate_in_order() {
    let scratch = Scratch::new("find-none");
    std::fs::create_dir_all(scratch.0.join("hip-path")).unwrap();
    let e = env(vec![("HIP_PATH", scratch.0.join("hip-path").into())]);
    // `/usr` is always the last candidate; on a machine with HIP in /usr it is found instead
    // (scripts/header-matrix.sh runs this test with /usr/include/hip hidden, set `none`).
    let tried = match find::find_headers(&e, &scratch.0).unwrap() {
        find::Headers::NotFound(tried) => tried,
        find::Headers::Found(found) => {
            assert_eq!(found.dir, Path::new("/usr/include"), "{found:?}");
            return;
        }
    };
    let origins: Vec<&str> = tried.iter().map(|t| t.origin.as_str()).collect();
    let opt_rocm = scratch.0.join("rocm").display().to_string();
    let versioned = format!("{}/rocm-*", scratch.0.display());
    assert_eq!(
        origins,
        [
            "HIP_INCLUDE_DIR",
            "HIP_PATH",
            "ROCM_PATH",
            "Python packages (VIRTUAL_ENV, HIPJIT_PYTHON)",
            "hipconfig/hipcc on PATH",
            "/opt/rocm",
            versioned.as_str(),
            "/usr"
        ]
    );
    assert_eq!(
        tried[5].dir.as_deref(),
        Some(Path::new(&opt_rocm).join("include").as_path())
    );
}

#[test]
fn hip_version_reads_the_three_defines() {
    let scratch = Scratch::new("find-version");
    let root = scratch.install("set");
    std::fs::write(
        root.join("include/hip/hip_version.h"),
        "#define HIP_VERSION_MAJOR 7\n#define HIP_VERSION_MINOR 1\n#define HIP_VERSION_PATCH 25424\n",
    )
    .unwrap();
    assert_eq!(
        find::hip_version(&root.join("include")).as_deref(),
        Some("7.1.25424")
    );
}

#[test]
fn cfg_names_are_snake_case_without_the_hip_prefix() {
    let names: Vec<String> = [
        "hipLibraryEnumerateKernels",
        "hipKernelGetFunction",
        "hipGetDevicePropertiesR0600",
        "hipModuleOccupancyMaxActiveBlocksPerMultiprocessor",
    ]
    .iter()
    .map(|a| probe::cfg_name(a))
    .collect();
    assert_eq!(
        names,
        [
            "hip_api_library_enumerate_kernels",
            "hip_api_kernel_get_function",
            "hip_api_get_device_properties_r0600",
            "hip_api_module_occupancy_max_active_blocks_per_multiprocessor"
        ]
    );
}

#[cfg(feature = "bindgen")]
#[test]
fn probe_reads_declarations_and_skips_variadic_and_cxx_linkage_functions() {
    let bindings = r#"
        pub type hipError_t = ::std::os::raw::c_uint;
        pub type hipLibraryOption_e = ::std::os::raw::c_uint;
        pub use self::hipLibraryOption_e as hipLibraryOption;
        extern "C" {
            pub fn hipLibraryUnload(library: hipLibrary_t) -> hipError_t;
            pub fn hipPrintfLike(fmt: *const ::std::os::raw::c_char, ...) -> hipError_t;
            #[link_name = "\u{1}_Z22hipCreateSurfaceObjectv"]
            pub fn hipCreateSurfaceObject() -> hipError_t;
        }
    "#;
    let file = syn::parse_file(bindings).unwrap();
    let inventory = probe::Inventory::of(&file);
    assert!(inventory.declares_function("hipLibraryUnload"));
    assert!(!inventory.declares_function("hipPrintfLike"));
    assert!(!inventory.declares_function("hipCreateSurfaceObject"));
    assert!(inventory.types.contains("hipLibraryOption"));
    let pfn: String = inventory.pfn_source().split_whitespace().collect();
    assert!(
        pfn.contains(
            r#"pubtypehipLibraryUnload=unsafeextern"C"fn(library:hipLibrary_t)->hipError_t;"#
        ),
        "{pfn}"
    );
}

/// Without the feature `bindgen` the build script takes the committed probe of the pregenerated
/// bindings instead of reading them with syn: it must be what the probe reads from them.
/// `HIP_SYS_WRITE_PREGENERATED_PROBE=1` writes it instead (scripts/gen-pregenerated.sh).
#[cfg(feature = "bindgen")]
#[test]
fn the_committed_probe_of_the_pregenerated_bindings_is_what_the_probe_reads() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let bindings = std::fs::read_to_string(dir.join("pregenerated/hip_runtime_api.rs")).unwrap();
    let read = probe::Inventory::of(&syn::parse_file(&bindings).unwrap()).probed();
    let pfn_path = dir.join(probe::PREGENERATED_PFN);
    let list_path = dir.join(probe::PREGENERATED_PROBE);
    if std::env::var_os("HIP_SYS_WRITE_PREGENERATED_PROBE").is_some() {
        std::fs::write(&pfn_path, &read.pfn).unwrap();
        std::fs::write(&list_path, read.list()).unwrap();
    }
    let committed = probe::Probed::committed(
        std::fs::read_to_string(&pfn_path).unwrap(),
        &std::fs::read_to_string(&list_path).unwrap(),
    );
    assert_eq!(
        committed.declared,
        read.declared,
        "{} is stale: run scripts/gen-pregenerated.sh",
        list_path.display()
    );
    assert!(
        committed.pfn == read.pfn,
        "{} is stale: run scripts/gen-pregenerated.sh",
        pfn_path.display()
    );
    // The list is not empty: the HIP 7.1 set declares the library API's loaders.
    assert!(
        committed.declares("hipLibraryLoadData"),
        "{:?}",
        committed.declared
    );
}
