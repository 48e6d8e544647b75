//! The API probe: what the bindings declare, read from the bindings themselves (never from
//! HIP_VERSION), and the `pfn` aliases derived from the same declarations.

use std::collections::{BTreeMap, BTreeSet};

use quote::{format_ident, quote};

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

/// What one set of bindings declares.
pub struct Inventory {
    /// Every non-variadic C-linkage function, with its `pfn` alias tokens.
    pub functions: BTreeMap<String, proc_macro2::TokenStream>,
    /// Every type, struct, union and enum name.
    pub types: BTreeSet<String>,
}

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

    /// Rust source of the `pfn` aliases, one per non-variadic C-linkage function.
    pub fn pfn_source(&self) -> String {
        let aliases = self.functions.values();
        quote!(#(#aliases)*).to_string()
    }
}

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
