//! comgr (`libamd_comgr`), the code-object manager hipRTC compiles through: which processors it
//! compiles for, asked before hipRTC is handed a target.
//!
//! hipRTC aborts the whole process when asked for a processor its comgr does not know
//! (measured: hipRTC 5.2.3 with `gfx940`, `gfx942`, `gfx1100` or `gfx9999`, "munmap_chunk():
//! invalid pointer", SIGABRT; hipRTC 6.4.3 with `gfx9999`, "free(): invalid pointer"), and
//! likewise for a target feature its processor lacks (`gfx1100:xnack+`). comgr lists the
//! processors it knows (`amd_comgr_get_isa_count`, `amd_comgr_get_isa_name`: names such as
//! `amdgcn-amd-amdhsa--gfx90a`), and that list matches what each hipRTC compiled here: 5.2.3's
//! comgr 2 stops at gfx1036 with no gfx940-gfx942 or gfx11; 6.4.3's comgr 3 has gfx942,
//! gfx950, gfx1100-gfx1201 and the generic targets.
//!
//! hipRTC opens comgr itself at its first compile, with `dlopen` of the soname written in its
//! library (`libamd_comgr.so.2` in HIP 5.2.3's libamdhip64, `libamd_comgr.so.3` in 6.4.3's
//! libhiprtc). [`Comgr::for_hiprtc`] opens the same soname first (the dynamic loader then
//! hands hipRTC the object already loaded), so the list read is the list of the comgr that
//! compiles.

use std::ffi::{c_char, c_int, CStr, OsStr};
use std::path::{Path, PathBuf};

use crate::fs;
use crate::safe::runtime::loader;

type GetIsaCount = unsafe extern "C" fn(*mut usize) -> c_int;
type GetIsaName = unsafe extern "C" fn(usize, *mut *const c_char) -> c_int;

/// The prefix of every AMDGPU ISA name comgr lists.
const ISA_PREFIX: &str = "amdgcn-amd-amdhsa--";

/// A comgr library and the processors it compiles for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Comgr {
    /// The file loaded (the dynamic loader's record of it).
    pub path: PathBuf,
    /// The processors, in comgr's order (`gfx600` ... `gfx1201`, `gfx9-generic`...).
    pub processors: Vec<String>,
}

impl Comgr {
    /// The comgr that the hipRTC library at `hiprtc` compiles through, and its processors.
    ///
    /// Errors: a text saying what failed: the library names no `libamd_comgr.so.N`, no such
    /// library opens (beside `hiprtc`, or through the dynamic loader), it does not export
    /// `amd_comgr_get_isa_count` / `amd_comgr_get_isa_name`, or a call fails.
    pub fn for_hiprtc(hiprtc: &Path) -> Result<Comgr, String> {
        let bytes = fs::read::read_file(
            hiprtc,
            fs::read::CODE_OBJECT_LIMIT,
            "the hipRTC library",
            fs::read::Streams::None,
        )
        .map_err(|e| format!("cannot read {}: {}", hiprtc.display(), e.reason()))?;
        let soname = comgr_soname(&bytes)
            .ok_or_else(|| format!("{} names no libamd_comgr.so.N to load", hiprtc.display()))?;
        let mut tried = Vec::new();
        let beside = hiprtc.parent().map(|d| d.join(&soname));
        let candidates = [
            // Already loaded under that soname (by hipRTC, or by another user in the process).
            (OsStr::new(&soname).to_owned(), true),
            (OsStr::new(&soname).to_owned(), false),
        ];
        let mut handle = None;
        for (name, noload) in candidates {
            match loader::open(&name, noload) {
                Ok(h) => {
                    handle = Some(h);
                    break;
                }
                Err(why) => tried.push(why),
            }
            if !noload {
                if let Some(path) = beside.as_ref().filter(|p| crate::fs::observe::exists(p)) {
                    match loader::open(path.as_os_str(), false) {
                        Ok(h) => {
                            handle = Some(h);
                            break;
                        }
                        Err(why) => tried.push(why),
                    }
                }
            }
        }
        let handle = handle.ok_or_else(|| {
            format!(
                "cannot open {soname}, the comgr {} loads: {}",
                hiprtc.display(),
                tried.join("; ")
            )
        })?;
        let path = handle.file().unwrap_or_else(|| PathBuf::from(&soname));
        // SAFETY: the types are comgr's declarations (amd_comgr.h):
        // `amd_comgr_status_t amd_comgr_get_isa_count(size_t *count)` and
        // `amd_comgr_status_t amd_comgr_get_isa_name(size_t index, const char **isa_name)`,
        // the status an int enum.
        let (count_fn, name_fn) = unsafe {
            (
                handle.sym::<GetIsaCount>(c"amd_comgr_get_isa_count"),
                handle.sym::<GetIsaName>(c"amd_comgr_get_isa_name"),
            )
        };
        let (Some(count_fn), Some(name_fn)) = (count_fn, name_fn) else {
            return Err(format!(
                "{} does not export amd_comgr_get_isa_count and amd_comgr_get_isa_name",
                path.display()
            ));
        };
        let mut count = 0usize;
        // SAFETY: `count` is valid for one write.
        let rc = unsafe { count_fn(&mut count) };
        if rc != 0 {
            return Err(format!(
                "amd_comgr_get_isa_count of {} failed ({rc})",
                path.display()
            ));
        }
        let mut processors = Vec::with_capacity(count);
        for i in 0..count {
            let mut name: *const c_char = std::ptr::null();
            // SAFETY: `i` is below the count comgr gave; `name` is valid for one write.
            let rc = unsafe { name_fn(i, &mut name) };
            if rc != 0 || name.is_null() {
                return Err(format!(
                    "amd_comgr_get_isa_name({i}) of {} failed ({rc})",
                    path.display()
                ));
            }
            // SAFETY: non-null; comgr returns a NUL-terminated string it owns for its lifetime
            // (a static table), and the library is never unloaded.
            let isa = unsafe { CStr::from_ptr(name) }.to_string_lossy();
            if let Some(processor) = isa.strip_prefix(ISA_PREFIX) {
                processors.push(processor.to_owned());
            }
        }
        Ok(Comgr { path, processors })
    }

    /// Whether comgr compiles for `processor` (`gfx90a`; no features).
    pub fn knows(&self, processor: &str) -> bool {
        self.processors.iter().any(|p| p == processor)
    }
}

/// The first `libamd_comgr.so.<digits>` written in `bytes` (a library's read-only data).
fn comgr_soname(bytes: &[u8]) -> Option<String> {
    const NEEDLE: &[u8] = b"libamd_comgr.so.";
    let mut from = 0;
    while let Some(at) = find(&bytes[from..], NEEDLE) {
        let start = from + at;
        let digits = bytes[start + NEEDLE.len()..]
            .iter()
            .take_while(|b| b.is_ascii_digit())
            .count();
        if digits > 0 {
            let end = start + NEEDLE.len() + digits;
            return std::str::from_utf8(&bytes[start..end])
                .ok()
                .map(str::to_owned);
        }
        from = start + NEEDLE.len();
    }
    None
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

#[cfg(test)]
mod tests {
    use super::comgr_soname;

    #[test]
    fn the_soname_is_the_first_one_with_a_version() {
        assert_eq!(
            comgr_soname(b"\0libamd_comgr.so\0x libamd_comgr.so.3\0libamd_comgr.so.2\0"),
            Some("libamd_comgr.so.3".to_owned())
        );
        assert_eq!(comgr_soname(b"libamd_comgr.so.\0libamd_comgr.so"), None);
        assert_eq!(comgr_soname(b""), None);
    }
}
