//! The crate-wide error: [`Error`], the sum of every layer's errors, and [`Result`]. It sits at
//! the top of the layers (it names each of them); no layer below the JIT returns it. The safe
//! layer's errors ([`HipError`], [`LoadError`], [`LibraryError`], [`LaunchError`]...) are its
//! own (the crate's `safe/error.rs`) and are re-exported here, their public paths.

pub use crate::safe::error::*;

/// Any error hipjit returns, for callers who want one type: every module's error converts into
/// it (`From`), and [`std::error::Error::source`] / `Display` are those of the wrapped error.
///
/// ```no_run
/// fn first_device_target() -> hipjit::Result<String> {
///     let runtime = hipjit::runtime::Runtime::load()?; // LoadError
///     let device = runtime.device(0)?; // HipError
///     let wanted = hipjit::target_id::TargetId::parse("gfx90a")?; // TargetIdError
///     Ok(format!("{} (want {wanted})", device.arch_name()))
/// }
/// ```
///
/// A downstream crate's error type needs one variant for all of hipjit, and one line,
/// [`from_errors!`](crate::from_errors), for `?` to convert every hipjit error into it in one
/// step (`?` applies one `From`, and most hipjit functions return their module's error, not
/// [`Error`]); the type keeps its other `#[from]` variants:
///
/// ```
/// #[derive(Debug, thiserror::Error)]
/// enum SoftmaxError {
///     #[error(transparent)]
///     Gpu(#[from] hipjit::Error),
///     #[error(transparent)]
///     Io(#[from] std::io::Error),
///     #[error("rows of {0} elements are not supported")]
///     Shape(usize),
/// }
/// hipjit::from_errors!(SoftmaxError, SoftmaxError::Gpu);
///
/// fn prepare(device: &hipjit::device::Device, bytes: &[u8], cols: usize)
///     -> Result<hipjit::kernel::Kernel, SoftmaxError> {
///     if cols == 0 {
///         return Err(SoftmaxError::Shape(cols));
///     }
///     let library = hipjit::library::Library::load_bytes(device, bytes)?; // LibraryError
///     Ok(library.kernel("softmax")?)
/// }
/// fn parse(target: &str) -> Result<hipjit::target_id::TargetId, SoftmaxError> {
///     Ok(hipjit::target_id::TargetId::parse(target)?) // TargetIdError
/// }
/// let err = parse("sm_90").unwrap_err();
/// assert!(matches!(err, SoftmaxError::Gpu(hipjit::Error::TargetId(_))));
/// # let _ = prepare;
/// ```
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// Opening the HIP runtime or resolving its entry points ([`LoadError`]).
    #[error(transparent)]
    Load(#[from] LoadError),
    /// A HIP call that failed ([`HipError`]).
    #[error(transparent)]
    Hip(#[from] HipError),
    /// The library API missing from the runtime ([`LibraryApiError`]).
    #[error(transparent)]
    LibraryApi(#[from] LibraryApiError),
    /// Loading a code object or finding a kernel in it ([`LibraryError`]).
    #[error(transparent)]
    Library(Box<LibraryError>),
    /// A launch refused before or by the runtime ([`LaunchError`]).
    #[error(transparent)]
    Launch(Box<LaunchError>),
    /// Reading a code object ([`crate::code_object::CodeObjectError`]).
    #[error(transparent)]
    CodeObject(#[from] crate::code_object::CodeObjectError),
    /// Parsing a target ID ([`crate::target::TargetIdError`]).
    #[error(transparent)]
    TargetId(#[from] crate::target::TargetIdError),
    /// Compiling through the JIT and its caches ([`crate::jit::JitError`]).
    #[error(transparent)]
    Jit(Box<crate::jit::JitError>),
    /// Finding or identifying a compiler ([`crate::compiler::CompilerError`]).
    #[error(transparent)]
    Compiler(Box<crate::compiler::CompilerError>),
    /// A compile that failed ([`crate::compiler::CompileError`]).
    #[error(transparent)]
    Compile(Box<crate::compiler::CompileError>),
    /// Looking for hipcc ([`crate::compiler::DiscoveryError`]).
    #[error(transparent)]
    Discovery(Box<crate::compiler::DiscoveryError>),
    /// Invalid compile options (`OptionsError`).
    #[error(transparent)]
    Options(Box<crate::compiler::options::OptionsError>),
    /// The disk cache ([`crate::cache::CacheError`]).
    #[error(transparent)]
    Cache(Box<crate::cache::CacheError>),
    /// Reading a cubin ([`crate::code_object::cubin::CubinError`]).
    #[error(transparent)]
    Cubin(Box<crate::code_object::cubin::CubinError>),
    /// Compiling with nvcc (`NvccError`).
    #[error(transparent)]
    Nvcc(Box<crate::compiler::nvcc::NvccError>),
    /// Starting the testing runtime ([`crate::testing::TestingError`]; feature `testing`).
    #[cfg(feature = "testing")]
    #[error(transparent)]
    Testing(Box<crate::testing::TestingError>),
    /// Occupancy from metadata ([`crate::code_object::occupancy::OccupancyError`]).
    #[error(transparent)]
    Occupancy(#[from] crate::code_object::occupancy::OccupancyError),
    /// An in-process compiler, hipRTC or NVRTC (`RtcError`).
    #[error(transparent)]
    Rtc(Box<crate::compiler::rtc::RtcError>),
    /// Stream capture or a graph ([`crate::safe::graph::GraphError`]).
    #[error(transparent)]
    Graph(Box<crate::safe::graph::GraphError>),
    /// Parsing an SM architecture name ([`crate::target::SmTargetError`]).
    #[error(transparent)]
    SmTarget(#[from] crate::target::SmTargetError),
    /// A background compile, or a switch to its kernel ([`crate::jit::BackgroundError`]).
    #[error(transparent)]
    Background(Box<crate::jit::BackgroundError>),
    /// Freezing requests into a frozen bundle ([`crate::jit::FreezeError`]).
    #[error(transparent)]
    Freeze(Box<crate::jit::FreezeError>),
    /// Exporting or importing a cache bundle ([`crate::cache::bundle::BundleError`]).
    #[error(transparent)]
    Bundle(Box<crate::cache::bundle::BundleError>),
    /// A remote cache's configuration ([`crate::cache::remote::RemoteConfigError`]).
    #[error(transparent)]
    RemoteConfig(Box<crate::cache::remote::RemoteConfigError>),
}

/// One-hop conversions for a downstream error type: `from_errors!(MyError, MyError::Gpu)`
/// implements `From<E> for MyError` for every error type a hipjit function returns
/// ([`JitError`](crate::jit::JitError), [`LaunchError`], [`HipError`]...), each wrapped into
/// [`Error`] and then by the given function (a tuple variant taking [`Error`]). `?` then
/// converts any of them in one step, while the type keeps its own `#[from]` variants (an
/// `io::Error` beside `#[from] hipjit::Error`), which a blanket
/// `impl<E: Into<hipjit::Error>> From<E>` would forbid. [`Error`] itself is not among them:
/// derive it (`#[from] hipjit::Error`) or implement it.
///
/// ```
/// #[derive(Debug, thiserror::Error)]
/// enum SoftmaxError {
///     #[error(transparent)]
///     Gpu(#[from] hipjit::Error),
///     #[error("cannot read the kernel source: {0}")]
///     Io(#[from] std::io::Error),
/// }
/// hipjit::from_errors!(SoftmaxError, SoftmaxError::Gpu);
///
/// fn parse(target: &str) -> Result<hipjit::target_id::TargetId, SoftmaxError> {
///     Ok(hipjit::target_id::TargetId::parse(target)?) // TargetIdError, no map_err
/// }
/// fn source(path: &str) -> Result<String, SoftmaxError> {
///     Ok(std::fs::read_to_string(path)?) // io::Error
/// }
/// assert!(matches!(parse("sm_90"), Err(SoftmaxError::Gpu(hipjit::Error::TargetId(_)))));
/// assert!(matches!(source("/nonexistent/kernel.hip"), Err(SoftmaxError::Io(_))));
/// ```
#[cfg(feature = "testing")]
#[macro_export]
macro_rules! from_errors {
    ($target:ty, $wrap:expr $(,)?) => {
        $crate::__from_errors_each!($target, $wrap;
            $crate::error::LoadError,
            $crate::error::HipError,
            $crate::error::LibraryApiError,
            $crate::error::LibraryError,
            $crate::error::LaunchError,
            $crate::code_object::CodeObjectError,
            $crate::target_id::TargetIdError,
            $crate::jit::JitError,
            $crate::jit::CheckFailed,
            $crate::compiler::CompilerError,
            $crate::compiler::CompileError,
            $crate::compiler::DiscoveryError,
            $crate::compiler::OptionsError,
            $crate::cache::CacheError,
            $crate::code_object::cubin::CubinError,
            $crate::compiler::NvccError,
            $crate::cuda::CudaLoadError,
            $crate::code_object::occupancy::OccupancyError,
            $crate::compiler::RtcError,
            $crate::graph::GraphError,
            $crate::cuda::target::SmTargetError,
            $crate::jit::BackgroundError,
            $crate::jit::FreezeError,
            $crate::cache::FrozenError,
            $crate::cache::bundle::BundleError,
            $crate::cache::remote::RemoteConfigError,
            $crate::testing::TestingError
        );
    };
}

/// One-hop conversions for a downstream error type: `from_errors!(MyError, MyError::Gpu)`
/// implements `From<E> for MyError` for every error type a hipjit function returns
/// ([`JitError`](crate::jit::JitError), [`LaunchError`], [`HipError`]...), each wrapped into
/// [`Error`] and then by the given function (a tuple variant taking [`Error`]). `?` then
/// converts any of them in one step, while the type keeps its own `#[from]` variants (an
/// `io::Error` beside `#[from] hipjit::Error`), which a blanket
/// `impl<E: Into<hipjit::Error>> From<E>` would forbid. [`Error`] itself is not among them:
/// derive it (`#[from] hipjit::Error`) or implement it.
///
/// ```
/// #[derive(Debug, thiserror::Error)]
/// enum SoftmaxError {
///     #[error(transparent)]
///     Gpu(#[from] hipjit::Error),
///     #[error("cannot read the kernel source: {0}")]
///     Io(#[from] std::io::Error),
/// }
/// hipjit::from_errors!(SoftmaxError, SoftmaxError::Gpu);
///
/// fn parse(target: &str) -> Result<hipjit::target_id::TargetId, SoftmaxError> {
///     Ok(hipjit::target_id::TargetId::parse(target)?) // TargetIdError, no map_err
/// }
/// fn source(path: &str) -> Result<String, SoftmaxError> {
///     Ok(std::fs::read_to_string(path)?) // io::Error
/// }
/// assert!(matches!(parse("sm_90"), Err(SoftmaxError::Gpu(hipjit::Error::TargetId(_)))));
/// assert!(matches!(source("/nonexistent/kernel.hip"), Err(SoftmaxError::Io(_))));
/// ```
#[cfg(not(feature = "testing"))]
#[macro_export]
macro_rules! from_errors {
    ($target:ty, $wrap:expr $(,)?) => {
        $crate::__from_errors_each!($target, $wrap;
            $crate::error::LoadError,
            $crate::error::HipError,
            $crate::error::LibraryApiError,
            $crate::error::LibraryError,
            $crate::error::LaunchError,
            $crate::code_object::CodeObjectError,
            $crate::target_id::TargetIdError,
            $crate::jit::JitError,
            $crate::jit::CheckFailed,
            $crate::compiler::CompilerError,
            $crate::compiler::CompileError,
            $crate::compiler::DiscoveryError,
            $crate::compiler::OptionsError,
            $crate::cache::CacheError,
            $crate::code_object::cubin::CubinError,
            $crate::compiler::NvccError,
            $crate::cuda::CudaLoadError,
            $crate::code_object::occupancy::OccupancyError,
            $crate::compiler::RtcError,
            $crate::graph::GraphError,
            $crate::cuda::target::SmTargetError,
            $crate::jit::BackgroundError,
            $crate::jit::FreezeError,
            $crate::cache::FrozenError,
            $crate::cache::bundle::BundleError,
            $crate::cache::remote::RemoteConfigError
        );
    };
}

#[doc(hidden)]
#[macro_export]
macro_rules! __from_errors_each {
    ($target:ty, $wrap:expr; $($err:ty),* $(,)?) => {$(
        impl ::core::convert::From<$err> for $target {
            fn from(e: $err) -> $target {
                ($wrap)($crate::Error::from(e))
            }
        }
    )*};
}

/// `Result` with [`Error`] as its default error: inside a function returning it, `?` converts
/// every error hipjit returns.
pub type Result<T, E = Error> = std::result::Result<T, E>;

macro_rules! boxed_from {
    ($($ty:ty => $variant:ident),* $(,)?) => {$(
        impl From<$ty> for Error {
            fn from(e: $ty) -> Error {
                Error::$variant(Box::new(e))
            }
        }
    )*};
}

boxed_from! {
    crate::compiler::CompilerError => Compiler,
    crate::compiler::CompileError => Compile,
    crate::compiler::DiscoveryError => Discovery,
    crate::compiler::options::OptionsError => Options,
    crate::cache::CacheError => Cache,
    crate::code_object::cubin::CubinError => Cubin,
    crate::compiler::nvcc::NvccError => Nvcc,
    crate::compiler::rtc::RtcError => Rtc,
    crate::safe::graph::GraphError => Graph,
    crate::jit::BackgroundError => Background,
    crate::jit::FreezeError => Freeze,
    crate::cache::bundle::BundleError => Bundle,
    crate::cache::remote::RemoteConfigError => RemoteConfig,
}

#[cfg(feature = "testing")]
boxed_from! {
    crate::testing::TestingError => Testing,
}

impl From<crate::safe::cuda::driver::CudaLoadError> for Error {
    fn from(e: crate::safe::cuda::driver::CudaLoadError) -> Error {
        Error::Load(LoadError::from(e))
    }
}

impl From<crate::jit::CheckFailed> for Error {
    fn from(e: crate::jit::CheckFailed) -> Error {
        Error::Jit(Box::new(e.into()))
    }
}

impl From<LibraryError> for Error {
    fn from(e: LibraryError) -> Error {
        Error::Library(Box::new(e))
    }
}

impl From<LaunchError> for Error {
    fn from(e: LaunchError) -> Error {
        Error::Launch(Box::new(e))
    }
}

impl From<crate::cache::FrozenError> for Error {
    fn from(e: crate::cache::FrozenError) -> Error {
        Error::Jit(Box::new(e.into()))
    }
}

impl From<crate::jit::JitError> for Error {
    fn from(e: crate::jit::JitError) -> Error {
        Error::Jit(Box::new(e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_public_error_converts_into_error() {
        fn into_error<E: Into<Error> + std::error::Error>() {}
        into_error::<LoadError>();
        into_error::<HipError>();
        into_error::<LibraryApiError>();
        into_error::<LibraryError>();
        into_error::<LaunchError>();
        into_error::<crate::code_object::CodeObjectError>();
        into_error::<crate::code_object::cubin::CubinError>();
        into_error::<crate::target::TargetIdError>();
        into_error::<crate::jit::JitError>();
        into_error::<crate::jit::CheckFailed>();
        into_error::<crate::compiler::CompilerError>();
        into_error::<crate::compiler::CompileError>();
        into_error::<crate::compiler::DiscoveryError>();
        into_error::<crate::compiler::options::OptionsError>();
        into_error::<crate::compiler::nvcc::NvccError>();
        into_error::<crate::cache::CacheError>();
        into_error::<crate::safe::cuda::driver::CudaLoadError>();
        into_error::<crate::compiler::rtc::RtcError>();
        into_error::<crate::code_object::occupancy::OccupancyError>();
        into_error::<crate::safe::graph::GraphError>();
        into_error::<crate::target::SmTargetError>();
        into_error::<crate::jit::BackgroundError>();
        into_error::<crate::jit::FreezeError>();
        into_error::<crate::cache::FrozenError>();
        into_error::<crate::cache::bundle::BundleError>();
        into_error::<crate::cache::remote::RemoteConfigError>();
    }

    /// `from_errors!` gives a downstream type a one-step `From` of every error type that
    /// converts into [`Error`] (the list above), beside its own `#[from]` variants.
    #[test]
    fn from_errors_covers_every_public_error() {
        #[derive(Debug, thiserror::Error)]
        enum Downstream {
            #[error(transparent)]
            Gpu(#[from] Error),
            #[error(transparent)]
            Io(#[from] std::io::Error),
        }
        crate::from_errors!(Downstream, Downstream::Gpu);
        fn one_hop<E>()
        where
            Downstream: From<E>,
        {
        }
        one_hop::<Error>();
        one_hop::<std::io::Error>();
        one_hop::<LoadError>();
        one_hop::<HipError>();
        one_hop::<LibraryApiError>();
        one_hop::<LibraryError>();
        one_hop::<LaunchError>();
        one_hop::<crate::code_object::CodeObjectError>();
        one_hop::<crate::code_object::cubin::CubinError>();
        one_hop::<crate::target::TargetIdError>();
        one_hop::<crate::jit::JitError>();
        one_hop::<crate::jit::CheckFailed>();
        one_hop::<crate::compiler::CompilerError>();
        one_hop::<crate::compiler::CompileError>();
        one_hop::<crate::compiler::DiscoveryError>();
        one_hop::<crate::compiler::options::OptionsError>();
        one_hop::<crate::compiler::nvcc::NvccError>();
        one_hop::<crate::cache::CacheError>();
        one_hop::<crate::safe::cuda::driver::CudaLoadError>();
        one_hop::<crate::compiler::rtc::RtcError>();
        one_hop::<crate::code_object::occupancy::OccupancyError>();
        one_hop::<crate::safe::graph::GraphError>();
        one_hop::<crate::target::SmTargetError>();
        one_hop::<crate::jit::BackgroundError>();
        one_hop::<crate::jit::FreezeError>();
        one_hop::<crate::cache::FrozenError>();
        one_hop::<crate::cache::bundle::BundleError>();
        one_hop::<crate::cache::remote::RemoteConfigError>();
        #[cfg(feature = "testing")]
        one_hop::<crate::testing::TestingError>();
        let e: Downstream = crate::target::TargetId::parse("sm_90").unwrap_err().into();
        assert!(matches!(e, Downstream::Gpu(Error::TargetId(_))), "{e:?}");
    }

    /// `?` converts the capture/graph and SM-target errors inside a function returning
    /// [`Result`], keeping the variant and the message.
    #[test]
    fn graph_and_sm_target_errors_convert_with_question_mark() {
        fn graph() -> Result<()> {
            Err(crate::safe::graph::GraphError::Unsupported {
                symbol: "hipStreamBeginCapture",
            })?;
            Ok(())
        }
        fn sm() -> Result<crate::target::SmTarget> {
            Ok(crate::target::SmTarget::parse("gfx90a")?)
        }
        let e = graph().unwrap_err();
        assert!(matches!(&e, Error::Graph(g)
            if matches!(**g, crate::safe::graph::GraphError::Unsupported { .. })));
        assert_eq!(
            e.to_string(),
            "the HIP runtime does not export hipStreamBeginCapture (stream capture and graphs)"
        );
        let e = sm().unwrap_err();
        assert!(matches!(e, Error::SmTarget(_)));
        assert!(
            e.to_string()
                .starts_with("`gfx90a` is not an SM architecture"),
            "{e}"
        );
    }

    #[test]
    fn converted_error_keeps_the_message_and_the_variant() {
        let e = crate::target::TargetId::parse("sm_90").unwrap_err();
        let text = e.to_string();
        let converted: Error = e.into();
        assert!(matches!(converted, Error::TargetId(_)));
        assert_eq!(converted.to_string(), text);
    }
}
