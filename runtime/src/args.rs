//! Argument parsing for the packed `runtime.*` functions: arity checks and one converter per
//! argument kind, each failing with a TypeError that names the function, the argument and what
//! was expected; plus `def`, which registers a packed function with its doc.

use std::ffi::c_void;

use anyffi::abi::{kDLBfloat, kDLBool, kDLFloat, kDLInt, kDLUInt, DLDataType, DLDevice, DLTensor};
use anyffi::{Any, AnyView, Error, Function, Result, Tensor, TensorObj};
use anyffi_registry::global::{register_global, GlobalEntry};

/// The packed arguments of one call of `func`, whose signature is `sig` (for messages).
pub(crate) struct Args<'a, 'v> {
    pub func: &'static str,
    args: &'a [AnyView<'v>],
}

impl<'a, 'v> Args<'a, 'v> {
    /// Checks that exactly `names.len()` arguments were passed.
    pub fn new(func: &'static str, names: &[&str], args: &'a [AnyView<'v>]) -> Result<Self> {
        if args.len() != names.len() {
            return Err(Error::type_error(format!(
                "{func}({}) expects {} argument{}, got {}",
                names.join(", "),
                names.len(),
                if names.len() == 1 { "" } else { "s" },
                args.len()
            )));
        }
        Ok(Args { func, args })
    }

    /// The raw view of argument `i`.
    pub fn view(&self, i: usize) -> &AnyView<'v> {
        &self.args[i]
    }

    pub fn device(&self, i: usize, name: &str) -> Result<DLDevice> {
        device_arg(&self.args[i], self.func, name)
    }

    pub fn int(&self, i: usize, name: &str) -> Result<i64> {
        int_arg(&self.args[i], self.func, name)
    }

    /// A non-negative integer that fits `usize` (ValueError when negative).
    pub fn size(&self, i: usize, name: &str) -> Result<usize> {
        let v = self.int(i, name)?;
        usize::try_from(v).map_err(|_| {
            Error::value_error(format!(
                "{}: argument `{name}` must be >= 0, got {v}",
                self.func
            ))
        })
    }

    pub fn ptr(&self, i: usize, name: &str) -> Result<*mut c_void> {
        ptr_arg(&self.args[i], self.func, name)
    }

    pub fn dims(&self, i: usize, name: &str) -> Result<Vec<i64>> {
        dims_arg(&self.args[i], self.func, name)
    }

    pub fn dtype(&self, i: usize, name: &str) -> Result<DLDataType> {
        dtype_arg(&self.args[i], self.func, name)
    }

    pub fn tensor(&self, i: usize, name: &str) -> Result<Tensor> {
        tensor_arg(&self.args[i], self.func, name)
    }

    pub fn dltensor(&self, i: usize, name: &str) -> Result<*mut DLTensor> {
        dltensor_arg(&self.args[i], self.func, name)
    }

    /// A tensor argument the function writes into: as `dltensor`, and not read-only memory.
    pub fn output_dltensor(&self, i: usize, name: &str) -> Result<*mut DLTensor> {
        let t = dltensor_arg(&self.args[i], self.func, name)?;
        check_writable(&self.args[i], self.func, name)?;
        Ok(t)
    }
}

#[cold]
fn expected(func: &str, arg: &str, what: &str, got: &AnyView<'_>) -> Error {
    Error::type_error(format!(
        "{func}: argument `{arg}` expected {what}, got {}",
        got.type_key()
    ))
}

/// A `Device` value.
pub fn device_arg(v: &AnyView<'_>, func: &str, arg: &str) -> Result<DLDevice> {
    v.as_device()
        .ok_or_else(|| expected(func, arg, "Device", v))
}

/// An `int` (bools count as 0/1, as everywhere in the ABI); an integer past int64 (an
/// `ffi.BigInt`) is a ValueError, not a wrong type.
pub fn int_arg(v: &AnyView<'_>, func: &str, arg: &str) -> Result<i64> {
    v.as_i64().ok_or_else(|| match v.type_key().as_str() {
        "ffi.BigInt" => Error::value_error(format!(
            "{func}: argument `{arg}` is an integer that does not fit in int64"
        )),
        _ => expected(func, arg, "int", v),
    })
}

/// An opaque pointer (`void*`, type index 4); None is NULL.
pub fn ptr_arg(v: &AnyView<'_>, func: &str, arg: &str) -> Result<*mut c_void> {
    v.as_opaque_ptr()
        .ok_or_else(|| expected(func, arg, "void* (opaque pointer)", v))
}

/// A shape or permutation: an `ffi.Shape`, or an `ffi.Array` of ints.
pub fn dims_arg(v: &AnyView<'_>, func: &str, arg: &str) -> Result<Vec<i64>> {
    if let Some(s) = v.as_object_of::<anyffi::ShapeObj>() {
        return Ok(s.as_slice().to_vec());
    }
    if let Some(a) = v.as_object_of::<anyffi::array::ArrayObj>() {
        return a
            .iter()
            .enumerate()
            .map(|(i, x)| {
                x.as_i64()
                    .filter(|_| x.type_index() == anyffi::abi::kTVMFFIInt)
                    .ok_or_else(|| match x.type_key().as_str() {
                        "ffi.BigInt" => Error::value_error(format!(
                            "{func}: argument `{arg}`: element {i} of the Array does not fit in \
                             int64"
                        )),
                        key => Error::type_error(format!(
                            "{func}: argument `{arg}`: element {i} of the Array must be an int, \
                             got {key}"
                        )),
                    })
            })
            .collect();
    }
    Err(expected(func, arg, "ffi.Shape or an Array of ints", v))
}

/// A `DataType` value or a dtype string (`"float32"`, `"bfloat16"`, ...).
pub fn dtype_arg(v: &AnyView<'_>, func: &str, arg: &str) -> Result<DLDataType> {
    if let Some(t) = v.as_dtype() {
        return Ok(t);
    }
    if let Some(s) = v.as_str() {
        return anyffi::dtype::parse_dtype(s).map_err(|e| {
            Error::new(
                e.kind(),
                format!("{func}: argument `{arg}`: {}", e.message()),
            )
        });
    }
    Err(expected(func, arg, "DataType or dtype string", v))
}

/// `float32`-style name of a dtype for messages (`code:bits x lanes` for the unusual ones).
pub fn dtype_name(t: DLDataType) -> String {
    let base = match t.code {
        kDLInt => format!("int{}", t.bits),
        kDLUInt => format!("uint{}", t.bits),
        kDLFloat => format!("float{}", t.bits),
        kDLBfloat => format!("bfloat{}", t.bits),
        kDLBool => "bool".into(),
        5 => format!("complex{}", t.bits), // kDLComplex: no dtype string names it
        // float8_e4m3fn, handle, ... (custom codes are not asked for a name: messages do not
        // call user functions)
        c => match anyffi::dtype::try_dtype_to_string(DLDataType { lanes: 1, ..t }) {
            Ok(name) if c < 129 => name,
            _ => format!("dtype(code {c}, bits {})", t.bits),
        },
    };
    if t.lanes == 1 {
        base
    } else {
        format!("{base}x{}", t.lanes)
    }
}

/// An `ffi.Tensor` object (a borrowed `DLTensor*` cannot keep its storage alive, so functions
/// returning views of their argument take only objects).
pub fn tensor_arg(v: &AnyView<'_>, func: &str, arg: &str) -> Result<Tensor> {
    if let Some(t) = v.as_object_of::<TensorObj>() {
        return Ok(t);
    }
    let what = if v.type_index() == anyffi::abi::kTVMFFIDLTensorPtr {
        "ffi.Tensor (a borrowed DLTensor* cannot keep the storage of a view alive)"
    } else {
        "ffi.Tensor"
    };
    Err(expected(func, arg, what, v))
}

/// An `ffi.Tensor` object or a borrowed `DLTensor*` view.
pub fn dltensor_arg(v: &AnyView<'_>, func: &str, arg: &str) -> Result<*mut DLTensor> {
    v.as_dltensor_ptr()
        .ok_or_else(|| expected(func, arg, "ffi.Tensor or DLTensor*", v))
}

/// Refuses argument `arg`, which a function writes into, when it is an `ffi.Tensor` over
/// read-only memory (imported from a DLPack producer that flagged it read-only, or a view of
/// one: `TensorObj::is_read_only`). A borrowed `DLTensor*` carries no such flag.
pub fn check_writable(v: &AnyView<'_>, func: &str, arg: &str) -> Result<()> {
    match v.as_object_ref_of::<TensorObj>() {
        Some(t) if t.is_read_only() => Err(Error::value_error(format!(
            "{func}: output `{arg}` is read-only memory (its DLPack producer exported it \
             read-only); write into a copy"
        ))),
        _ => Ok(()),
    }
}

/// Prefixes `func: ` to an error message that does not name the function yet.
pub(crate) fn in_fn(func: &str, e: Error) -> Error {
    if e.message().starts_with(func) {
        e
    } else {
        Error::new(e.kind(), format!("{func}: {}", e.message()))
    }
}

/// Registers the packed function `name` with `doc`; errors raised inside name the function.
/// `doc` starts with the signature, `name(arg: Type, ...) -> Type: what it does`, from which the
/// type schema of its metadata is made, as for the library's typed functions.
pub(crate) fn def<F>(name: &'static str, doc: &str, f: F) -> Result<()>
where
    F: Fn(&[AnyView<'_>]) -> Result<Any> + Send + Sync + 'static,
{
    let function = Function::from_packed(move |args| f(args).map_err(|e| in_fn(name, e)));
    let schema = doc_schema(doc).unwrap_or_else(|| "{\"type\":\"ffi.Function\"}".into());
    let entry = GlobalEntry {
        function,
        doc: doc.into(),
        metadata: anyffi_registry::global::metadata_json(&schema),
        flags: anyffi::abi::kTVMFFIFieldFlagBitMaskIsStaticMethod,
    };
    register_global(name, entry, false)
}

/// The type schema of the signature that starts `doc` (`f(a: Device, b: void*) -> int: ...`);
/// `A|B` is a Variant. None when `doc` has no signature.
fn doc_schema(doc: &str) -> Option<String> {
    let open = doc.find('(')?;
    let close = open + doc[open..].find(") -> ")?;
    let ret = doc[close + 5..].split(':').next()?.trim();
    let one = |a: &str| match a.trim() {
        "str" => "ffi.String".to_string(),
        "Tensor" => "ffi.Tensor".to_string(),
        a => a.to_string(),
    };
    let ty = |t: &str| {
        let t = t.trim();
        if t.contains('|') {
            let alts: Vec<String> = t.split('|').map(one).collect();
            format!("Variant<{}>", alts.join(", "))
        } else {
            one(t)
        }
    };
    let params = doc[open + 1..close].trim();
    let mut types = Vec::new();
    // split at the commas outside <...> (`m: Map<str, int>` is one parameter)
    let (mut depth, mut start) = (0i32, 0usize);
    for (i, c) in params.char_indices().chain([(params.len(), ',')]) {
        match c {
            '<' => depth += 1,
            '>' => depth -= 1,
            ',' if depth == 0 && !params.is_empty() => {
                types.push(ty(params[start..i].split_once(':')?.1));
                start = i + 1;
            }
            _ => {}
        }
    }
    let types: Vec<&str> = types.iter().map(String::as_str).collect();
    Some(anyffi_registry::global::function_schema(&types, &ty(ret)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use anyffi::Shape;

    #[test]
    fn signatures_in_docs_become_type_schemas() {
        assert_eq!(
            doc_schema("free_device(device: Device, ptr: void*) -> None: releases memory").unwrap(),
            "{\"type\":\"ffi.Function\",\"named_args\":{\"return\":[{\"type\":\"None\"}],\
             \"params\":[{\"type\":\"Device\"},{\"type\":\"void*\"}]}}"
        );
        assert_eq!(
            doc_schema("get_device() -> Device: the current device").unwrap(),
            "{\"type\":\"ffi.Function\",\"named_args\":{\"return\":[{\"type\":\"Device\"}],\
             \"params\":[]}}"
        );
        assert!(doc_schema("copy_(dst: Tensor|DLTensor*, src: DataType|str) -> None: x")
            .unwrap()
            .contains(
                "{\"type\":\"Variant\",\"args\":[{\"type\":\"ffi.Tensor\"},{\"type\":\"DLTensor*\"}]},\
                 {\"type\":\"Variant\",\"args\":[{\"type\":\"DataType\"},{\"type\":\"ffi.String\"}]}"
            ));
        assert!(doc_schema("no signature here").is_none());
        // commas inside <...> do not split parameters; bare str/Tensor are the object types
        let s = doc_schema("f(m: Map<str, int>, t: Tensor) -> str: x").unwrap();
        assert!(
            s.contains("\"params\":[{\"type\":\"ffi.Map\",\"args\":[{\"type\":\"ffi.String\"},{\"type\":\"int\"}]},{\"type\":\"ffi.Tensor\"}]"),
            "{s}"
        );
        assert!(s.contains("\"return\":[{\"type\":\"ffi.String\"}]"), "{s}");
    }

    #[test]
    fn converters_name_function_and_argument() {
        let s = Any::from("not a shape at all");
        let e = dims_arg(&s.as_view(), "runtime.view", "shape").unwrap_err();
        assert_eq!(e.kind(), "TypeError");
        assert_eq!(
            e.message(),
            "runtime.view: argument `shape` expected ffi.Shape or an Array of ints, got ffi.String"
        );
        let shape = Shape::new(&[2, 3]);
        assert_eq!(
            dims_arg(&AnyView::from(&shape), "f", "a").unwrap(),
            vec![2, 3]
        );
        assert_eq!(
            dtype_arg(&Any::from("float32").as_view(), "f", "d").unwrap(),
            DLDataType {
                code: 2,
                bits: 32,
                lanes: 1
            }
        );
        assert_eq!(
            dtype_arg(&Any::from("int64").as_view(), "f", "d")
                .unwrap()
                .bits,
            64
        );
        assert_eq!(
            dtype_arg(&Any::from("flaot32").as_view(), "f", "d")
                .unwrap_err()
                .kind(),
            "ValueError"
        );
        assert_eq!(
            ptr_arg(&AnyView::NONE, "f", "p").unwrap(),
            std::ptr::null_mut()
        );
        assert_eq!(
            ptr_arg(&AnyView::from(3i64), "f", "p").unwrap_err().kind(),
            "TypeError"
        );
    }
}
