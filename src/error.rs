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
/// A downstream crate's error type needs one variant for all of hipjit. Its functions that call
/// hipjit return [`Result`] (`?` converts each module's error), and `?` turns that into the
/// crate's own error; or one generic `From` lets `?` convert any hipjit error directly:
///
/// ```
/// #[derive(Debug, thiserror::Error)]
/// enum SoftmaxError {
///     #[error(transparent)]
///     Gpu(#[from] hipjit::Error),
///     #[error("rows of {0} elements are not supported")]
///     Shape(usize),
/// }
///
/// fn load(device: &hipjit::device::Device, bytes: &[u8]) -> hipjit::Result<hipjit::kernel::Kernel> {
///     let library = hipjit::library::Library::load_bytes(device, bytes)?; // LibraryError
///     Ok(library.kernel("softmax")?)
/// }
///
/// fn prepare(device: &hipjit::device::Device, bytes: &[u8], cols: usize)
///     -> Result<hipjit::kernel::Kernel, SoftmaxError> {
///     if cols == 0 {
///         return Err(SoftmaxError::Shape(cols));
///     }
///     Ok(load(device, bytes)?) // hipjit::Error
/// }
///
/// // Without `#[from]` on the variant, `?` converts every hipjit error in one step:
/// #[derive(Debug)]
/// enum AppError {
///     Gpu(hipjit::Error),
/// }
/// impl<E: Into<hipjit::Error>> From<E> for AppError {
///     fn from(e: E) -> AppError {
///         AppError::Gpu(e.into())
///     }
/// }
/// fn parse(target: &str) -> Result<hipjit::target_id::TargetId, AppError> {
///     Ok(hipjit::target_id::TargetId::parse(target)?) // TargetIdError
/// }
/// let err = parse("sm_90").unwrap_err();
/// assert!(matches!(err, AppError::Gpu(hipjit::Error::TargetId(_))));
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
