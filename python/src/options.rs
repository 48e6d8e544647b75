//! The keyword arguments of `compile` and `Jit.kernel` turned into [`CompileOptions`]; every bad
//! value a `TypeError` or `ValueError` naming the keyword.

use std::path::PathBuf;

use hipjit::compiler::{CompileOptions, CxxStd, OptLevel};
use hipjit::cuda::target::SmTarget;
use hipjit::target_id::TargetId;
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyString, PyTuple};

/// The compile keywords shared by `compile` and `Jit.kernel`.
#[derive(Default)]
pub struct Keywords<'a, 'py> {
    pub arch: Option<&'a Bound<'py, PyAny>>,
    pub defines: Option<&'a Bound<'py, PyAny>>,
    pub include_dirs: Option<&'a Bound<'py, PyAny>>,
    pub opt: Option<&'a Bound<'py, PyAny>>,
    pub std: Option<&'a str>,
    pub flags: Option<Vec<String>>,
    pub fast_math: bool,
}

/// `arch`: one target or a list of them: AMDGPU target IDs (`"gfx90a"`,
/// `"gfx942:sramecc+:xnack-"`) or an NVIDIA SM target (`"sm_90"`, compiled to a cubin).
pub fn targets(arch: &Bound<'_, PyAny>) -> PyResult<(Vec<TargetId>, Vec<SmTarget>)> {
    let names: Vec<String> = if let Ok(s) = arch.cast::<PyString>() {
        vec![s.to_cow()?.into_owned()]
    } else if arch.is_instance_of::<PyList>() || arch.is_instance_of::<PyTuple>() {
        arch.extract().map_err(|_| {
            PyTypeError::new_err("arch: expected a target name (str) or a list of them")
        })?
    } else {
        return Err(PyTypeError::new_err(format!(
            "arch: expected a target name (str) or a list of them, got {}",
            type_name(arch)
        )));
    };
    if names.is_empty() {
        return Err(PyValueError::new_err("arch: the list of targets is empty"));
    }
    let (mut amd, mut nvidia) = (Vec::new(), Vec::new());
    for n in &names {
        if n.starts_with("sm_") || n.starts_with("compute_") {
            nvidia.push(
                SmTarget::parse(n)
                    .map_err(|e| PyValueError::new_err(format!("arch: {n:?}: {e}")))?,
            );
        } else {
            amd.push(
                n.parse::<TargetId>()
                    .map_err(|e| PyValueError::new_err(format!("arch: {n:?}: {e}")))?,
            );
        }
    }
    Ok((amd, nvidia))
}

/// `defines`: a dict `{name: value}` (value `None` for `-DNAME`; str, int, float or bool
/// otherwise) or a list of `"NAME"` / `"NAME=VALUE"` strings.
fn defines(d: &Bound<'_, PyAny>) -> PyResult<Vec<(String, Option<String>)>> {
    let mut out = Vec::new();
    if let Ok(dict) = d.cast::<PyDict>() {
        for (k, v) in dict.iter() {
            let name: String = k.extract().map_err(|_| {
                PyTypeError::new_err(format!(
                    "defines: the name {} is not a str",
                    k.repr().map(|r| r.to_string()).unwrap_or_default()
                ))
            })?;
            let value = if v.is_none() {
                None
            } else if let Ok(b) = v.extract::<bool>() {
                Some(if b { "1" } else { "0" }.to_owned())
            } else if v.is_instance_of::<PyString>()
                || v.is_instance_of::<pyo3::types::PyInt>()
                || v.is_instance_of::<pyo3::types::PyFloat>()
            {
                Some(v.str()?.to_cow()?.into_owned())
            } else {
                return Err(PyTypeError::new_err(format!(
                    "defines[{name:?}]: expected None, str, int, float or bool, got {}",
                    type_name(&v)
                )));
            };
            out.push((name, value));
        }
    } else if d.is_instance_of::<PyList>() || d.is_instance_of::<PyTuple>() {
        let items: Vec<String> = d.extract().map_err(|_| {
            PyTypeError::new_err("defines: expected a dict or a list of \"NAME=VALUE\" strings")
        })?;
        for item in items {
            match item.split_once('=') {
                Some((n, v)) => out.push((n.to_owned(), Some(v.to_owned()))),
                None => out.push((item, None)),
            }
        }
    } else {
        return Err(PyTypeError::new_err(format!(
            "defines: expected a dict or a list of \"NAME=VALUE\" strings, got {}",
            type_name(d)
        )));
    }
    Ok(out)
}

fn include_dirs(d: &Bound<'_, PyAny>) -> PyResult<Vec<PathBuf>> {
    if d.is_instance_of::<PyString>() {
        return Err(PyTypeError::new_err(
            "include_dirs: expected a list of directories, got one str (wrap it in a list)",
        ));
    }
    d.extract::<Vec<PathBuf>>().map_err(|_| {
        PyTypeError::new_err(format!(
            "include_dirs: expected a list of str or os.PathLike, got {}",
            type_name(d)
        ))
    })
}

fn opt_level(o: &Bound<'_, PyAny>) -> PyResult<OptLevel> {
    if let Ok(n) = o.extract::<i64>() {
        return match n {
            0 => Ok(OptLevel::O0),
            1 => Ok(OptLevel::O1),
            2 => Ok(OptLevel::O2),
            3 => Ok(OptLevel::O3),
            _ => Err(PyValueError::new_err(format!(
                "opt: {n} is not an optimisation level (0, 1, 2, 3, \"s\" or \"z\")"
            ))),
        };
    }
    match o.extract::<String>().as_deref() {
        Ok("s") | Ok("Os") => Ok(OptLevel::Os),
        Ok("z") | Ok("Oz") => Ok(OptLevel::Oz),
        Ok(s) => Err(PyValueError::new_err(format!(
            "opt: {s:?} is not an optimisation level (0, 1, 2, 3, \"s\" or \"z\")"
        ))),
        Err(_) => Err(PyTypeError::new_err(format!(
            "opt: expected an int or \"s\"/\"z\", got {}",
            type_name(o)
        ))),
    }
}

/// The options the keywords describe. Targets are left empty when `arch` is not given (a load
/// takes the device's).
pub fn compile_options(k: &Keywords<'_, '_>) -> PyResult<CompileOptions> {
    let mut o = CompileOptions::default();
    if let Some(a) = k.arch.filter(|a| !a.is_none()) {
        (o.targets, o.sm_targets) = targets(a)?;
    }
    if let Some(d) = k.defines.filter(|d| !d.is_none()) {
        o.defines = defines(d)?;
    }
    if let Some(d) = k.include_dirs.filter(|d| !d.is_none()) {
        o.include_dirs = include_dirs(d)?;
    }
    if let Some(l) = k.opt {
        o.opt_level = opt_level(l)?;
    }
    if let Some(s) = k.std {
        o.std = s
            .parse::<CxxStd>()
            .map_err(|e| PyValueError::new_err(format!("std: {e}")))?;
    }
    if let Some(f) = &k.flags {
        o.extra_flags = f.clone();
    }
    o.fast_math = k.fast_math;
    Ok(o)
}

/// `flags`: None, or a list (or tuple) of str, one flag per item. A single str is refused (it
/// would otherwise be read as a sequence of one-letter flags, or as one flag holding spaces).
pub fn flags(v: Option<&Bound<'_, PyAny>>) -> PyResult<Option<Vec<String>>> {
    let Some(v) = v.filter(|v| !v.is_none()) else {
        return Ok(None);
    };
    if let Ok(s) = v.cast::<PyString>() {
        return Err(PyTypeError::new_err(format!(
            "flags: expected a list of str, one flag per item, got the str {}: wrap it in a \
             list ([{}])",
            s.repr()?,
            s.repr()?
        )));
    }
    if !(v.is_instance_of::<PyList>() || v.is_instance_of::<PyTuple>()) {
        return Err(PyTypeError::new_err(format!(
            "flags: expected a list of str, one flag per item, got {}",
            type_name(v)
        )));
    }
    let mut out = Vec::new();
    for (i, item) in v.try_iter()?.enumerate() {
        let item = item?;
        match item.cast::<PyString>() {
            Ok(s) => out.push(s.to_cow()?.into_owned()),
            Err(_) => {
                return Err(PyTypeError::new_err(format!(
                    "flags[{i}]: expected a str (one compiler flag), got {}",
                    type_name(&item)
                )))
            }
        }
    }
    Ok(Some(out))
}

/// A keyword taking a whole number from 0 to `max` (`shared_mem`, `max_cache_bytes`): an int
/// (not a bool); `unit` says what it counts (`"bytes"`).
///
/// Errors: `TypeError` for another type, `ValueError` out of range, each naming the keyword,
/// the value and the range.
pub fn unsigned(name: &str, v: &Bound<'_, PyAny>, max: u64, unit: &str) -> PyResult<u64> {
    if !v.is_instance_of::<pyo3::types::PyInt>() || v.is_instance_of::<pyo3::types::PyBool>() {
        return Err(PyTypeError::new_err(format!(
            "{name}: expected an int ({unit}, 0 to {max}), got {}",
            type_name(v)
        )));
    }
    match v.extract::<u64>() {
        Ok(n) if n <= max => Ok(n),
        _ => Err(PyValueError::new_err(format!(
            "{name}: {} is out of range: expected {unit} from 0 to {max}",
            v.repr()?
        ))),
    }
}

/// A keyword taking None or a str (`std`, `compiler`, `target`).
///
/// Errors: `TypeError` naming the keyword and what it takes (`what`).
pub fn opt_str(name: &str, v: Option<&Bound<'_, PyAny>>, what: &str) -> PyResult<Option<String>> {
    let Some(v) = v.filter(|v| !v.is_none()) else {
        return Ok(None);
    };
    match v.cast::<PyString>() {
        Ok(s) => Ok(Some(s.to_cow()?.into_owned())),
        Err(_) => Err(PyTypeError::new_err(format!(
            "{name}: expected {what}, got {}",
            type_name(v)
        ))),
    }
}

/// A keyword taking a bool (`fast_math`); None is False.
///
/// Errors: `TypeError` naming the keyword for anything but a bool or None.
pub fn boolean(name: &str, v: Option<&Bound<'_, PyAny>>) -> PyResult<bool> {
    let Some(v) = v.filter(|v| !v.is_none()) else {
        return Ok(false);
    };
    match v.cast::<pyo3::types::PyBool>() {
        Ok(b) => Ok(b.is_true()),
        Err(_) => Err(PyTypeError::new_err(format!(
            "{name}: expected True or False, got {}",
            type_name(v)
        ))),
    }
}

/// A keyword taking bytes (`extra_signature`): bytes, a bytearray, or a str (its UTF-8).
///
/// Errors: `TypeError` naming the keyword for anything else.
pub fn bytes_arg(name: &str, v: Option<&Bound<'_, PyAny>>) -> PyResult<Option<Vec<u8>>> {
    let Some(v) = v.filter(|v| !v.is_none()) else {
        return Ok(None);
    };
    if let Ok(b) = v.cast::<pyo3::types::PyBytes>() {
        return Ok(Some(b.as_bytes().to_vec()));
    }
    if let Ok(b) = v.cast::<pyo3::types::PyByteArray>() {
        return Ok(Some(b.to_vec()));
    }
    if let Ok(s) = v.cast::<PyString>() {
        return Ok(Some(s.to_cow()?.as_bytes().to_vec()));
    }
    Err(PyTypeError::new_err(format!(
        "{name}: expected bytes, a bytearray or a str, got {}",
        type_name(v)
    )))
}

/// The Python type name of `v`, for messages.
pub fn type_name(v: &Bound<'_, PyAny>) -> String {
    v.get_type()
        .name()
        .map(|n| n.to_string())
        .unwrap_or_else(|_| "?".to_owned())
}
