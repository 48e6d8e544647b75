//! The compilers of one [`super::Jit`] and which one compiles a request.
//!
//! Each compiler is found on first use (a JIT for NVIDIA GPUs never looks for hipcc, and the
//! reverse), then kept for the life of the JIT, its identity remembered per user across
//! processes ([`crate::compiler::identity`]). A compiler that was not found is looked for
//! again on the next request.
//!
//! The choice is [`super::JitOptions::compiler`], else `HIPJIT_COMPILER`, else
//! [`CompilerChoice::Auto`]. An explicit choice must fit the platform of the options (hipcc or
//! hipRTC for AMDGPU target IDs, nvcc or NVRTC for an SM target), else the request fails
//! naming both. `Auto` applies [`crate::compiler::selection::auto`] with what is found for the
//! platform (the in-process compiler and its major.minor version, the process compiler, the target
//! and whether the source holds a NUL byte), and two rules of its own that follow from what the
//! parity test compared: it takes the in-process compiler only for one target (hipRTC
//! compiles one per program) without dumps, and on gfx10 and later only when the extra flags
//! pin the CU/WGP mode (`-mcumode` or `-mno-cumode`, as the parity test did: hipRTC and hipcc
//! default to different modes there), and on NVIDIA only for a source without an `#include`
//! NVRTC could not report ([`crate::compiler::nvrtc::untracked_include`]). Then what the
//! source needs (steps 4 and 5 of the rule): host code or a system header found by
//! [`crate::compiler::source_scan`], or a failure of the in-process compiler on this source and
//! options remembered before, sends it to the process compiler ([`super::auto_memo`]: decided
//! once per request and process); when the in-process compiler Auto took fails, the JIT
//! compiles the request again with the process compiler (`Compilers::fall_back`). The
//! reason of every choice goes with the result
//! ([`CompilerUsed::reason`]). A compiler set explicitly ([`CompilerConfig::hipcc`],
//! [`CompilerConfig::nvcc`], `HIPJIT_HIPCC`, `HIPJIT_NVCC`, `HIPJIT_HIPRTC_LIBRARY`,
//! `HIPJIT_NVRTC_LIBRARY`) that cannot be used (missing, not executable, a path refused, a
//! library that does not open or lacks an entry point) fails the request with an error naming
//! the setting and why: `Auto` never takes another compiler in its place.

use std::path::{Path, PathBuf};

use parking_lot::Mutex;

use super::auto_memo::AutoMemo;
use super::compiled::CompilerUsed;
use crate::compiler::backend::{HipRtcBackend, NvrtcBackend};
use crate::compiler::hiprtc::HipRtc;
use crate::compiler::library_search;
use crate::compiler::nvcc::Nvcc;
use crate::compiler::nvrtc::NvRtc;
use crate::compiler::rtc::RtcError;
use crate::compiler::selection::{self, CompilerChoice, RtcVersion, Side};
use crate::compiler::source_scan;
use crate::compiler::{
    Backend, CompileError, CompileOptions, CompilerConfig, CompilerError, CompilerKind,
    DiscoveryError,
};
use crate::fs;
use crate::fs::observe::Observed;
use crate::safe::runtime::Platform;

/// The compilers found so far.
pub(crate) struct Compilers {
    config: CompilerConfig,
    choice: CompilerChoice,
    /// Where the choice came from, in words.
    choice_from: &'static str,
    /// One per kind, in [`CompilerKind::ALL`]'s order.
    slots: Vec<Slot>,
    /// Auto's decisions per (source, options) and the failures remembered per user.
    memo: AutoMemo,
}

/// A compiler found, with what finding it saw of the filesystem
/// ([`crate::fs::observe`]) and of the process: a later request that uses it is recorded as if
/// it had found it itself, when the process is as it was then.
type Slot = Mutex<Option<(Backend, Found)>>;

/// What finding a compiler saw: the files, and the process context
/// ([`super::hit_memo::process_context`]) it was found in.
struct Found {
    observed: Observed,
    context: Option<[u8; 32]>,
}

impl Found {
    /// Ends `recording`, begun before the compiler was looked for with `runtime` in use in
    /// the process context `before` (read then): no context is kept (later requests using
    /// this compiler are not remembered) when it changed during the search.
    fn finish(
        recording: fs::observe::Recording,
        runtime: Option<&Path>,
        before: Option<[u8; 32]>,
    ) -> Found {
        let after = super::hit_memo::process_context(runtime);
        Found {
            observed: recording.finish(),
            context: before.filter(|b| after.as_ref() == Some(b)),
        }
    }

    /// Adds what finding the compiler saw to the request being recorded, if any; when the
    /// process's environment, working directory or runtime (`runtime`) changed since, the
    /// request would not find this compiler again: the recording is marked incomplete.
    fn replay(&self, runtime: Option<&Path>) {
        if !fs::observe::recording() {
            return;
        }
        match self.context {
            Some(c) if super::hit_memo::process_context(runtime) == Some(c) => {
                fs::observe::replay(&self.observed)
            }
            _ => fs::observe::unrecordable(),
        }
    }
}

impl std::fmt::Debug for Compilers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let path = |b: &Slot| b.lock().as_ref().map(|(b, _)| b.identity().path.clone());
        let mut d = f.debug_struct("Compilers");
        d.field("choice", &self.choice);
        for (kind, slot) in CompilerKind::ALL.iter().zip(&self.slots) {
            d.field(kind.as_str(), &path(slot));
        }
        d.finish()
    }
}

/// A compiler picked for a request, and why.
#[derive(Clone, Debug)]
pub struct Chosen {
    /// The compiler.
    pub backend: Backend,
    /// Why this one ([`CompilerUsed::reason`]).
    pub reason: String,
}

impl Chosen {
    /// What a result records about its compiler ([`CompilerUsed`]).
    pub fn used(&self) -> CompilerUsed {
        let id = self.backend.identity();
        CompilerUsed {
            kind: id.kind,
            path: id.path.clone(),
            version: id.version_summary(),
            reason: self.reason.clone(),
        }
    }
}

/// An in-process compiler's search as Auto takes it: its version and library, or why it
/// was not found, in words.
///
/// Errors: a library named by `HIPJIT_HIPRTC_LIBRARY` or `HIPJIT_NVRTC_LIBRARY` that cannot be
/// used ([`RtcError::Open`], [`RtcError::MissingSymbol`]: only a library named explicitly gives
/// these) is [`CompilerError::InProcess`]: Auto never replaces it.
fn explicit_rtc(
    probe: Result<(RtcVersion, PathBuf), RtcError>,
) -> Result<Result<(RtcVersion, PathBuf), String>, CompilerError> {
    match probe {
        Ok(found) => Ok(Ok(found)),
        Err(e @ (RtcError::Open { .. } | RtcError::MissingSymbol { .. })) => {
            Err(CompilerError::InProcess(Box::new(e)))
        }
        Err(e) => Ok(Err(e.to_string())),
    }
}

/// Why Auto does not take hipRTC 5.x found at `probe`'s library: the 5.x parity options link
/// hipcc's device libraries from beside it (the README's parity section), and without them
/// its code differs from `process_name`'s. `None` for another major version or when they are
/// there.
fn hip5_without_device_libraries(
    probe: &Result<(RtcVersion, PathBuf), String>,
    process_name: &str,
) -> Option<String> {
    let Ok((RtcVersion { major: 5, .. }, library)) = probe else {
        return None;
    };
    crate::compiler::hiprtc::hip5_device_library_dir(library)
        .is_none()
        .then(|| {
            format!(
                "{process_name}: no device libraries (amdgcn/bitcode) beside {}, which hipRTC \
                 5.x needs to give {process_name}'s code",
                library.display()
            )
        })
}

/// The compiler choice `JitOptions::compiler` gives, else `HIPJIT_COMPILER`, else Auto.
///
/// Errors: [`CompilerError::Choice`] for a `HIPJIT_COMPILER` that names no compiler.
pub(crate) fn resolve_choice(
    given: Option<CompilerChoice>,
) -> Result<(CompilerChoice, &'static str), CompilerError> {
    if let Some(c) = given {
        return Ok((
            c,
            "asked for by the caller (JitOptions::compiler, hipjit compile --compiler)",
        ));
    }
    match std::env::var(selection::COMPILER_ENV) {
        Ok(v) if !v.is_empty() => Ok((v.parse()?, "asked for by HIPJIT_COMPILER")),
        Ok(_) | Err(std::env::VarError::NotPresent) => Ok((CompilerChoice::Auto, "the default")),
        Err(std::env::VarError::NotUnicode(v)) => {
            Err(selection::BadCompilerChoice(v.to_string_lossy().into_owned()).into())
        }
    }
}

/// Finds `slot`'s compiler with `open` unless found before; `runtime`: the HIP runtime the
/// search looks beside (hipRTC), part of the context it is found in.
fn found<E>(
    slot: &Slot,
    runtime: Option<&Path>,
    open: impl FnOnce() -> Result<Backend, E>,
) -> Result<Backend, E> {
    let mut slot = slot.lock();
    if let Some((b, found)) = &*slot {
        found.replay(runtime);
        return Ok(b.clone());
    }
    let before = super::hit_memo::process_context(runtime);
    let recording = fs::observe::Recording::start();
    let b = open()?;
    *slot = Some((b.clone(), Found::finish(recording, runtime, before)));
    Ok(b)
}

impl Compilers {
    pub(crate) fn new(config: CompilerConfig, choice: (CompilerChoice, &'static str)) -> Compilers {
        Compilers {
            choice: choice.0,
            choice_from: choice.1,
            slots: CompilerKind::ALL.iter().map(|_| Mutex::new(None)).collect(),
            memo: AutoMemo::new(
                config
                    .identity_dir
                    .clone()
                    .or_else(crate::compiler::identity::identity_dir),
            ),
            config,
        }
    }

    /// The compilers' settings.
    pub(crate) fn config(&self) -> &CompilerConfig {
        &self.config
    }

    /// Where the choice came from, in words.
    pub(crate) fn choice_from(&self) -> &'static str {
        self.choice_from
    }

    /// The choice this JIT applies.
    pub(crate) fn choice(&self) -> CompilerChoice {
        self.choice
    }

    /// The slot of `kind`'s compiler.
    fn slot(&self, kind: CompilerKind) -> &Slot {
        let i = CompilerKind::ALL
            .iter()
            .position(|k| *k == kind)
            .expect("every kind is in CompilerKind::ALL");
        &self.slots[i]
    }

    /// `kind`'s compiler ([`Backend::open`]) unless found before; `runtime` is the HIP runtime
    /// in use, where hipRTC is looked for first.
    fn backend(
        &self,
        kind: CompilerKind,
        runtime: Option<&Path>,
    ) -> Result<Backend, CompilerError> {
        let runtime = runtime.filter(|_| kind.found_beside_runtime());
        found(self.slot(kind), runtime, || {
            Backend::open(kind, &self.config, runtime)
        })
    }

    /// The compiler for `source` and `options` (see the module documentation); `runtime` is the
    /// HIP runtime library in use, where hipRTC is looked for first.
    ///
    /// Errors: [`CompilerError`] when the chosen compiler cannot be found or identified, or
    /// [`CompilerError::NoCompiler`] when the choice does not fit the platform or nothing can
    /// compile the request.
    pub(crate) fn choose(
        &self,
        source: &[u8],
        options: &CompileOptions,
        runtime: Option<&Path>,
    ) -> Result<Chosen, CompilerError> {
        let platform = options.platform();
        let targets = options.target_names().join(", ");
        let mismatch = |asked: CompilerKind| CompilerError::NoCompiler {
            targets: targets.clone(),
            reason: format!(
                "{} was {}, and it compiles for {} targets only",
                asked.as_str(),
                self.choice_source(),
                match asked.platform() {
                    Platform::Amd => "AMDGPU",
                    Platform::Nvidia => "SM",
                }
            ),
        };
        let explicit = |b: Backend| Chosen {
            reason: format!("{} was {}", self.choice, self.choice_source()),
            backend: b,
        };
        match self.choice {
            CompilerChoice::Kind(k) if k.platform() == platform => {
                Ok(explicit(self.backend(k, runtime)?))
            }
            CompilerChoice::Kind(k) => Err(mismatch(k)),
            CompilerChoice::Auto => self.auto(source, options, runtime),
        }
    }

    fn choice_source(&self) -> &'static str {
        self.choice_from
    }

    /// [`CompilerChoice::Auto`] (see the module documentation).
    fn auto(
        &self,
        source: &[u8],
        options: &CompileOptions,
        runtime: Option<&Path>,
    ) -> Result<Chosen, CompilerError> {
        let nvidia = options.platform() == Platform::Nvidia;
        // Whether the process compiler is there: found, not yet run or fingerprinted (that is
        // done when it is taken). One set explicitly that cannot be used is an error, never a
        // reason to take another compiler.
        let process = self.process_probe(nvidia)?;
        let (process_kind, rtc_kind) = if nvidia {
            (CompilerKind::Nvcc, CompilerKind::Nvrtc)
        } else {
            (CompilerKind::Hipcc, CompilerKind::HipRtc)
        };
        let (process_name, rtc_name) = (process_kind.name(), rtc_kind.name());
        // The in-process compiler's major.minor version: remembered per user with where its
        // search ended, so that a hit loads no library (its identity, which hashes its files,
        // is only read when it is taken).
        let probe = explicit_rtc(self.in_process_probe(nvidia, runtime))?;
        let rtc = probe.as_ref().ok().map(|(version, _)| (rtc_name, *version));
        let processor = options
            .targets
            .first()
            .map(|t| t.processor().to_string())
            .or_else(|| options.sm_targets.first().map(|t| t.to_string()))
            .unwrap_or_default();
        let has_nul = source.contains(&0);
        let no_compiler = |reason: String| CompilerError::NoCompiler {
            targets: options.target_names().join(", "),
            reason,
        };
        let picked = selection::auto(
            rtc,
            process.as_ref().ok().map(|_| process_name),
            &processor,
            has_nul,
        )
        .map_err(|why| {
            let mut reason = why;
            if let Err(e) = &process {
                reason.push_str(&format!("; {process_name}: {e}"));
            }
            if let Err(e) = &probe {
                reason.push_str(&format!("; {rtc_name}: {e}"));
            }
            no_compiler(reason)
        })?;
        // The parity test compared one target per program, without dumps, with the CU/WGP mode
        // pinned on gfx10+: elsewhere the process compiler, when there is one.
        let unproven = if picked.side != Side::InProcess {
            None
        } else if options.targets.len() > 1 {
            Some(format!(
                "{process_name}: {} targets in one compile ({rtc_name} compiles one per program)",
                options.targets.len()
            ))
        } else if options.dump_llvm_ir || options.dump_isa {
            Some(format!(
                "{process_name}: dumps asked for ({rtc_name} writes none)"
            ))
        } else if let Some((directive, line)) = nvidia
            .then(|| crate::compiler::nvrtc::untracked_include(source))
            .flatten()
        {
            Some(format!(
                "{process_name}: `{directive}` (line {line}) can name a file outside the include \
                 directories, which NVRTC would read without reporting it ({process_name} lists \
                 what it reads)"
            ))
        } else if nvidia && options.opt_level != crate::compiler::OptLevel::O3 {
            Some(format!(
                "{process_name}: {} asked for (NVRTC has no optimisation levels)",
                options.opt_level.flag()
            ))
        } else if let (false, Some((_, RtcVersion { major: 5, .. })), Some(v)) =
            (nvidia, rtc, options.code_object_version.filter(|v| *v != 4))
        {
            Some(format!(
                "{process_name}: code object version {v} asked for (hipRTC 5.x writes version 4 \
                 whatever it is asked)"
            ))
        } else if let Some(why) = (!nvidia)
            .then(|| hip5_without_device_libraries(&probe, process_name))
            .flatten()
        {
            Some(why)
        } else if !nvidia
            && rtc.is_some_and(|(_, version)| version.major == 5)
            && !matches!(
                options.opt_level,
                crate::compiler::OptLevel::O2 | crate::compiler::OptLevel::O3
            )
        {
            Some(format!(
                "{process_name}: {} asked for (hipRTC 5.x generates code at -O3 whatever the \
                 level; its parity with {process_name} holds at -O2 and -O3)",
                options.opt_level.flag()
            ))
        } else if !nvidia
            && selection::family(&processor).is_some_and(|f| f != "gfx9")
            && !options
                .extra_flags
                .iter()
                .any(|f| f == "-mcumode" || f == "-mno-cumode")
        {
            Some(format!(
                "{process_name}: the CU/WGP mode is not pinned (-mcumode or -mno-cumode), and \
                 {rtc_name} and {process_name} default to different modes on {processor}"
            ))
        } else if let (Ok(()), Some((rtc, version))) = (&process, rtc) {
            // What the source needs (steps 4 and 5 of the rule), decided once per request
            // and process.
            let name = AutoMemo::name((rtc, version, process_name), source, options);
            self.memo.decision(
                name,
                || {
                    selection::source_needs_process(
                        source_scan::needs_process(source).as_ref(),
                        rtc,
                        process_name,
                    )
                },
                |error| selection::remembered(rtc, version, process_name, &error),
            )
        } else {
            None
        };
        let take_process = || self.backend(process_kind, None);
        match (unproven, process) {
            (Some(reason), Ok(())) => Ok(Chosen {
                backend: take_process()?,
                reason,
            }),
            (None, _) if picked.side == Side::InProcess => {
                let backend = self.backend(rtc_kind, runtime)?;
                Ok(Chosen {
                    backend,
                    reason: picked.reason,
                })
            }
            (_, Ok(())) => Ok(Chosen {
                backend: take_process()?,
                reason: picked.reason,
            }),
            (_, Err(e)) => Err(no_compiler(format!("{process_name}: {e}"))),
        }
    }

    /// Step 5 of Auto's rule at a failure: when Auto took the in-process compiler (`chosen`)
    /// for `source` and `options` and it failed with `error` (not a cancellation), and the
    /// process compiler is found, records the failure, per user too when it is the source's
    /// (the compile failed, or gave nothing to key or load), and returns `true`: compiled
    /// again, the request goes to the process compiler, with [`selection::retried`]'s reason.
    pub(crate) fn fall_back(
        &self,
        source: &[u8],
        options: &CompileOptions,
        chosen: &Chosen,
        error: &CompileError,
    ) -> bool {
        if self.choice != CompilerChoice::Auto || matches!(error, CompileError::Cancelled { .. }) {
            return false;
        }
        let (nvidia, rtc_name, process_name, version) = match &chosen.backend {
            Backend::HipRtc(h) => (false, "hipRTC", "hipcc", h.rtc_version()),
            Backend::Nvrtc(n) => (true, "NVRTC", "nvcc", n.rtc_version()),
            _ => return false,
        };
        if !matches!(self.process_probe(nvidia), Ok(Ok(()))) {
            return false;
        }
        let summary = first_error(error);
        let of_the_source =
            matches!(error, CompileError::InProcess(e) if failure_is_the_sources(e));
        let unread = source_scan::scan(source).other_header;
        let reason = selection::retried(rtc_name, version, process_name, &summary, unread.as_ref());
        tracing::info!(%reason, "Auto: the in-process compiler failed; compiling with the process compiler");
        let name = AutoMemo::name((rtc_name, version, process_name), source, options);
        self.memo
            .failed(name, reason, of_the_source.then_some(summary.as_str()));
        true
    }

    /// Whether the process compiler of the platform is found (its program, not run); the
    /// error of finding it otherwise (inner).
    ///
    /// Errors (outer): the compiler set explicitly ([`CompilerConfig::hipcc`], `HIPJIT_HIPCC`,
    /// [`CompilerConfig::nvcc`], `HIPJIT_NVCC`) cannot be used: Auto never replaces it.
    fn process_probe(&self, nvidia: bool) -> Result<Result<(), String>, CompilerError> {
        let slot = self.slot(if nvidia {
            CompilerKind::Nvcc
        } else {
            CompilerKind::Hipcc
        });
        if let Some((_, found)) = &*slot.lock() {
            found.replay(None);
            return Ok(Ok(()));
        }
        if nvidia {
            match Nvcc::find(self.config.nvcc.as_deref()) {
                Ok(_) => Ok(Ok(())),
                Err(e @ crate::compiler::nvcc::NvccError::ExplicitNotUsable { .. }) => {
                    Err(CompilerError::Nvcc(Box::new(e)))
                }
                Err(e) => Ok(Err(e.to_string())),
            }
        } else {
            match crate::compiler::discovery::find_hipcc(
                self.config.hipcc.as_deref(),
                &hip_sys::discovery::ProcessEnv,
                Path::new("/opt"),
            ) {
                Ok(_) => Ok(Ok(())),
                Err(e @ DiscoveryError::ExplicitNotUsable { .. }) => Err(e.into()),
                Err(e) => Ok(Err(e.to_string())),
            }
        }
    }

    /// The major.minor version of the in-process compiler of the platform (HIP's for hipRTC,
    /// CUDA's for NVRTC) and its library, from the backend when it was found before, else from the per-user memo of
    /// its search (the backend is then kept: nothing was loaded,
    /// [`crate::compiler::library_search`]), else from its library loaded now; the error of
    /// loading it otherwise.
    fn in_process_probe(
        &self,
        nvidia: bool,
        runtime: Option<&Path>,
    ) -> Result<(RtcVersion, PathBuf), RtcError> {
        let slot = self.slot(if nvidia {
            CompilerKind::Nvrtc
        } else {
            CompilerKind::HipRtc
        });
        let mut slot = slot.lock();
        if let Some((b, found)) = &*slot {
            found.replay(if nvidia { None } else { runtime });
            return Ok(match b {
                Backend::HipRtc(h) => (h.rtc_version(), h.library.path().to_path_buf()),
                Backend::Nvrtc(n) => (n.rtc_version(), n.library.path().to_path_buf()),
                _ => (
                    RtcVersion {
                        major: 0,
                        minor: None,
                    },
                    PathBuf::new(),
                ),
            });
        }
        let dir = self.config.identity_dir.as_deref();
        if nvidia {
            let before = super::hit_memo::process_context(None);
            let recording = fs::observe::Recording::start();
            let nvcc = crate::compiler::backend::nvcc_for_nvrtc(&self.config);
            let search = NvRtc::search(nvcc.as_deref());
            if let Some(b) = NvrtcBackend::recall(&search, dir) {
                let found = (b.rtc_version(), b.library.path().to_path_buf());
                *slot = Some((
                    Backend::Nvrtc(NvrtcBackend {
                        worker: self.config.rtc_worker.clone(),
                        ..b
                    }),
                    Found::finish(recording, None, before),
                ));
                return Ok(found);
            }
            drop(recording.finish());
            if let Some(l) = library_search::recall_location(&search, dir) {
                return Ok((version_of(&l), l.library));
            }
            crate::fs::observe::unrecordable();
            let library = NvRtc::open(nvcc.as_deref())?;
            let location = NvrtcBackend::location(&library);
            library_search::remember(&search, &location, dir);
            Ok((version_of(&location), location.library))
        } else {
            let before = super::hit_memo::process_context(runtime);
            let recording = fs::observe::Recording::start();
            let search = HipRtc::search(runtime);
            if let Some(b) = HipRtcBackend::recall(&search, dir) {
                let found = (b.rtc_version(), b.library.path().to_path_buf());
                *slot = Some((
                    Backend::HipRtc(HipRtcBackend {
                        worker: self.config.rtc_worker.clone(),
                        ..b
                    }),
                    Found::finish(recording, runtime, before),
                ));
                return Ok(found);
            }
            drop(recording.finish());
            if let Some(l) = library_search::recall_location(&search, dir) {
                return Ok((version_of(&l), l.library));
            }
            crate::fs::observe::unrecordable();
            let library = HipRtc::open(runtime)?;
            let location = HipRtcBackend::location(&library);
            library_search::remember(&search, &location, dir);
            Ok((version_of(&location), location.library))
        }
    }
}

/// The version of the in-process compiler a search ended at, as Auto's rule takes it.
fn version_of(location: &library_search::Location) -> RtcVersion {
    RtcVersion {
        major: location.major,
        minor: location.minor,
    }
}

/// How a compile failed, in a line: its first error (`error: redefinition of
/// 'integral_constant'`), else the first line of the error, at most 200 characters.
fn first_error(error: &CompileError) -> String {
    let line = match error {
        CompileError::InProcess(e) => match &**e {
            RtcError::Compile {
                diagnostics, log, ..
            } => diagnostics
                .iter()
                .find(|d| d.is_error())
                .map(|d| format!("error: {}", d.message))
                .or_else(|| {
                    log.lines()
                        .find(|l| !l.trim().is_empty())
                        .map(str::to_owned)
                }),
            _ => None,
        },
        _ => None,
    }
    .unwrap_or_else(|| {
        error
            .to_string()
            .lines()
            .next()
            .unwrap_or_default()
            .to_owned()
    });
    match line.char_indices().nth(200) {
        Some((at, _)) => format!("{}...", &line[..at]),
        None => line,
    }
}

/// Whether an in-process compiler's failure is the source's (the compile failed, or gave
/// nothing to key or load), which Auto remembers per user, or the machine's (a scratch
/// directory that could not be made, a library that could not be called), which it does not.
fn failure_is_the_sources(e: &RtcError) -> bool {
    matches!(
        e,
        RtcError::Compile { .. } | RtcError::NoDependencies { .. } | RtcError::EmptyOutput { .. }
    )
}

#[cfg(test)]
mod failure_tests {
    use super::*;

    #[test]
    fn a_scratch_directory_that_cannot_be_made_is_not_the_sources_failure() {
        // A full disk at 03:00 once left per-user records blaming sources for it.
        let scratch = RtcError::Scratch {
            compiler: "NVRTC",
            reason: "cannot make a scratch directory: No space left on device".into(),
        };
        assert!(!failure_is_the_sources(&scratch));
        let deps = RtcError::NoDependencies {
            compiler: "NVRTC",
            reason: "an #include that names a file outside the include directories".into(),
        };
        assert!(failure_is_the_sources(&deps));
    }
}
