//! The API probe: what the bindings declare, read from the bindings themselves (never from
//! HIP_VERSION), and the `pfn` aliases derived from the same declarations. Reading them takes
//! syn (feature `bindgen`); without it the build takes the committed probe of the pregenerated
//! bindings ([`PREGENERATED_PFN`], [`PREGENERATED_PROBE`]), which a test compares with what
//! this probe reads from them.

#[cfg(feature = "bindgen")]
use std::collections::BTreeMap;
use std::collections::BTreeSet;

#[cfg(feature = "bindgen")]
use quote::{format_ident, quote};

/// The committed `pfn` aliases of the pregenerated bindings, relative to the package root.
#[cfg_attr(feature = "bindgen", allow(dead_code))]
pub const PREGENERATED_PFN: &str = "pregenerated/pfn.rs";

/// The committed list of the probed functions and types the pregenerated bindings declare,
/// relative to the package root.
#[cfg_attr(feature = "bindgen", allow(dead_code))]
pub const PREGENERATED_PROBE: &str = "pregenerated/probe.txt";

/// The C functions whose presence varies across HIP releases. Each becomes a cfg flag
/// `hip_api_<snake name without hip>` when the headers declare it.
pub const PROBED_APIS: &[&str] = &[
    "hipLibraryLoadData",
    "hipLibraryLoadFromFile",
    "hipLibraryUnload",
    "hipLibraryGetKernel",
    "hipLibraryGetKernelCount",
    "hipLibraryEnumerateKernels",
    "hipKernelGetFunction",
    "hipGetDevicePropertiesR0600",
    "hipModuleLaunchCooperativeKernel",
    "hipModuleOccupancyMaxActiveBlocksPerMultiprocessor",
];

/// Types hip-sys supplies itself when the headers lack them, or whose presence the layout
/// tests depend on. Each declared one becomes `hip_sys_type = "<name>"`.
pub const PROBED_TYPES: &[&str] = &[
    "hipLibrary_t",
    "hipKernel_t",
    "hipLibraryOption",
    "hipDeviceProp_t",
    "hipDeviceProp_tR0000",
    "hipDeviceProp_tR0600",
];

/// The cfg flag of a probed C function: `hipLibraryEnumerateKernels` ->
/// `hip_api_library_enumerate_kernels`, `hipGetDevicePropertiesR0600` ->
/// `hip_api_get_device_properties_r0600`.
pub fn cfg_name(api: &str) -> String {
    let rest = api.strip_prefix("hip").unwrap_or(api);
    let chars: Vec<char> = rest.chars().collect();
    let mut snake = String::from("hip_api");
    for (i, &c) in chars.iter().enumerate() {
        if c.is_ascii_uppercase() {
            let prev = i.checked_sub(1).map(|p| chars[p]);
            let next = chars.get(i + 1);
            let boundary = match prev {
                None => true,
                Some(p) if p.is_ascii_lowercase() || p.is_ascii_digit() => true,
                Some(p) => p.is_ascii_uppercase() && next.is_some_and(|n| n.is_ascii_lowercase()),
            };
            if boundary {
                snake.push('_');
            }
            snake.push(c.to_ascii_lowercase());
        } else {
            if i == 0 {
                snake.push('_');
            }
            snake.push(c);
        }
    }
    snake
}

/// What the build needs of a probe: the source of the `pfn` aliases (one per line) and the
/// names of [`PROBED_APIS`] and [`PROBED_TYPES`] the bindings declare.
#[derive(Debug, PartialEq, Eq)]
pub struct Probed {
    /// Rust source of the `pfn` aliases.
    pub pfn: String,
    /// The probed functions and types declared.
    pub declared: BTreeSet<String>,
}

impl Probed {
    /// The committed probe: the `pfn` source and the list as [`Probed::list`] writes it (one
    /// name a line; lines starting with `#` are comments).
    #[cfg_attr(feature = "bindgen", allow(dead_code))] // the build takes it only without syn
    pub fn committed(pfn: String, list: &str) -> Probed {
        let declared = list
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty() && !l.starts_with('#'))
            .map(str::to_string)
            .collect();
        Probed { pfn, declared }
    }

    /// The text of [`PREGENERATED_PROBE`] for this probe (written by the test that checks it).
    #[allow(dead_code)]
    pub fn list(&self) -> String {
        let mut s = String::from(
            "# The probed HIP functions and types the pregenerated bindings declare, one a line:\n\
             # what hip-sys's probe reads from hip_runtime_api.rs (tests/build_script.rs checks it;\n\
             # scripts/gen-pregenerated.sh writes it).\n",
        );
        for name in &self.declared {
            s.push_str(name);
            s.push('\n');
        }
        s
    }

    /// Whether the bindings declare the probed C function or type `name`.
    pub fn declares(&self, name: &str) -> bool {
        self.declared.contains(name)
    }
}

/// What one set of bindings declares.
#[cfg(feature = "bindgen")]
pub struct Inventory {
    /// Every non-variadic C-linkage function, with its `pfn` alias tokens.
    pub functions: BTreeMap<String, proc_macro2::TokenStream>,
    /// Every type, struct, union and enum name.
    pub types: BTreeSet<String>,
}

#[cfg(feature = "bindgen")]
impl Inventory {
    /// Reads the declarations of parsed bindings.
    pub fn of(file: &syn::File) -> Inventory {
        let mut functions = BTreeMap::new();
        let mut types = BTreeSet::new();
        for item in &file.items {
            match item {
                syn::Item::ForeignMod(block) => {
                    for foreign in &block.items {
                        if let syn::ForeignItem::Fn(f) = foreign {
                            if let Some(alias) = pfn_alias(f) {
                                functions.insert(f.sig.ident.to_string(), alias);
                            }
                        }
                    }
                }
                syn::Item::Type(t) => {
                    types.insert(t.ident.to_string());
                }
                syn::Item::Struct(s) => {
                    types.insert(s.ident.to_string());
                }
                syn::Item::Union(u) => {
                    types.insert(u.ident.to_string());
                }
                syn::Item::Enum(e) => {
                    types.insert(e.ident.to_string());
                }
                // `typedef enum X_e {..} X;` comes out as `pub use self::X_e as X;`.
                syn::Item::Use(u) => collect_renames(&u.tree, &mut types),
                _ => {}
            }
        }
        Inventory { functions, types }
    }

    /// Whether the bindings declare the C function `name` (with C linkage).
    pub fn declares_function(&self, name: &str) -> bool {
        self.functions.contains_key(name)
    }

    /// Rust source of the `pfn` aliases, one per non-variadic C-linkage function, a line each.
    pub fn pfn_source(&self) -> String {
        let mut s = String::new();
        for alias in self.functions.values() {
            s.push_str(&alias.to_string());
            s.push('\n');
        }
        s
    }

    /// What the build takes of this inventory.
    pub fn probed(&self) -> Probed {
        let declared = PROBED_APIS
            .iter()
            .filter(|api| self.declares_function(api))
            .chain(PROBED_TYPES.iter().filter(|ty| self.types.contains(**ty)))
            .map(|name| name.to_string())
            .collect();
        Probed {
            pfn: self.pfn_source(),
            declared,
        }
    }
}

#[cfg(feature = "bindgen")]
fn collect_renames(tree: &syn::UseTree, types: &mut BTreeSet<String>) {
    match tree {
        syn::UseTree::Path(p) => collect_renames(&p.tree, types),
        syn::UseTree::Rename(r) => {
            types.insert(r.rename.to_string());
        }
        syn::UseTree::Name(n) => {
            types.insert(n.ident.to_string());
        }
        syn::UseTree::Group(g) => g.items.iter().for_each(|t| collect_renames(t, types)),
        syn::UseTree::Glob(_) => {}
    }
}

/// `pub type name = unsafe extern "C" fn(args) -> ret;` for a C-linkage, non-variadic
/// declaration; `None` for variadic functions and C++-linkage ones (bindgen marks those with
/// `#[link_name]`: they cannot be resolved by their plain name).
#[cfg(feature = "bindgen")]
fn pfn_alias(f: &syn::ForeignItemFn) -> Option<proc_macro2::TokenStream> {
    if f.sig.variadic.is_some() || f.attrs.iter().any(|a| a.path().is_ident("link_name")) {
        return None;
    }
    let name = &f.sig.ident;
    let args = f.sig.inputs.iter().map(|arg| match arg {
        syn::FnArg::Typed(pat) => {
            let ty = &pat.ty;
            match &*pat.pat {
                syn::Pat::Ident(id) => {
                    let id = &id.ident;
                    quote!(#id: #ty)
                }
                _ => quote!(#ty),
            }
        }
        syn::FnArg::Receiver(_) => quote!(),
    });
    let output = &f.sig.output;
    let doc = format!("Pointer type of `{name}`, from its declaration in the HIP headers.");
    let alias = format_ident!("{}", name);
    Some(quote! {
        #[doc = #doc]
        pub type #alias = unsafe extern "C" fn(#(#args),*) #output;
    })
}
