//! Stream capture and graphs: record launches once (`capture`: [`Stream::begin_capture`],
//! [`Capture::launch`], [`Capture::end_capture`]), instantiate the [`Graph`]
//! ([`Graph::instantiate`]) and replay the [`GraphExec`] on any stream of its device
//! ([`GraphExec::launch`]), changing a kernel node's arguments between replays
//! ([`GraphExec::set_kernel_params`]).
//!
//! HIP entry points: `hipStreamBeginCapture`, `hipStreamEndCapture`, `hipStreamIsCapturing`,
//! `hipThreadExchangeStreamCaptureMode`, `hipGraphInstantiateWithFlags`, `hipGraphLaunch`,
//! `hipGraphGetNodes`, `hipGraphNodeGetType`, `hipGraphExecKernelNodeSetParams`,
//! `hipGraphExecDestroy`, `hipGraphDestroy` (HIP 5.2 exports them all), each optional: a
//! runtime without one gives [`GraphError::Unsupported`] naming it. On NVIDIA they map onto the
//! versioned driver entry points (`cuStreamBeginCapture_v2`, `cuGraphInstantiateWithFlags`,
//! `cuGraphExecKernelNodeSetParams_v2`; [`crate::safe::cuda`]).
//!
//! # What a graph keeps alive
//! A graph replays launches long after they were recorded, so what they use must outlive it:
//! - kernels: the [`Graph`] and each [`GraphExec`] hold clones of every [`Kernel`] recorded or
//!   set, so the code objects stay loaded after the [`Stream`], the `Kernel` values and the
//!   [`crate::jit::Jit`] that built them are gone;
//! - buffers: borrowed. [`Capture::launch`] and [`GraphExec::set_kernel_params`] take
//!   [`KernelArgs<'buf>`](KernelArgs), and [`Graph<'buf>`](Graph) and
//!   [`GraphExec<'buf>`](GraphExec) carry `'buf`, so a buffer passed to a recorded launch
//!   cannot be dropped while a graph that may replay it exists. Borrowing was chosen over
//!   counted buffers so that a graph adds no cost and no shared ownership to
//!   `memory`'s types. A buffer the graph writes is passed either as `&mut buf`
//!   (borrowed exclusively for as long as the graph: one launch of the graph may use it) or as
//!   [`Written(&buf)`](Written), a shared borrow that marks the argument written: many launches
//!   of one graph may write it, and the host may read it between replays (after synchronizing
//!   the replay's stream, as for any launch);
//! - raw device pointers passed as scalars (`u64`) are the caller's, under the `unsafe` of the
//!   launch;
//! - replays: a borrow ends when the [`GraphExec`] is dropped, but a replay queued by
//!   [`GraphExec::launch`] may still be running then (`hipGraphExecDestroy` does not wait for
//!   it), and a buffer freed next (a stream-ordered buffer's `hipFreeAsync` is ordered on its
//!   own stream only) would be freed under it. So each `GraphExec` keeps one event per stream
//!   it was launched on (created at the first replay there, `hipEventCreateWithFlags` with
//!   [`EventFlags::DISABLE_TIMING`](crate::safe::event::EventFlags::DISABLE_TIMING)), records it
//!   right after each `hipGraphLaunch` (one `hipEventRecord` per replay), and its drop waits
//!   for every one of them (`hipEventSynchronize`) before `hipGraphExecDestroy`: dropping an
//!   executable graph blocks until its replays have finished, and only then are its buffers
//!   released. Replays run on a stream of the graph's device only; [`GraphExec::launch`]
//!   refuses another device's stream before any call.
//!
//! ```compile_fail,E0505
//! # fn f(k: &hipjit::kernel::Kernel, s: &hipjit::stream::Stream,
//! #      dev: &hipjit::device::Device) -> Result<(), Box<dyn std::error::Error>> {
//! use hipjit::graph::CaptureMode;
//! let mut y = hipjit::memory::DeviceBuffer::<f32>::zeroed(dev, 256)?;
//! let mut cap = s.begin_capture(CaptureMode::Global)?;
//! let cfg = hipjit::launch::LaunchConfig::for_num_elems(256, 256);
//! unsafe { cap.launch(k, cfg, hipjit::args![&mut y]) }?;
//! let exec = cap.end_capture()?.instantiate()?;
//! drop(y); // the graph still replays a launch writing `y`
//! exec.launch(s)?;
//! # Ok(()) }
//! ```
//!
//! HIP 5.x had known bugs with module-API kernels in graph nodes (ROCm/hip#2450); on AMD,
//! hipjit's graph support is exercised here against the fixture runtime only.

use std::marker::PhantomData;
use std::sync::{Arc, Mutex};

use hip_sys as sys;

use crate::safe::device::Device;
use crate::safe::error::{HipError, LaunchError};
use crate::safe::event::{Event, EventFlags};
use crate::safe::kernel::Kernel;
use crate::safe::launch::{IntoKernelArg, KernelArg, KernelArgs, LaunchConfig};
use crate::safe::stream::AsStream;

#[doc(hidden)]
pub mod capture;

pub use capture::{refuse_while_capturing, Capture, CaptureMode};

#[allow(unused_imports)] // named by the documentation
use crate::safe::stream::Stream;

/// A buffer (or view) passed to a captured launch as an argument the kernel writes, borrowed
/// shared for `'a`: `args![&x, Written(&y), &a, &n]`. Unlike `&mut y`, several launches of one
/// graph may take it (module documentation). The kernel may write the memory the argument
/// points at, under the launch's `unsafe` contract.
#[derive(Debug, Clone, Copy)]
pub struct Written<'a, A: ?Sized>(pub &'a A);

impl<'a, A: KernelArg + ?Sized> IntoKernelArg<'a> for Written<'a, A> {
    #[inline]
    fn into_kernel_arg(self) -> (*const std::ffi::c_void, u32, bool) {
        (self.0.arg_ptr(), self.0.arg_size(), true)
    }
}

/// An error of stream capture or of a graph.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum GraphError {
    /// The runtime does not export an entry point of the capture and graph API.
    #[error("the HIP runtime does not export {symbol} (stream capture and graphs)")]
    Unsupported {
        /// The missing entry point.
        symbol: &'static str,
    },
    /// A runtime call failed (or was refused by hipjit before the call).
    #[error(transparent)]
    Hip(#[from] HipError),
    /// A kernel-node update was refused by the launch checks.
    #[error(transparent)]
    Launch(Box<LaunchError>),
    /// The node is not one of this executable graph's kernel nodes.
    #[error("kernel node {index} is not a kernel node of this executable graph ({count} there)")]
    ForeignNode {
        /// The node's index.
        index: usize,
        /// The executable graph's kernel nodes.
        count: usize,
    },
}

impl From<LaunchError> for GraphError {
    fn from(e: LaunchError) -> GraphError {
        match e {
            LaunchError::Hip(h) => GraphError::Hip(h),
            other => GraphError::Launch(Box::new(other)),
        }
    }
}

pub(crate) fn entry<F>(f: Option<F>, symbol: &'static str) -> Result<F, GraphError> {
    f.ok_or(GraphError::Unsupported { symbol })
}

/// What a [`Graph`] and its [`GraphExec`]s share: the graph (destroyed with the last of them),
/// its device and the kernels recorded.
pub(crate) struct GraphInner {
    pub(crate) raw: sys::hipGraph_t,
    pub(crate) device: Device,
    pub(crate) kernels: Vec<Kernel>,
}

// SAFETY: a hipGraph_t may be used from any thread; hipjit only reads it (nodes, instantiate)
// and destroys it once, in Drop.
unsafe impl Send for GraphInner {}
// SAFETY: as above.
unsafe impl Sync for GraphInner {}

impl Drop for GraphInner {
    fn drop(&mut self) {
        if let Some(destroy) = self.device.runtime().api().hipGraphDestroy {
            let rt = self.device.runtime();
            // SAFETY: the graph from hipStreamEndCapture, destroyed once, after every
            // executable graph made from it (each holds this `Arc`).
            if let Err(e) = rt.check(unsafe { destroy(self.raw) }, "hipGraphDestroy") {
                tracing::error!(error = %e, "failed to destroy a graph");
            }
        }
    }
}

/// A captured graph (`hipGraph_t`), made by [`Capture::end_capture`]; borrows the buffers of
/// its launches for `'buf` and keeps its kernels loaded (module documentation). `Send + Sync`.
pub struct Graph<'buf> {
    pub(crate) inner: Arc<GraphInner>,
    pub(crate) _buf: PhantomData<&'buf mut ()>,
}

impl std::fmt::Debug for Graph<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Graph")
            .field("raw", &self.inner.raw)
            .field("kernels", &self.inner.kernels.len())
            .finish()
    }
}

/// A kernel node of an executable graph, in the order `hipGraphGetNodes` lists the graph's
/// nodes (for a capture of one stream, the order of the launches): see
/// [`GraphExec::kernel_nodes`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KernelNode {
    index: usize,
    raw: sys::hipGraphNode_t,
}

impl KernelNode {
    /// The node's position among the graph's kernel nodes, from 0.
    pub fn index(&self) -> usize {
        self.index
    }

    /// The raw node handle (valid while the graph lives).
    pub fn as_raw(&self) -> sys::hipGraphNode_t {
        self.raw
    }
}

// SAFETY: an opaque handle, only passed back to the runtime with its own graph.
unsafe impl Send for KernelNode {}
// SAFETY: as above.
unsafe impl Sync for KernelNode {}

impl<'buf> Graph<'buf> {
    /// The raw handle (valid while `self` lives).
    pub fn as_raw(&self) -> sys::hipGraph_t {
        self.inner.raw
    }

    /// The device the graph was captured on.
    pub fn device(&self) -> &Device {
        &self.inner.device
    }

    /// The graph's kernel nodes (`hipGraphGetNodes`, `hipGraphNodeGetType`), in the order the
    /// runtime lists them.
    ///
    /// Errors: [`GraphError::Unsupported`], or the runtime's error.
    pub fn kernel_nodes(&self) -> Result<Vec<KernelNode>, GraphError> {
        let rt = self.inner.device.runtime();
        let get_nodes = entry(rt.api().hipGraphGetNodes, "hipGraphGetNodes")?;
        let get_type = entry(rt.api().hipGraphNodeGetType, "hipGraphNodeGetType")?;
        self.inner.device.bind()?;
        let mut count = 0usize;
        // SAFETY: NULL nodes asks for the count only; valid out pointer.
        rt.check(
            unsafe { get_nodes(self.inner.raw, std::ptr::null_mut(), &mut count) },
            "hipGraphGetNodes",
        )?;
        let mut nodes: Vec<sys::hipGraphNode_t> = vec![std::ptr::null_mut(); count];
        // SAFETY: room for `count` nodes; the runtime writes at most `count` and updates it.
        rt.check(
            unsafe { get_nodes(self.inner.raw, nodes.as_mut_ptr(), &mut count) },
            "hipGraphGetNodes",
        )?;
        nodes.truncate(count);
        let kernel_type = kernel_node_type(rt);
        let mut kernels = Vec::new();
        for node in nodes {
            let mut ty: sys::hipGraphNodeType = kernel_type.wrapping_add(1);
            // SAFETY: a node of this graph; valid out pointer.
            rt.check(unsafe { get_type(node, &mut ty) }, "hipGraphNodeGetType")?;
            if ty == kernel_type {
                kernels.push(KernelNode {
                    index: kernels.len(),
                    raw: node,
                });
            }
        }
        Ok(kernels)
    }

    /// Instantiates the graph (`hipGraphInstantiateWithFlags`, flags 0; on NVIDIA
    /// `cuGraphInstantiateWithFlags`). The executable graph keeps this graph (its nodes name
    /// the kernel nodes to update) and its kernels alive, and borrows the same buffers.
    ///
    /// Errors: [`GraphError::Unsupported`], or the runtime's error.
    pub fn instantiate(&self) -> Result<GraphExec<'buf>, GraphError> {
        let rt = self.inner.device.runtime();
        let instantiate = entry(
            rt.api().hipGraphInstantiateWithFlags,
            "hipGraphInstantiateWithFlags",
        )?;
        let launch = entry(rt.api().hipGraphLaunch, "hipGraphLaunch")?;
        entry(rt.api().hipGraphExecDestroy, "hipGraphExecDestroy")?;
        let nodes = self.kernel_nodes()?;
        self.inner.device.bind()?;
        let mut raw: sys::hipGraphExec_t = std::ptr::null_mut();
        // SAFETY: a live graph; valid out pointer; flags 0.
        rt.check(
            unsafe { instantiate(&mut raw, self.inner.raw, 0) },
            "hipGraphInstantiateWithFlags",
        )?;
        Ok(GraphExec {
            raw,
            graph: Arc::clone(&self.inner),
            nodes,
            kernels: Vec::new(),
            launch,
            direct: DirectUpdate::of(rt),
            replays: Mutex::new(Vec::new()),
            _buf: PhantomData,
        })
    }
}

/// The runtime's `hipGraphNodeTypeKernel`: 1 in HIP 5.x (`hipGraphNodeTypeKernel = 1`, after
/// an unused 0), 0 from HIP 6.0 on and on NVIDIA (`CU_GRAPH_NODE_TYPE_KERNEL`). The value is
/// the runtime's ABI, not the headers': a HIP 5.2 header set says 1 whatever runtime is
/// loaded, so it is decided by the loaded runtime's version (unknown: the current value, 0).
fn kernel_node_type(rt: &crate::safe::runtime::Runtime) -> sys::hipGraphNodeType {
    match (rt.platform(), rt.version()) {
        (crate::safe::runtime::Platform::Amd, Some(v)) if v.major() < 6 => 1,
        _ => 0,
    }
}

/// An executable graph (`hipGraphExec_t`): replayed with [`GraphExec::launch`] on any stream of
/// its device, its kernel nodes' arguments changed with [`GraphExec::set_kernel_params`].
/// Destroyed on drop, after waiting for every replay it launched (`hipEventSynchronize` on the
/// event recorded after the last replay on each stream, then `hipGraphExecDestroy`; module
/// documentation, "What a graph keeps alive"): the drop blocks until those replays finish, and
/// a failure there is logged (`tracing::error`), not raised. `Send + Sync`.
pub struct GraphExec<'buf> {
    raw: sys::hipGraphExec_t,
    graph: Arc<GraphInner>,
    nodes: Vec<KernelNode>,
    /// Kernels set by node updates (those recorded are in `graph`).
    kernels: Vec<Kernel>,
    launch: sys::pfn::hipGraphLaunch,
    /// On HIP's NVIDIA platform, how a node update reaches the driver without the checks that
    /// hold for the whole executable graph ([`GraphExec::set_kernel_params`]).
    direct: Option<DirectUpdate>,
    /// Per stream replayed on (its raw handle as an address), an event recorded after the last
    /// replay there; the drop waits for each.
    replays: Mutex<Vec<(usize, Event)>>,
    _buf: PhantomData<&'buf mut ()>,
}

// SAFETY: a hipGraphExec_t may be launched from any thread; updates take `&mut self`.
unsafe impl Send for GraphExec<'_> {}
// SAFETY: `&GraphExec` only launches, which the runtime serialises.
unsafe impl Sync for GraphExec<'_> {}

impl std::fmt::Debug for GraphExec<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GraphExec")
            .field("raw", &self.raw)
            .field("kernel_nodes", &self.nodes.len())
            .finish()
    }
}

impl Drop for GraphExec<'_> {
    fn drop(&mut self) {
        // The replays may still use the buffers borrowed for 'buf, which end with `self`: wait
        // for each before the borrows end.
        let replays = match self.replays.get_mut() {
            Ok(r) => std::mem::take(r),
            Err(poisoned) => std::mem::take(poisoned.into_inner()),
        };
        for (_, event) in &replays {
            if let Err(e) = event.synchronize() {
                tracing::error!(error = %e, "failed to wait for a replay of an executable graph");
            }
        }
        drop(replays);
        let rt = self.graph.device.runtime();
        if let Some(destroy) = rt.api().hipGraphExecDestroy {
            if let Err(e) = self.graph.device.bind() {
                tracing::error!(error = %e, "cannot bind the device to destroy a graph");
            }
            // SAFETY: the executable graph from instantiate, destroyed once.
            if let Err(e) = rt.check(unsafe { destroy(self.raw) }, "hipGraphExecDestroy") {
                tracing::error!(error = %e, "failed to destroy an executable graph");
            }
        }
    }
}

impl<'buf> GraphExec<'buf> {
    /// The raw handle (valid while `self` lives).
    pub fn as_raw(&self) -> sys::hipGraphExec_t {
        self.raw
    }

    /// The kernel nodes, listed once at instantiation ([`Graph::kernel_nodes`]).
    pub fn kernel_nodes(&self) -> &[KernelNode] {
        &self.nodes
    }

    /// Replays the graph on `stream` (`hipGraphLaunch`; on NVIDIA `cuGraphLaunch`), then records
    /// this graph's event for `stream` (`hipEventRecord`; the event is created, with
    /// `hipEventCreateWithFlags`, at the first replay on a stream). Returns once queued; the
    /// drop of `self` waits for the replay (module documentation, "What a graph keeps alive").
    ///
    /// Errors: `hipErrorInvalidHandle`, before any call, when `stream` belongs to another
    /// loaded runtime or to another device than the graph's; the runtime's error from creating
    /// the event (nothing is launched then) or from the launch; when recording the event after a
    /// queued replay fails, the stream is synchronized (`hipStreamSynchronize`) so that the
    /// replay has finished, and the recording's error is returned.
    pub fn launch(&self, stream: &impl AsStream) -> Result<(), HipError> {
        let d = &self.graph.device;
        d.check_same_runtime(stream.device(), "stream", "hipGraphLaunch")?;
        if !d.same_as(stream.device()) {
            return Err(HipError::new(
                400,
                "hipGraphLaunch",
                None,
                format!(
                    "refused by hipjit before the call: the executable graph belongs to device \
                     {} and the stream to device {}; a graph is replayed on a stream of its own \
                     device",
                    d.ordinal(),
                    stream.device().ordinal()
                ),
            ));
        }
        let key = stream.as_raw() as usize;
        let mut replays = match self.replays.lock() {
            Ok(r) => r,
            Err(poisoned) => poisoned.into_inner(),
        };
        let at = match replays.iter().position(|(k, _)| *k == key) {
            Some(at) => at,
            None => {
                replays.push((key, Event::new(d, EventFlags::DISABLE_TIMING)?));
                replays.len() - 1
            }
        };
        d.bind()?;
        let rt = d.runtime();
        // SAFETY: a live executable graph; the stream is live while `stream` is; every kernel
        // and buffer it uses is kept alive (module documentation).
        rt.check(
            unsafe { (self.launch)(self.raw, stream.as_raw()) },
            "hipGraphLaunch",
        )?;
        // SAFETY: a live event and stream of the bound device (checked above).
        let recorded = rt.check(
            unsafe { (rt.api().hipEventRecord)(replays[at].1.as_raw(), stream.as_raw()) },
            "hipEventRecord",
        );
        if let Err(e) = recorded {
            // The drop could not wait for this replay: wait for it now.
            if let Err(sync) = stream.synchronize() {
                tracing::error!(error = %sync, "failed to wait for a replay of an executable graph");
            }
            return Err(e);
        }
        Ok(())
    }

    /// Sets the kernel, configuration and arguments of kernel node `node` for later replays
    /// (`hipGraphExecKernelNodeSetParams`; on NVIDIA `cuGraphExecKernelNodeSetParams_v2`),
    /// after [`Kernel::check_launch`]. The runtime copies the argument values; the graph keeps
    /// `kernel` loaded and `args` borrowed for `'buf`.
    ///
    /// Errors: [`GraphError::ForeignNode`] for a node of another graph,
    /// [`GraphError::Launch`] from the checks, [`GraphError::Unsupported`], or the runtime's
    /// error.
    ///
    /// # Safety
    /// As [`Capture::launch`].
    pub unsafe fn set_kernel_params(
        &mut self,
        node: KernelNode,
        kernel: &Kernel,
        cfg: LaunchConfig,
        mut args: KernelArgs<'buf>,
    ) -> Result<(), GraphError> {
        // What holds for the whole graph was checked when `kernel` was last set in full (the
        // entry point, the platform, the kernel's device, the kernel kept): with that kernel
        // again, only what this call brings is checked (the node, the configuration, the
        // arguments), and the driver called straight away. Any other kernel or a check that
        // fails goes the checked way, which names what is wrong; so does a refusal of the
        // thread's context (the checked way binds the device's and updates once more: a
        // refused update changed nothing). Another error of the driver is returned.
        if let Some(DirectUpdate {
            set,
            kernel: Some(last),
        }) = &self.direct
        {
            if last.same_as(kernel)
                && self.nodes.get(node.index) == Some(&node)
                && kernel.fits(&cfg, &args)
            {
                let params = crate::safe::cuda::shim::kernel_node_params(&node_params(
                    kernel, &cfg, &mut args,
                ));
                // SAFETY: a live executable graph and a kernel node of its graph (checked
                // above); a kernel of the graph's device kept alive by this graph (checked when
                // it was last set in full); the configuration and the arguments checked above,
                // pointing at live borrowed values the driver copies during the call.
                let rc = unsafe { set(self.raw as _, node.raw as _, &params) };
                if rc == 0 {
                    return Ok(());
                }
                if !crate::safe::cuda::shim::refuses_the_context(rc) {
                    let rt = self.graph.device.runtime();
                    let e = crate::safe::cuda::shim::map(rc);
                    return Err(rt.error(e, "hipGraphExecKernelNodeSetParams").into());
                }
            }
        }
        // SAFETY: the caller's contract.
        unsafe { self.set_kernel_params_checked(node, kernel, cfg, &mut args) }
    }

    /// [`GraphExec::set_kernel_params`] with every check; remembers `kernel` for the direct
    /// way once it is set.
    #[inline(never)]
    unsafe fn set_kernel_params_checked(
        &mut self,
        node: KernelNode,
        kernel: &Kernel,
        cfg: LaunchConfig,
        args: &mut KernelArgs<'buf>,
    ) -> Result<(), GraphError> {
        if self.nodes.get(node.index) != Some(&node) {
            return Err(GraphError::ForeignNode {
                index: node.index,
                count: self.nodes.len(),
            });
        }
        let d = &self.graph.device;
        let rt = d.runtime();
        let set = entry(
            rt.api().hipGraphExecKernelNodeSetParams,
            "hipGraphExecKernelNodeSetParams",
        )?;
        if !kernel.library().device().same_as(d) {
            return Err(LaunchError::WrongDevice {
                stream: d.ordinal(),
                kernel: kernel.library().device().ordinal(),
            }
            .into());
        }
        kernel.check_launch(&cfg, args)?;
        let params = node_params(kernel, &cfg, args);
        let rc = if rt.platform() == crate::safe::runtime::Platform::Nvidia {
            // SAFETY: as below; the update binds the device only when the driver asks for it.
            unsafe {
                crate::safe::cuda::shim::exec_kernel_node_set_params_on(
                    d.ordinal(),
                    self.raw,
                    node.raw,
                    &params,
                )
            }
        } else {
            d.bind()?;
            // SAFETY: a live executable graph and a node of its graph (checked above); the
            // parameters point at live borrowed values the runtime copies during the call.
            unsafe { set(self.raw, node.raw, &params) }
        };
        rt.check(rc, "hipGraphExecKernelNodeSetParams")?;
        capture::keep(&mut self.kernels, kernel);
        if let Some(direct) = &mut self.direct {
            if !direct.kernel.as_ref().is_some_and(|k| k.same_as(kernel)) {
                direct.kernel = Some(kernel.clone());
            }
        }
        Ok(())
    }
}

/// `cuGraphExecKernelNodeSetParams_v2` on HIP's NVIDIA platform, and the kernel last set with
/// every check ([`GraphExec::set_kernel_params`]).
struct DirectUpdate {
    set: unsafe extern "C" fn(
        crate::safe::cuda::driver::Handle,
        crate::safe::cuda::driver::Handle,
        *const crate::safe::cuda::driver::KernelNodeParams,
    ) -> crate::safe::cuda::driver::CUresult,
    kernel: Option<Kernel>,
}

/// The parameters of a kernel node running `kernel` with `cfg` and `args`
/// (`hipKernelNodeParams`).
fn node_params(
    kernel: &Kernel,
    cfg: &LaunchConfig,
    args: &mut KernelArgs<'_>,
) -> sys::hipKernelNodeParams {
    sys::hipKernelNodeParams {
        blockDim: sys::dim3 {
            x: cfg.block.x,
            y: cfg.block.y,
            z: cfg.block.z,
        },
        extra: std::ptr::null_mut(),
        func: kernel.as_raw() as *mut std::ffi::c_void,
        gridDim: sys::dim3 {
            x: cfg.grid.x,
            y: cfg.grid.y,
            z: cfg.grid.z,
        },
        kernelParams: args.raw_ptrs(),
        sharedMemBytes: cfg.dynamic_lds_bytes,
    }
}

impl DirectUpdate {
    /// The direct way for an executable graph of `rt`: on HIP's NVIDIA platform, where the
    /// driver exports the entry point; `None` elsewhere.
    fn of(rt: &crate::safe::runtime::Runtime) -> Option<DirectUpdate> {
        if rt.platform() != crate::safe::runtime::Platform::Nvidia {
            return None;
        }
        let set = crate::safe::cuda::driver::get()?.cuGraphExecKernelNodeSetParams_v2?;
        Some(DirectUpdate { set, kernel: None })
    }
}
