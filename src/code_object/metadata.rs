//! The `NT_AMDGPU_METADATA` note: a MessagePack map whose `amdhsa.kernels` array describes each
//! kernel. Source: LLVM AMDGPUUsage "Code Object V3 Metadata" and later ("AMDHSA Code Object
//! V3 Kernel Metadata Map", "Kernel Argument Metadata Map").

use rmpv::Value;

use super::{CodeObjectError, KernelArg, KernelInfo};

/// Nesting deeper than this is refused (the metadata nests four levels).
const MAX_DEPTH: usize = 32;

/// The decoded metadata note.
pub(crate) struct Metadata {
    pub(crate) kernels: Vec<KernelInfo>,
}

fn malformed(offset: u64, reason: impl Into<String>) -> CodeObjectError {
    CodeObjectError::MetadataMalformed {
        offset,
        reason: reason.into(),
    }
}

fn lookup<'v>(map: &'v [(Value, Value)], key: &str) -> Option<&'v Value> {
    map.iter()
        .find(|(k, _)| k.as_str() == Some(key))
        .map(|(_, v)| v)
}

/// Decodes the note descriptor at file offset `offset`.
pub(crate) fn parse(desc: &[u8], offset: u64) -> Result<Metadata, CodeObjectError> {
    let mut reader = desc;
    let root = rmpv::decode::read_value_with_max_depth(&mut reader, MAX_DEPTH).map_err(|e| {
        let at = offset + (desc.len() - reader.len()) as u64;
        malformed(at, format!("invalid MessagePack: {e}"))
    })?;
    let Value::Map(root) = root else {
        return Err(malformed(offset, "the root value is not a map"));
    };
    let kernels = match lookup(&root, "amdhsa.kernels") {
        None => {
            return Err(CodeObjectError::MetadataFieldMissing {
                kernel: None,
                field: "amdhsa.kernels".into(),
            })
        }
        Some(Value::Array(kernels)) => kernels,
        Some(_) => return Err(malformed(offset, "amdhsa.kernels is not an array")),
    };
    let kernels = kernels
        .iter()
        .enumerate()
        .map(|(i, k)| parse_kernel(i, k, offset))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Metadata { kernels })
}

struct Fields<'v> {
    map: &'v [(Value, Value)],
    kernel: Option<String>,
    context: String,
    offset: u64,
}

impl Fields<'_> {
    fn get(&self, key: &str) -> Option<&Value> {
        lookup(self.map, key)
    }

    fn missing(&self, key: &str) -> CodeObjectError {
        CodeObjectError::MetadataFieldMissing {
            kernel: self.kernel.clone(),
            field: format!("{}{key}", self.context),
        }
    }

    fn wrong_type(&self, key: &str, expected: &str) -> CodeObjectError {
        malformed(
            self.offset,
            format!(
                "{}{key}{} is not {expected}",
                self.context,
                self.kernel
                    .as_deref()
                    .map(|k| format!(" of kernel {k}"))
                    .unwrap_or_default()
            ),
        )
    }

    fn opt_u32(&self, key: &str) -> Result<Option<u32>, CodeObjectError> {
        match self.get(key) {
            None => Ok(None),
            Some(v) => v
                .as_u64()
                .and_then(|n| u32::try_from(n).ok())
                .map(Some)
                .ok_or_else(|| self.wrong_type(key, "an unsigned 32-bit integer")),
        }
    }

    fn u32(&self, key: &str) -> Result<u32, CodeObjectError> {
        self.opt_u32(key)?.ok_or_else(|| self.missing(key))
    }

    fn opt_str(&self, key: &str) -> Result<Option<String>, CodeObjectError> {
        match self.get(key) {
            None => Ok(None),
            Some(v) => v
                .as_str()
                .map(|s| Some(s.to_owned()))
                .ok_or_else(|| self.wrong_type(key, "a UTF-8 string")),
        }
    }

    fn str(&self, key: &str) -> Result<String, CodeObjectError> {
        self.opt_str(key)?.ok_or_else(|| self.missing(key))
    }

    fn opt_bool(&self, key: &str) -> Result<Option<bool>, CodeObjectError> {
        match self.get(key) {
            None => Ok(None),
            Some(v) => v
                .as_bool()
                .map(Some)
                .ok_or_else(|| self.wrong_type(key, "a boolean")),
        }
    }
}

fn parse_kernel(index: usize, value: &Value, offset: u64) -> Result<KernelInfo, CodeObjectError> {
    let Value::Map(map) = value else {
        return Err(malformed(
            offset,
            format!("amdhsa.kernels[{index}] is not a map"),
        ));
    };
    let mut f = Fields {
        map,
        kernel: None,
        context: String::new(),
        offset,
    };
    let name = match f.opt_str(".name")? {
        Some(name) => name,
        None => {
            return Err(CodeObjectError::MetadataFieldMissing {
                kernel: Some(format!("amdhsa.kernels[{index}]")),
                field: ".name".into(),
            })
        }
    };
    f.kernel = Some(name.clone());
    let args = match f.get(".args") {
        None => Vec::new(),
        Some(Value::Array(args)) => args
            .iter()
            .enumerate()
            .map(|(i, a)| parse_arg(&name, i, a, offset))
            .collect::<Result<Vec<_>, _>>()?,
        Some(_) => return Err(f.wrong_type(".args", "an array")),
    };
    Ok(KernelInfo {
        symbol: f.str(".symbol")?,
        args,
        kernarg_segment_size: f.u32(".kernarg_segment_size")?,
        kernarg_segment_align: f.u32(".kernarg_segment_align")?,
        group_segment_fixed_size: f.u32(".group_segment_fixed_size")?,
        private_segment_fixed_size: f.u32(".private_segment_fixed_size")?,
        sgpr_count: f.u32(".sgpr_count")?,
        vgpr_count: f.u32(".vgpr_count")?,
        agpr_count: f.opt_u32(".agpr_count")?,
        sgpr_spill_count: f.opt_u32(".sgpr_spill_count")?.unwrap_or(0),
        vgpr_spill_count: f.opt_u32(".vgpr_spill_count")?.unwrap_or(0),
        wavefront_size: f.u32(".wavefront_size")?,
        max_flat_workgroup_size: f.u32(".max_flat_workgroup_size")?,
        uses_dynamic_stack: f.opt_bool(".uses_dynamic_stack")?.unwrap_or(false),
        name,
    })
}

fn parse_arg(
    kernel: &str,
    index: usize,
    value: &Value,
    offset: u64,
) -> Result<KernelArg, CodeObjectError> {
    let context = format!(".args[{index}]");
    let Value::Map(map) = value else {
        return Err(malformed(
            offset,
            format!("{context} of kernel {kernel} is not a map"),
        ));
    };
    let f = Fields {
        map,
        kernel: Some(kernel.to_owned()),
        context,
        offset,
    };
    Ok(KernelArg {
        name: f.opt_str(".name")?,
        type_name: f.opt_str(".type_name")?,
        offset: f.u32(".offset")?,
        size: f.u32(".size")?,
        value_kind: f.str(".value_kind")?,
        address_space: f.opt_str(".address_space")?,
        access: f.opt_str(".access")?,
        actual_access: f.opt_str(".actual_access")?,
    })
}
