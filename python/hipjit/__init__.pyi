"""Type stubs of hipjit (the extension module hipjit._hipjit, re-exported here)."""

import os
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple, Union

__version__: str

_Dims = Union[int, Tuple[int], Tuple[int, int], Tuple[int, int, int]]
_Defines = Union[Mapping[str, Union[str, int, float, bool, None]], Sequence[str]]
_Path = Union[str, "os.PathLike[str]"]

class HipjitError(Exception):
    """A failure of hipjit: the cache, a runtime call, a code object that does not read."""

class CompileError(HipjitError):
    """The compiler refused the source or could not run. A caller's bad argument (a keyword
    of the wrong type or value, a flag or define refused before any compiler ran) is a
    TypeError or ValueError instead, naming the argument."""

    diagnostics: List[Dict[str, Any]]
    """Parsed warnings and errors: severity, file, line, column, message, notes,
    included_from, excerpt."""
    log: str
    """The compiler's whole standard error (hipcc, nvcc) or program log (hipRTC, NVRTC)."""
    command: List[str]
    """The compiler's command line (empty for the in-process compilers)."""

class LoadError(HipjitError):
    """The GPU runtime could not be opened or a code object could not be loaded (among
    others: a load refused because the current stream is capturing)."""

class LaunchError(HipjitError):
    """A launch the runtime refused, or a launch kind the runtime or device cannot do
    (cooperative launches). Arguments that do not match the kernel, and a grid, block or
    shared_mem outside the device's or the kernel's limits, are TypeError/ValueError."""

class ArgInfo:
    """One explicit kernel argument."""

    index: int
    name: Optional[str]
    ctype: Optional[str]
    kind: str
    """"pointer", "value" or "unknown"."""
    offset: int
    size: int
    value_kind: str
    address_space: Optional[str]
    access: Optional[str]

class KernelInfo:
    """A kernel of a code object: arguments and resources (sizes in bytes).

    A resource the code object does not record is None, never 0: a cubin records registers
    per thread (vgpr_count), __shared__ bytes (lds_bytes) and the stack frame (scratch_bytes),
    but no SGPR or spill figures, and a block size only under __launch_bounds__."""

    name: str
    args: List[ArgInfo]
    kernarg_size: int
    lds_bytes: Optional[int]
    scratch_bytes: Optional[int]
    sgpr_count: Optional[int]
    vgpr_count: Optional[int]
    agpr_count: Optional[int]
    sgpr_spill_count: Optional[int]
    vgpr_spill_count: Optional[int]
    wavefront_size: int
    max_threads_per_block: Optional[int]
    uses_dynamic_stack: bool

class Compiled:
    """The result of a compile."""

    @property
    def key(self) -> str: ...
    @property
    def origin(self) -> str:
        """"memory", "disk", "remote" or "compiler"."""
    @property
    def is_hit(self) -> bool: ...
    @property
    def compiler(self) -> str: ...
    @property
    def compiler_reason(self) -> str: ...
    @property
    def kernels(self) -> List[KernelInfo]: ...
    @property
    def targets(self) -> List[str]: ...
    @property
    def code_object(self) -> bytes: ...
    @property
    def code_objects(self) -> List[bytes]: ...
    @property
    def code_object_version(self) -> Optional[int]:
        """None for a cubin."""
    @property
    def elapsed(self) -> float:
        """Seconds."""
    @property
    def diagnostics(self) -> List[Dict[str, Any]]: ...
    @property
    def command(self) -> List[str]: ...
    @property
    def log(self) -> str: ...
    @property
    def cache_warnings(self) -> List[str]: ...
    @property
    def entry_path(self) -> Optional[str]: ...
    def kernel(self, name: str) -> KernelInfo: ...

class Inspected:
    """What inspect() read."""

    container: str
    """"elf", "offload_bundle", "compressed_offload_bundle" or "cubin"."""
    target: str
    code_object_version: Optional[int]
    """4, 5 or 6; None for a cubin."""
    kernels: List[KernelInfo]
    entries: List[str]

class Kernel:
    """A kernel loaded on a device; call it to launch."""

    def __call__(
        self,
        grid: _Dims,
        block: _Dims,
        *args: Any,
        shared_mem: int = 0,
        stream: Any = None,
    ) -> None:
        """Launches; `stream` is None, an int handle (passed as it is: a live stream of the
        kernel's device is the caller's responsibility; ints that cannot be a handle raise
        ValueError), a torch.cuda.Stream or a CuPy stream. Raises TypeError/ValueError for
        arguments, grid, block or shared_mem the kernel or device refuse, LaunchError when
        the runtime refuses the launch.

        A pointer argument takes a torch.Tensor, a cupy.ndarray, an object with
        __cuda_array_interface__ or __dlpack__, a DLPack capsule, None (a null pointer), or
        an int: a raw device address, passed as it is and unchecked (`tensor.data_ptr()`,
        `array.data.ptr`). An array is checked against the parameter's C type in the source:
        its element type must fit the pointee (a float32 array for `float*`, 4-byte integers
        of either sign for `int*`/`unsigned*`, float32 for `float4*`; `void*` and types hipjit
        does not know take any; TypeError otherwise), it must be C-contiguous (ValueError),
        and it must not be read-only when the kernel may write through the pointer (a pointee
        that is not const, or a parameter whose type was not read; ValueError). Each error
        names the argument, the array's element type, strides or flag, and what was
        expected."""
    @property
    def name(self) -> str: ...
    @property
    def args(self) -> List[ArgInfo]: ...
    @property
    def info(self) -> KernelInfo: ...
    @property
    def device(self) -> int: ...
    @property
    def key(self) -> str: ...
    @property
    def target(self) -> str: ...
    @property
    def max_threads_per_block(self) -> int: ...

class PendingCompile:
    """A compile running on the JIT's background pool (Jit.compile_in_background)."""

    def ready(self) -> bool:
        """Whether the compile has ended (with a result or an error); never waits."""
    def wait(self, timeout: Optional[float] = None) -> bool:
        """Waits (the GIL released) at most `timeout` seconds (None: no limit); whether the
        compile has ended."""
    def result(self, timeout: Optional[float] = None) -> Compiled:
        """The result; raises the compile's error (CompileError...), or TimeoutError when it
        has not ended in time."""

class SwitchingKernel:
    """Launches a fallback Kernel until the specialised kernel compiling in the background is
    loaded, then that one, for good (Jit.switching_kernel). Called like a Kernel."""

    def __call__(
        self,
        grid: _Dims,
        block: _Dims,
        *args: Any,
        shared_mem: int = 0,
        stream: Any = None,
    ) -> None:
        """Launches the current kernel (see Kernel.__call__); never waits for the compile."""
    def ready(self) -> bool:
        """Whether the background compile and load has ended."""
    def wait(self, timeout: Optional[float] = None) -> bool:
        """Waits at most `timeout` seconds (None: no limit) for the compile; whether launches
        now go to the specialised kernel."""
    @property
    def switched(self) -> bool: ...
    @property
    def error(self) -> Optional[HipjitError]:
        """Why the fallback is kept for good: the compile's error (CompileError...) or
        LoadError when the two kernels' arguments differ; None while compiling and once
        switched."""
    @property
    def fallback(self) -> Kernel: ...
    @property
    def current(self) -> Kernel: ...

class Jit:
    """The JIT compiler with its caches."""

    def __init__(
        self,
        *,
        cache_dir: Union[None, bool, _Path, Sequence[_Path]] = None,
        compiler: Optional[str] = None,
        max_cache_bytes: Optional[int] = None,
        extra_signature: Union[bytes, bytearray, str, None] = None,
    ) -> None:
        """max_cache_bytes: the written cache root's size cap in bytes (least recently used
        entries go first); None: HIPJIT_CACHE_MAX_SIZE (e.g. "20G", or "unlimited"), else
        5 GiB; 2**64-1: no cap.

        Raises ValueError for cache_dir="" (an empty path names no directory: give "." for
        the current one) and a negative max_cache_bytes, TypeError for a wrong type."""
    def compile(
        self,
        source: Union[str, bytes],
        arch: Union[str, Sequence[str]],
        *,
        defines: Optional[_Defines] = None,
        include_dirs: Optional[Sequence[_Path]] = None,
        opt: Union[int, str, None] = None,
        std: Optional[str] = None,
        flags: Optional[Sequence[str]] = None,
        fast_math: bool = False,
        compiler: Optional[str] = None,
    ) -> Compiled: ...
    def kernel(
        self,
        source: Union[str, bytes],
        name: str,
        *,
        device: Any = None,
        defines: Optional[_Defines] = None,
        include_dirs: Optional[Sequence[_Path]] = None,
        opt: Union[int, str, None] = None,
        std: Optional[str] = None,
        flags: Optional[Sequence[str]] = None,
        fast_math: bool = False,
        compiler: Optional[str] = None,
    ) -> Kernel: ...
    def compile_in_background(
        self,
        source: Union[str, bytes],
        arch: Union[str, Sequence[str]],
        *,
        defines: Optional[_Defines] = None,
        include_dirs: Optional[Sequence[_Path]] = None,
        opt: Union[int, str, None] = None,
        std: Optional[str] = None,
        flags: Optional[Sequence[str]] = None,
        fast_math: bool = False,
        compiler: Optional[str] = None,
    ) -> PendingCompile:
        """compile() on the JIT's background pool; returns at once."""
    def switching_kernel(
        self,
        fallback: Kernel,
        source: Union[str, bytes],
        name: Optional[str] = None,
        *,
        defines: Optional[_Defines] = None,
        include_dirs: Optional[Sequence[_Path]] = None,
        opt: Union[int, str, None] = None,
        std: Optional[str] = None,
        flags: Optional[Sequence[str]] = None,
        fast_math: bool = False,
        compiler: Optional[str] = None,
    ) -> SwitchingKernel:
        """Starts compiling kernel `name` (None: the fallback's name) of `source` for the
        fallback's device in the background; launches go to `fallback` until it is loaded."""
    def clear_memory(self) -> None: ...
    @property
    def cache_dirs(self) -> List[str]: ...
    @property
    def compiler(self) -> str: ...

def get_jit() -> Jit: ...
def compile(
    source: Union[str, bytes],
    arch: Union[str, Sequence[str]],
    *,
    defines: Optional[_Defines] = None,
    include_dirs: Optional[Sequence[_Path]] = None,
    opt: Union[int, str, None] = None,
    std: Optional[str] = None,
    flags: Optional[Sequence[str]] = None,
    fast_math: bool = False,
    compiler: Optional[str] = None,
) -> Compiled: ...
def inspect(path_or_bytes: Union[_Path, bytes, bytearray], *, target: Optional[str] = None) -> Inspected: ...
def runtime_info() -> Dict[str, Any]: ...
