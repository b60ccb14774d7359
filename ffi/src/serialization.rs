//! The JSON object graph of `ffi.ToJSONGraph` / `ffi.FromJSONGraph` (spec §8, Serialization):
//! `{"root_index": i, "nodes": [...], "metadata": m?}` where each node is
//! `{"type": <type key>, "data": ...}` and references other nodes by index, so shared values are
//! written once. POD values, strings (bytes as base64), containers, shapes, enums (by index),
//! objects with `__data_to_json__` / `__data_from_json__` hooks and reflected objects (field by
//! field, POD fields inline) are covered, exactly as the official library writes and reads them.
//!
//! Rationale: both directions run on an explicit stack. Writing marks every container and object
//! on the current path (the official writer detects self-containing Lists and Dicts; an object
//! containing itself would otherwise never finish); reading marks the nodes being decoded, so a
//! graph whose nodes refer to themselves is an error instead of endless recursion.

use crate::abi::*;
use crate::any::{Any, AnyView};
use crate::array::Array;
use crate::error::{Error, Result};
use crate::function::{mismatch_type_key, Function};
use crate::hash::{any_equal, any_hash};
use crate::list::List;
use crate::map::{Dict, Map};
use crate::string::{raw_any_bytes, BytesObj, StrObj};
use crate::structural::{field_name, fields_of, get_field, map_items, seq_items, PtrMap};
use crate::type_table::{self, type_key_of};

/// Attribute column of custom object-to-JSON conversions.
pub const DATA_TO_JSON_ATTR: &str = "__data_to_json__";
/// Attribute column of custom JSON-to-object conversions.
pub const DATA_FROM_JSON_ATTR: &str = "__data_from_json__";
/// Attribute column of enum states.
const ENUM_ATTR: &str = "__ffi_enum__";

/// How an object type is written: an integer-indexed enum, a string-indexed enum, or neither.
#[derive(PartialEq)]
enum EnumKind {
    Int,
    Str,
    No,
}

fn enum_kind(ti: i32) -> EnumKind {
    let is = |key: &str| {
        type_table::key_to_index(key).is_some_and(|e| type_table::is_instance_of(ti, e))
    };
    if is("ffi.IntEnum") {
        EnumKind::Int
    } else if is("ffi.Enum") {
        EnumKind::Str
    } else {
        EnumKind::No
    }
}

fn cannot_convert(v: &AnyView<'_>, to: &str) -> Error {
    Error::type_error(format!(
        "Cannot convert from type `{}` to `{to}`",
        mismatch_type_key(v)
    ))
}

fn s(text: &str) -> Any {
    Any::from(text)
}

/// A String value of arbitrary bytes.
fn bytes_str(b: &[u8]) -> Any {
    // SAFETY: `any_from` returns a fresh owned value.
    unsafe { Any::from_raw(StrObj::any_from(b)) }
}

fn obj_ptr(v: &Any) -> *mut TVMFFIObject {
    // SAFETY: callers pass object values only.
    unsafe { v.raw().value.v_obj }
}

// ---------------------------------------------------------------------------------------------
// Base64 (the alphabet with `+` and `/`, `=` padding)
// ---------------------------------------------------------------------------------------------

const B64: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/// Base64 text of `bytes`.
pub fn base64_encode(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for c in bytes.chunks(3) {
        let b = [c[0], *c.get(1).unwrap_or(&0), *c.get(2).unwrap_or(&0)];
        let v = (b[0] as u32) << 16 | (b[1] as u32) << 8 | b[2] as u32;
        out.push(B64[(v >> 18) as usize & 63] as char);
        out.push(B64[(v >> 12) as usize & 63] as char);
        out.push(if c.len() > 1 {
            B64[(v >> 6) as usize & 63] as char
        } else {
            '='
        });
        out.push(if c.len() > 2 {
            B64[v as usize & 63] as char
        } else {
            '='
        });
    }
    out
}

/// The bytes of base64 text. A length that is not a multiple of 4 fails the official internal
/// check (same kind and text); a character outside the alphabet reads as zero bits, as the
/// official decoder's table does.
pub fn base64_decode(text: &[u8]) -> Result<Vec<u8>> {
    if text.len() % 4 != 0 {
        return Err(Error::internal(
            "Check failed: (bytes.size % 4 == 0) is false: invalid base64 encoding",
        ));
    }
    let digit = |c: u8| -> u32 {
        match c {
            b'A'..=b'Z' => (c - b'A') as u32,
            b'a'..=b'z' => (c - b'a' + 26) as u32,
            b'0'..=b'9' => (c - b'0' + 52) as u32,
            b'+' => 62,
            b'/' => 63,
            _ => 0,
        }
    };
    let mut out = Vec::with_capacity(text.len() / 4 * 3);
    for q in text.chunks(4) {
        let v = digit(q[0]) << 18 | digit(q[1]) << 12 | digit(q[2]) << 6 | digit(q[3]);
        out.push((v >> 16) as u8);
        if q[2] != b'=' {
            out.push((v >> 8) as u8);
        }
        if q[3] != b'=' {
            out.push(v as u8);
        }
    }
    Ok(out)
}

// ---------------------------------------------------------------------------------------------
// Reflection helpers
// ---------------------------------------------------------------------------------------------

/// Whether objects of `ti` can be created empty (a native creator or an `__ffi_new__` Function).
fn has_creator(ti: i32) -> bool {
    let native = crate::structural::metadata_of(ti).is_some_and(|m| m.creator.is_some());
    native
        || type_table::attr_value("__ffi_new__", ti)
            .is_some_and(|v| v.type_index == kTVMFFIFunction)
}

/// The registered enum singleton of class `ti` with integer or string index `index`.
fn enum_by_index(ti: i32, index: &Any) -> Result<Any> {
    let missing = || {
        let shown = match index.as_view().as_str() {
            Some(s) => s.to_owned(),
            None => index.as_view().as_i64().unwrap_or_default().to_string(),
        };
        Error::value_error(format!(
            "Enum `{}` has no instance with index {shown}",
            type_key_of(ti)
        ))
    };
    let Some(state) = type_table::attr_value(ENUM_ATTR, ti) else {
        return Err(missing());
    };
    if state.type_index < kTVMFFIStaticObjectBegin {
        return Err(missing());
    }
    // SAFETY: an EnumState keeps its `indexes` Dict at offset 32.
    let indexes =
        unsafe { *((state.value.v_obj as *const u8).add(32) as *const *mut TVMFFIObject) };
    if indexes.is_null() {
        return Err(missing());
    }
    // SAFETY: a live Dict held by the live state.
    match unsafe { crate::structural::map_get(indexes, index) }? {
        Some(v) if v.type_index() >= kTVMFFIStaticObjectBegin => Ok(v),
        _ => Err(missing()),
    }
}

// ---------------------------------------------------------------------------------------------
// Writing
// ---------------------------------------------------------------------------------------------

/// The JSON graph of `value`, with `metadata` attached unless it is None.
pub fn to_json_graph(value: &Any, metadata: &Any) -> Result<Map> {
    let mut w = GraphWriter {
        nodes: Vec::new(),
        index: PtrMap::default(),
        active: PtrMap::default(),
    };
    let root = w.run(value)?;
    let mut pairs = vec![
        (s("root_index"), Any::from(root)),
        (s("nodes"), Any::from(Array::from_vec(w.nodes))),
    ];
    if !metadata.as_view().is_none() {
        pairs.push((s("metadata"), metadata.clone()));
    }
    Map::from_pairs(pairs)
}

struct GraphWriter {
    nodes: Vec<Any>,
    /// AnyHash -> (value, node index) (AnyEqual within a bucket).
    index: PtrMap<u64, Vec<(Any, i64)>>,
    /// The containers and objects on the current path, with how often each is on it.
    active: PtrMap<usize, u32>,
}

/// A node under construction whose children are being written.
struct WriteFrame {
    value: Any,
    type_key: String,
    body: FrameBody,
    /// Key of the active-path entry.
    active: usize,
}

enum FrameBody {
    /// Array/List elements or Map/Dict keys and values (flattened), then their indices.
    Seq {
        items: Vec<Any>,
        next: usize,
        data: Vec<Any>,
    },
    /// Reflected fields, then the data object.
    Fields {
        fields: Vec<crate::reflection::FieldRef>,
        next: usize,
        data: Vec<(Any, Any)>,
    },
}

enum Visit {
    Index(i64),
    Open(WriteFrame),
}

impl GraphWriter {
    fn lookup(&self, v: &Any) -> Result<Option<i64>> {
        // SAFETY: the values are stored in, or borrowed from, live objects.
        let h = unsafe { any_hash(v.raw()) }?;
        if let Some(bucket) = self.index.get(&h) {
            for (k, i) in bucket {
                // SAFETY: the values are stored in, or borrowed from, live objects.
                if unsafe { any_equal(k.raw(), v.raw()) }? {
                    return Ok(Some(*i));
                }
            }
        }
        Ok(None)
    }

    fn add_node(&mut self, v: &Any, node: Map) -> Result<i64> {
        let i = self.nodes.len() as i64;
        self.nodes.push(Any::from(node));
        // SAFETY: the values are stored in, or borrowed from, live objects.
        let h = unsafe { any_hash(v.raw()) }?;
        self.index.entry(h).or_default().push((v.clone(), i));
        Ok(i)
    }

    fn leaf(&mut self, v: &Any, type_key: &str, data: Option<Any>) -> Result<Visit> {
        let mut pairs = vec![(s("type"), s(type_key))];
        if let Some(d) = data {
            pairs.push((s("data"), d));
        }
        Ok(Visit::Index(self.add_node(v, Map::from_pairs(pairs)?)?))
    }

    fn run(&mut self, root: &Any) -> Result<i64> {
        let mut stack: Vec<WriteFrame> = Vec::new();
        let mut done = match self.visit(root)? {
            Visit::Index(i) => return Ok(i),
            Visit::Open(f) => {
                stack.push(f);
                None
            }
        };
        loop {
            let top = stack.last_mut().expect("a frame is open");
            if let Some(i) = done.take() {
                match &mut top.body {
                    FrameBody::Seq { data, .. } => data.push(Any::from(i)),
                    FrameBody::Fields { fields, next, data } => {
                        data.push((s(&field_name(fields[*next - 1])), Any::from(i)));
                    }
                }
            }
            match self.next_child(top)? {
                Some(child) => match self.visit(&child)? {
                    Visit::Index(i) => done = Some(i),
                    Visit::Open(f) => stack.push(f),
                },
                None => {
                    let f = stack.pop().expect("a frame is open");
                    self.leave(f.active);
                    let data = match f.body {
                        FrameBody::Seq { data, .. } => Any::from(Array::from_vec(data)),
                        FrameBody::Fields { data, .. } => Any::from(Map::from_pairs(data)?),
                    };
                    let node = Map::from_pairs([(s("type"), s(&f.type_key)), (s("data"), data)])?;
                    let i = self.add_node(&f.value, node)?;
                    if stack.is_empty() {
                        return Ok(i);
                    }
                    done = Some(i);
                }
            }
        }
    }

    /// The next value of `f` that needs a node; inline fields are written on the way.
    fn next_child(&mut self, f: &mut WriteFrame) -> Result<Option<Any>> {
        match &mut f.body {
            FrameBody::Seq { items, next, .. } => {
                if *next < items.len() {
                    *next += 1;
                    return Ok(Some(std::mem::take(&mut items[*next - 1])));
                }
                Ok(None)
            }
            FrameBody::Fields { fields, next, data } => {
                while *next < fields.len() {
                    let field = fields[*next];
                    *next += 1;
                    // SAFETY: the object is live and its type has this field.
                    let value = unsafe { get_field(obj_ptr(&f.value), field) }?;
                    let name = s(&field_name(field));
                    let view = value.as_view();
                    let inline = match field.info().field_static_type_index {
                        kTVMFFINone => Some(Any::none()),
                        kTVMFFIBool => Some(Any::from(view.as_bool().unwrap_or(false))),
                        kTVMFFIInt => Some(Any::from(view.as_i64().unwrap_or(0))),
                        kTVMFFIFloat => Some(Any::from(view.as_f64().unwrap_or(0.0))),
                        kTVMFFIDataType => Some(s(&crate::dtype::dtype_to_string(
                            view.as_dtype().unwrap_or(DLDataType {
                                code: 0,
                                bits: 0,
                                lanes: 0,
                            }),
                        ))),
                        _ => None,
                    };
                    match inline {
                        Some(d) => data.push((name, d)),
                        None => return Ok(Some(value)),
                    }
                }
                Ok(None)
            }
        }
    }

    /// Puts `v` on the path; a cycle error (`message`) when it is on it already. Lists and
    /// Dicts are checked at once; Arrays, Maps and objects may be on the path twice (raising
    /// the third time): the official writer checks only Lists and Dicts, so a cycle through
    /// one of them is reported as the List's or the Dict's, one loop later, as there. (A cycle
    /// through neither makes the official writer recurse until the stack overflows.)
    fn enter(&mut self, v: &Any, message: impl FnOnce() -> String) -> Result<usize> {
        let p = obj_ptr(v) as usize;
        let allowed = match v.type_index() {
            kTVMFFIList | kTVMFFIDict => 1,
            _ => 2,
        };
        let on_path = self.active.entry(p).or_insert(0);
        if *on_path >= allowed {
            return Err(Error::value_error(message()));
        }
        *on_path += 1;
        Ok(p)
    }

    /// Takes one occurrence of the frame's value off the path.
    fn leave(&mut self, p: usize) {
        if let Some(n) = self.active.get_mut(&p) {
            *n -= 1;
            if *n == 0 {
                self.active.remove(&p);
            }
        }
    }

    fn visit(&mut self, v: &Any) -> Result<Visit> {
        if let Some(i) = self.lookup(v)? {
            return Ok(Visit::Index(i));
        }
        let view = v.as_view();
        let ti = v.type_index();
        match ti {
            kTVMFFINone => self.leaf(v, "None", None),
            kTVMFFIBool => self.leaf(v, "bool", Some(Any::from(view.as_bool().unwrap_or(false)))),
            kTVMFFIInt => self.leaf(v, "int", Some(v.clone())),
            kTVMFFIFloat => self.leaf(v, "float", Some(v.clone())),
            kTVMFFIDataType => {
                let text = crate::dtype::try_dtype_to_string(view.as_dtype().expect("a dtype"))?;
                self.leaf(v, "DataType", Some(s(&text)))
            }
            kTVMFFIDevice => {
                let d = view.as_device().expect("a device");
                let data = Array::from_vec(vec![
                    Any::from(d.device_type as i64),
                    Any::from(d.device_id as i64),
                ]);
                self.leaf(v, "Device", Some(Any::from(data)))
            }
            kTVMFFISmallStr | kTVMFFIStr => {
                // SAFETY: a live string value.
                let b = unsafe { raw_any_bytes(v.raw()) }.unwrap_or_default();
                self.leaf(v, "ffi.String", Some(bytes_str(b)))
            }
            kTVMFFISmallBytes | kTVMFFIBytes => {
                // SAFETY: a live bytes value.
                let b = unsafe { raw_any_bytes(v.raw()) }.unwrap_or_default();
                self.leaf(v, "ffi.Bytes", Some(s(&base64_encode(b))))
            }
            kTVMFFIShape => {
                let shape = v.get::<crate::shape::Shape>()?;
                let dims = shape.as_slice().iter().map(|&d| Any::from(d)).collect();
                self.leaf(v, "ffi.Shape", Some(Any::from(Array::from_vec(dims))))
            }
            kTVMFFIArray | kTVMFFIList | kTVMFFIMap | kTVMFFIDict => {
                let (key, what) = match ti {
                    kTVMFFIArray => ("ffi.Array", "an Array"),
                    kTVMFFIList => ("ffi.List", "a List"),
                    kTVMFFIMap => ("ffi.Map", "a Map"),
                    _ => ("ffi.Dict", "a Dict"),
                };
                let active = self.enter(v, || {
                    format!("Cycle detected during serialization: {what} contains itself")
                })?;
                let obj = obj_ptr(v);
                let items = if ti == kTVMFFIArray || ti == kTVMFFIList {
                    // SAFETY: a live sequence.
                    unsafe { seq_items(obj) }
                } else {
                    // SAFETY: a live map.
                    unsafe { map_items(obj) }
                        .into_iter()
                        .flat_map(|(k, val)| [k, val])
                        .collect()
                };
                Ok(Visit::Open(WriteFrame {
                    value: v.clone(),
                    type_key: key.to_owned(),
                    body: FrameBody::Seq {
                        data: Vec::with_capacity(items.len()),
                        items,
                        next: 0,
                    },
                    active,
                }))
            }
            _ if ti >= kTVMFFIStaticObjectBegin => self.visit_object(v),
            _ => Err(Error::runtime_error(format!(
                "Cannot serialize type `{}`",
                view.type_key()
            ))),
        }
    }

    fn visit_object(&mut self, v: &Any) -> Result<Visit> {
        let obj = obj_ptr(v);
        // SAFETY: a live object.
        let ti = unsafe { (*obj).type_index };
        let key = type_key_of(ti);
        let kind = enum_kind(ti);
        if kind != EnumKind::No {
            // SAFETY: every enum keeps `_int_index` (int64) at 24 and `_str_index` at 32.
            let data = unsafe {
                if kind == EnumKind::Int {
                    Any::from(*((obj as *const u8).add(24) as *const i64))
                } else {
                    Any::copy_from_raw_view(&*((obj as *const u8).add(32) as *const TVMFFIAny))?
                }
            };
            return self.leaf(v, &key, Some(data));
        }
        if let Some(hook) = crate::structural::attr_function(DATA_TO_JSON_ATTR, ti)? {
            let data = hook.call(&[v.as_view()])?;
            return self.leaf(v, &key, Some(data));
        }
        if !has_creator(ti) {
            return Err(Error::type_error(format!(
                "Type `{key}` does not support ToJSONGraph (no native creator or __ffi_new__ type attr)"
            )));
        }
        let active = self.enter(v, || {
            format!(
                "Cycle detected during serialization: an object of type `{key}` contains itself"
            )
        })?;
        Ok(Visit::Open(WriteFrame {
            value: v.clone(),
            type_key: key.clone(),
            body: FrameBody::Fields {
                fields: fields_of(ti),
                next: 0,
                data: Vec::new(),
            },
            active,
        }))
    }
}

// ---------------------------------------------------------------------------------------------
// Reading
// ---------------------------------------------------------------------------------------------

fn invalid(what: impl std::fmt::Display) -> Error {
    Error::value_error(format!("Invalid JSON Object Graph{what}"))
}

/// The value a JSON graph describes.
pub fn from_json_graph(graph: AnyView<'_>) -> Result<Any> {
    let Some(top) = graph.as_object_of::<crate::map::MapObj>() else {
        return Err(invalid(", expected an object"));
    };
    let root = match top.get_str("root_index")? {
        // (an int only: the official reader refuses `true`, unlike the indices inside nodes)
        Some(v) if v.type_index() == kTVMFFIInt => v.as_i64().unwrap_or(0),
        _ => return Err(invalid(", expected `root_index` integer field")),
    };
    let nodes: Vec<Any> = match top.get_str("nodes")? {
        Some(v) if v.type_index() == kTVMFFIArray => v
            .as_object_of::<crate::array::ArrayObj>()
            .expect("an Array")
            .to_vec(),
        Some(v) if v.type_index() == kTVMFFIList => v
            .as_object_of::<crate::list::ListObj>()
            .expect("a List")
            .to_vec(),
        _ => return Err(invalid(", expected `nodes` array field")),
    };
    GraphReader {
        decoded: vec![None; nodes.len()],
        in_progress: vec![false; nodes.len()],
        nodes,
        type_keys: Default::default(),
    }
    .run(root)
}

struct GraphReader {
    nodes: Vec<Any>,
    decoded: Vec<Option<Any>>,
    in_progress: Vec<bool>,
    /// Type keys seen, and their indices.
    type_keys: std::collections::HashMap<Vec<u8>, i32>,
}

/// A node whose children are being decoded.
struct ReadFrame {
    node: usize,
    body: ReadBody,
}

enum ReadBody {
    /// Array, List, Map or Dict: child node indices, then the decoded children.
    Container {
        ti: i32,
        children: Vec<i64>,
        next: usize,
        values: Vec<Any>,
    },
    /// A reflected object being filled field by field.
    Object {
        obj: Any,
        fields: Vec<crate::reflection::FieldRef>,
        next: usize,
        data: Map,
    },
}

enum Decoded {
    Value(Any),
    Open(ReadFrame),
}

/// Casts a JSON value to an int index or field value as the official `cast<int64_t>` does.
fn json_int(v: &AnyView<'_>) -> Result<i64> {
    match v.type_index() {
        kTVMFFIInt | kTVMFFIBool => Ok(v.as_i64().unwrap_or(0)),
        _ => Err(cannot_convert(v, "int")),
    }
}

fn json_str(v: &AnyView<'_>) -> Result<Vec<u8>> {
    match v.type_index() {
        // SAFETY: a live string value.
        kTVMFFISmallStr | kTVMFFIStr => Ok(unsafe { raw_any_bytes(v.raw()) }
            .unwrap_or_default()
            .to_vec()),
        _ => Err(cannot_convert(v, "str")),
    }
}

fn json_array(v: &AnyView<'_>, want: &str) -> Result<Vec<Any>> {
    match v.type_index() {
        kTVMFFIArray => Ok(v
            .as_object_of::<crate::array::ArrayObj>()
            .expect("an Array")
            .to_vec()),
        kTVMFFIList => Ok(v
            .as_object_of::<crate::list::ListObj>()
            .expect("a List")
            .to_vec()),
        _ => Err(cannot_convert(v, want)),
    }
}

/// An `Array<int>` (the official message names the first offending element).
fn json_ints(v: &AnyView<'_>, want: &str) -> Result<Vec<i64>> {
    json_array(v, want)?
        .iter()
        .enumerate()
        .map(|(i, x)| match x.type_index() {
            kTVMFFIInt | kTVMFFIBool => Ok(x.as_view().as_i64().unwrap_or(0)),
            _ => Err(Error::type_error(format!(
                "Cannot convert from type `Array[index {i}: {}]` to `{want}`",
                mismatch_type_key(&x.as_view())
            ))),
        })
        .collect()
}

fn dtype_of(v: &AnyView<'_>) -> Result<Any> {
    let text = json_str(v)?;
    crate::dtype::parse_dtype_bytes(&text).map(Any::from)
}

impl GraphReader {
    fn check_index(&self, i: i64) -> Result<usize> {
        if i < 0 || i >= self.nodes.len() as i64 {
            return Err(invalid(format!(": invalid node index {i}")));
        }
        Ok(i as usize)
    }

    fn run(mut self, root: i64) -> Result<Any> {
        let mut stack: Vec<ReadFrame> = Vec::new();
        let mut done = match self.get_or_open(root)? {
            Decoded::Value(v) => return Ok(v),
            Decoded::Open(f) => {
                stack.push(f);
                None
            }
        };
        loop {
            let top = stack.last_mut().expect("a frame is open");
            if let Some(v) = done.take() {
                Self::accept(top, v)?;
            }
            match self.next_child(top)? {
                Some(i) => match self.get_or_open(i)? {
                    Decoded::Value(v) => done = Some(v),
                    Decoded::Open(f) => stack.push(f),
                },
                None => {
                    let f = stack.pop().expect("a frame is open");
                    let v = Self::finish(f.body)?;
                    self.in_progress[f.node] = false;
                    self.decoded[f.node] = Some(v.clone());
                    if stack.is_empty() {
                        return Ok(v);
                    }
                    done = Some(v);
                }
            }
        }
    }

    /// A decoded child handed to its parent.
    fn accept(f: &mut ReadFrame, v: Any) -> Result<()> {
        match &mut f.body {
            ReadBody::Container { values, .. } => values.push(v),
            ReadBody::Object {
                obj, fields, next, ..
            } => {
                let field = fields[*next - 1];
                // SAFETY: a live object of the field's type; a valid view.
                unsafe { field.set(obj_ptr(obj), v.raw()) }?
            }
        }
        Ok(())
    }

    /// The next child node to decode; inline object fields are set on the way.
    fn next_child(&mut self, f: &mut ReadFrame) -> Result<Option<i64>> {
        match &mut f.body {
            ReadBody::Container { children, next, .. } => {
                if *next < children.len() {
                    *next += 1;
                    return Ok(Some(children[*next - 1]));
                }
                Ok(None)
            }
            ReadBody::Object {
                obj,
                fields,
                next,
                data,
            } => {
                while *next < fields.len() {
                    let field = fields[*next];
                    *next += 1;
                    let name = field_name(field);
                    let Some(value) = data.get_str(&name)? else {
                        if field.flags() & kTVMFFIFieldFlagBitMaskHasDefault != 0 {
                            // SAFETY: a live object of the field's type.
                            unsafe { field.set_default(obj_ptr(obj)) }?;
                            continue;
                        }
                        return Err(Error::type_error(format!(
                            "Required field `{name}` not set in type `{}`",
                            obj.as_view().type_key()
                        )));
                    };
                    let inline = match field.info().field_static_type_index {
                        kTVMFFINone => Some(Any::none()),
                        kTVMFFIBool => Some(Any::from(match value.type_index() {
                            kTVMFFIBool | kTVMFFIInt => value.as_i64().unwrap_or(0) != 0,
                            _ => return Err(cannot_convert(&value, "bool")),
                        })),
                        kTVMFFIInt => Some(Any::from(json_int(&value)?)),
                        kTVMFFIFloat => Some(Any::from(match value.type_index() {
                            kTVMFFIFloat | kTVMFFIInt | kTVMFFIBool => {
                                value.as_f64().unwrap_or(0.0)
                            }
                            _ => return Err(cannot_convert(&value, "float")),
                        })),
                        kTVMFFIDataType => Some(dtype_of(&value)?),
                        _ => None,
                    };
                    match inline {
                        // SAFETY: a live object of the field's type; a valid view.
                        Some(v) => unsafe { field.set(obj_ptr(obj), v.raw()) }?,
                        None => return Ok(Some(json_int(&value)?)),
                    }
                }
                Ok(None)
            }
        }
    }

    fn finish(body: ReadBody) -> Result<Any> {
        match body {
            ReadBody::Container { ti, values, .. } => Ok(match ti {
                kTVMFFIArray => Any::from(Array::from_vec(values)),
                kTVMFFIList => Any::from(List::from_vec(values)),
                // (decoded value first: see `get_or_open`)
                kTVMFFIMap => {
                    let mut it = values.into_iter();
                    let mut pairs = Vec::new();
                    while let (Some(v), Some(k)) = (it.next(), it.next()) {
                        pairs.push((k, v));
                    }
                    Any::from(Map::from_pairs(pairs)?)
                }
                _ => {
                    let d = Dict::new();
                    let mut it = values.into_iter();
                    while let (Some(v), Some(k)) = (it.next(), it.next()) {
                        d.insert(k, v)?;
                    }
                    Any::from(d)
                }
            }),
            ReadBody::Object { obj, .. } => Ok(obj),
        }
    }

    fn get_or_open(&mut self, index: i64) -> Result<Decoded> {
        let i = self.check_index(index)?;
        if let Some(v) = &self.decoded[i] {
            return Ok(Decoded::Value(v.clone()));
        }
        if self.in_progress[i] {
            return Err(invalid(format!(": node {i} refers to itself")));
        }
        let node = self.nodes[i].clone();
        let Some(node) = node.as_view().as_object_of::<crate::map::MapObj>() else {
            return Err(cannot_convert(&node.as_view(), "Map<Any, Any>"));
        };
        let ty = node
            .get_str("type")?
            .ok_or_else(|| Error::key_error("key is not in Map"))?;
        let type_key: &[u8] = match ty.type_index() {
            // SAFETY: a live string value, borrowed while `node` holds it.
            kTVMFFISmallStr | kTVMFFIStr => unsafe { raw_any_bytes(ty.raw()) }.unwrap_or_default(),
            _ => return Err(cannot_convert(&ty, "str")),
        };
        let data = || -> Result<AnyView<'_>> {
            node.get_str("data")?
                .ok_or_else(|| Error::key_error("key is not in Map"))
        };
        // Type keys repeat from node to node: each is looked up in the (locked) global table once.
        let ti = match self.type_keys.get(type_key) {
            Some(&ti) => ti,
            None => {
                let key_text = String::from_utf8_lossy(type_key).into_owned();
                // The official lookup fails an internal check for an unknown key; same kind and
                // text.
                let ti = type_table::key_to_index(&key_text).ok_or_else(|| {
                    Error::internal(format!(
                        "Check failed: (it != type_key2index_.end()) is false: Cannot find type `{key_text}`"
                    ))
                })?;
                self.type_keys.insert(type_key.to_vec(), ti);
                ti
            }
        };
        let value = match ti {
            kTVMFFINone => Any::none(),
            kTVMFFIBool => {
                let d = data()?;
                match d.type_index() {
                    kTVMFFIBool | kTVMFFIInt => Any::from(d.as_i64().unwrap_or(0) != 0),
                    _ => return Err(cannot_convert(&d, "bool")),
                }
            }
            kTVMFFIInt => Any::from(json_int(&data()?)?),
            kTVMFFIFloat => {
                let d = data()?;
                match d.type_index() {
                    kTVMFFIFloat | kTVMFFIInt | kTVMFFIBool => Any::from(d.as_f64().unwrap_or(0.0)),
                    _ => return Err(cannot_convert(&d, "float")),
                }
            }
            kTVMFFIDataType => dtype_of(&data()?)?,
            kTVMFFIDevice => {
                let d = json_ints(&data()?, "Array<int>")?;
                if d.len() != 2 {
                    return Err(invalid(format!(
                        ": Device data must be an array of [device_type, device_id], got {} element(s)",
                        d.len()
                    )));
                }
                let (Ok(device_type), Ok(device_id)) = (i32::try_from(d[0]), i32::try_from(d[1]))
                else {
                    return Err(invalid(format!(
                        ": Device data [{}, {}] does not fit int32",
                        d[0], d[1]
                    )));
                };
                Any::from(DLDevice {
                    device_type,
                    device_id,
                })
            }
            kTVMFFIStr => bytes_str(&json_str(&data()?)?),
            kTVMFFIBytes => {
                let b = base64_decode(&json_str(&data()?)?)?;
                // SAFETY: `any_from` returns a fresh owned value.
                unsafe { Any::from_raw(BytesObj::any_from(&b)) }
            }
            kTVMFFIShape => {
                let dims = json_ints(&data()?, "Array<int>")?;
                Any::from(crate::shape::Shape::new(&dims))
            }
            kTVMFFIArray | kTVMFFIList | kTVMFFIMap | kTVMFFIDict => {
                let children: Vec<i64> = json_array(&data()?, "Array<Any>")?
                    .iter()
                    .map(|x| json_int(&x.as_view()))
                    .collect::<Result<_>>()?;
                if (ti == kTVMFFIMap || ti == kTVMFFIDict) && children.len() % 2 != 0 {
                    return Err(invalid(format!(
                        ": Map/Dict data must contain an even number of [key, value] entries, got {}",
                        children.len()
                    )));
                }
                // A pair's value is decoded before its key, as the official reader does (which
                // error wins when both are bad): children go value first, `finish` swaps back.
                let mut children = children;
                if ti == kTVMFFIMap || ti == kTVMFFIDict {
                    for pair in children.chunks_exact_mut(2) {
                        pair.swap(0, 1);
                    }
                }
                self.in_progress[i] = true;
                return Ok(Decoded::Open(ReadFrame {
                    node: i,
                    body: ReadBody::Container {
                        ti,
                        values: Vec::with_capacity(children.len()),
                        children,
                        next: 0,
                    },
                }));
            }
            _ => {
                let d = data()?;
                let kind = enum_kind(ti);
                if kind == EnumKind::Int {
                    enum_by_index(ti, &Any::from(json_int(&d)?))?
                } else if kind == EnumKind::Str {
                    enum_by_index(ti, &bytes_str(&json_str(&d)?))?
                } else if let Some(hook) =
                    crate::structural::attr_function(DATA_FROM_JSON_ATTR, ti)?
                {
                    hook.call(&[d])?
                } else {
                    let obj = Any::from(crate::reflection::create_empty_object(ti)?);
                    let Some(data) = d.as_object_of::<crate::map::MapObj>() else {
                        return Err(cannot_convert(&d, "Map<Any, Any>"));
                    };
                    self.in_progress[i] = true;
                    return Ok(Decoded::Open(ReadFrame {
                        node: i,
                        body: ReadBody::Object {
                            obj,
                            fields: fields_of(ti),
                            next: 0,
                            data,
                        },
                    }));
                }
            }
        };
        self.decoded[i] = Some(value.clone());
        Ok(Decoded::Value(value))
    }
}

/// `__data_to_json__` / `__data_from_json__` of `ffi.BigInt`: decimal text.
pub fn bigint_json_hooks() -> (Function, Function) {
    let to = Function::from_packed(|args: &[AnyView<'_>]| -> Result<Any> {
        let b = args
            .first()
            .and_then(|v| v.as_object_of::<crate::bigint::BigIntObj>())
            .ok_or_else(|| {
                Error::type_error("ffi.BigInt.__data_to_json__: expected an ffi.BigInt")
            })?;
        Ok(s(&crate::repr::bigint_decimal(b.words())))
    });
    let from = Function::from_packed(|args: &[AnyView<'_>]| -> Result<Any> {
        let text = match args.first() {
            Some(v) if matches!(v.type_index(), kTVMFFISmallStr | kTVMFFIStr) => json_str(v)?,
            Some(v) => {
                return Err(Error::type_error(format!(
                    "Cannot treat type `{}` as type `str`",
                    mismatch_type_key(v)
                )))
            }
            None => Vec::new(),
        };
        crate::bigint::from_decimal(&text)
            .ok_or_else(|| Error::value_error("Invalid decimal string for ffi.BigInt"))
    });
    (to, from)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// (recorded on the official library)
    #[test]
    fn root_index_must_be_an_int_and_pair_values_decode_first() {
        let read = |text: &str| {
            let g = crate::json::parse(text.as_bytes()).unwrap();
            from_json_graph(g.as_view())
        };
        let e = read(r#"{"root_index":true,"nodes":[{"type":"int","data":5}]}"#).unwrap_err();
        assert_eq!(e.kind(), "ValueError");
        assert!(e.message().contains("expected `root_index` integer field"));
        for kind in ["ffi.Map", "ffi.Dict"] {
            let text = format!(
                r#"{{"root_index":2,"nodes":[{{"type":"int","data":1.5}},{{"type":"float","data":"x"}},{{"type":"{kind}","data":[0,1]}}]}}"#
            );
            let e = read(&text).unwrap_err();
            assert_eq!(
                e.message(),
                "Cannot convert from type `ffi.SmallStr` to `float`",
                "{kind}: the value's error wins"
            );
        }
        let m = read(r#"{"root_index":4,"nodes":[{"type":"int","data":1},{"type":"int","data":2},{"type":"int","data":3},{"type":"int","data":4},{"type":"ffi.Map","data":[0,1,2,3,0,3]}]}"#)
            .unwrap()
            .get::<Map>()
            .unwrap();
        let pairs: Vec<(i64, i64)> = m
            .to_vec()
            .iter()
            .map(|(k, v)| (k.get::<i64>().unwrap(), v.get::<i64>().unwrap()))
            .collect();
        assert_eq!(pairs, vec![(1, 4), (3, 4)]);
    }

    #[test]
    fn base64() {
        for (raw, text) in [
            (&b""[..], ""),
            (b"f", "Zg=="),
            (b"fo", "Zm8="),
            (b"foo", "Zm9v"),
            (b"bytes", "Ynl0ZXM="),
        ] {
            assert_eq!(base64_encode(raw), text);
            assert_eq!(base64_decode(text.as_bytes()).unwrap(), raw);
        }
        assert!(base64_decode(b"abc").is_err());
    }

    fn graph(v: Any) -> String {
        let g = to_json_graph(&v, &Any::none()).unwrap();
        String::from_utf8(crate::json::stringify(Any::from(g).as_view(), 0).unwrap()).unwrap()
    }

    #[test]
    fn official_text() {
        let v = Any::from(crate::array::array_of([1i64, 2, 3]));
        assert_eq!(
            graph(v),
            r#"{"root_index":3,"nodes":[{"type":"int","data":1},{"type":"int","data":2},{"type":"int","data":3},{"type":"ffi.Array","data":[0,1,2]}]}"#
        );
        assert_eq!(
            graph(Any::from(&b"bytes"[..])),
            r#"{"root_index":0,"nodes":[{"type":"ffi.Bytes","data":"Ynl0ZXM="}]}"#
        );
    }

    #[test]
    fn self_referencing_nodes_are_errors() {
        let text = br#"{"root_index":0,"nodes":[{"type":"ffi.Array","data":[0]}]}"#;
        let g = crate::json::parse(text).unwrap();
        let e = from_json_graph(g.as_view()).unwrap_err();
        assert_eq!(e.kind(), "ValueError");
    }
}
