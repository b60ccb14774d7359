//! `ffi.ReprPrint` (spec §8): the text `repr()` shows for every value — Python-style literals for
//! scalars and strings, `(a, b)` / `[a, b]` / `{k: v}` for containers, `Shape(1, 2)`,
//! `float32[2, 3]@cpu:0` for tensors, `<MISSING>` / `<KWARGS>`, `Type.name` for enums,
//! `__ffi_repr__` hooks, and `type_key(field=value, ...)` for reflected objects.
//!
//! Rationale: object graphs can be deep or cyclic, so the walk keeps an explicit stack instead of
//! recursing, prints an object it is still inside of as `...`, and prints an object met again
//! from its cached text. A hook receives a `fn_repr` callback that re-enters the same printer
//! (sharing its cycle state) for as long as the hook runs, and a fresh printer afterwards.
//! `TVM_FFI_REPR_WITH_ADDR=1` appends object addresses, as in the official library.

use crate::structural::WalkRef;
use std::cell::RefCell;
use std::ffi::c_char;
use std::fmt::Write;
use std::sync::Arc;

use crate::abi::*;
use crate::any::{Any, AnyView};
use crate::array::ArrayObj;
use crate::bigint::BigIntObj;
use crate::builtin_types::ENUM_INDEX;
use crate::error::{Error, Result};
use crate::function::{call_raw, Function};
use crate::list::ListObj;
use crate::map::{DictObj, MapObj};
use crate::reflection::{all_fields, type_info, type_key};
use crate::sentinel;
use crate::shape::ShapeObj;
use crate::type_table;

/// `repr` of a value.
pub fn repr_print(value: AnyView<'_>) -> Result<String> {
    let owned = value.to_owned()?;
    let show_addr = std::env::var("TVM_FFI_REPR_WITH_ADDR").is_ok_and(|v| v == "1");
    Printer::new(show_addr).repr(&owned)
}

enum Visit {
    InProgress,
    /// Printed by a frame: bytes `start..end` of arena `arena`.
    Range {
        arena: usize,
        start: usize,
        end: usize,
    },
    /// Printed as one piece (a hook's result, an enum).
    Text(String),
}

enum Kind {
    Array,
    List,
    Map,
    Object { names: Vec<String> },
}

/// An object whose members are being printed. Its text grows in place at the end of its arena
/// from `start` on, so a parent never copies its members' text (a string per object made
/// printing a value nested n deep take O(n^2) time and memory).
struct Frame {
    kind: Kind,
    obj: *mut TVMFFIObject,
    ti: i32,
    children: Vec<Any>,
    next: usize,
    start: usize,
}

struct Printer {
    show_addr: bool,
    state: RefCell<crate::structural::PtrMap<usize, Visit>>,
    stack: RefCell<Vec<Frame>>,
    /// Objects whose `__ffi_repr__` hooks are running (innermost last), this printer's and
    /// those of the printer it was seeded from (see `seeded`).
    hooks: RefCell<Vec<usize>>,
    /// One text buffer per `repr` call on this printer (a hook's `fn_repr` calls it while an
    /// outer frame is open in another buffer); kept to the end, as `state` points into them.
    arenas: RefCell<Vec<String>>,
}

fn addr(obj: *mut TVMFFIObject) -> String {
    format!("0x{:x}", obj as usize)
}

fn is_container(ti: i32) -> bool {
    matches!(ti, kTVMFFIArray | kTVMFFIList | kTVMFFIMap | kTVMFFIDict)
}

/// C++ `ostream << double` (six significant digits, `%g`).
pub fn format_float(x: f64) -> String {
    let mut buf = [0u8; 64];
    // SAFETY: a bounded write into a local buffer with a NUL-terminated format.
    let n = unsafe {
        libc::snprintf(
            buf.as_mut_ptr() as *mut c_char,
            buf.len(),
            c"%g".as_ptr(),
            x,
        )
    };
    String::from_utf8_lossy(&buf[..(n.max(0) as usize).min(buf.len() - 1)]).into_owned()
}

/// The bytes of a string value (SmallStr or `ffi.String`), whatever their encoding.
fn str_bytes<'a>(v: &'a AnyView<'_>) -> &'a [u8] {
    // SAFETY: a string value owned by the caller; inline bytes live in `v`.
    unsafe { crate::string::raw_any_bytes(v.raw()) }.unwrap_or_default()
}

/// Device names as the official printer spells them.
fn device_text(d: DLDevice) -> String {
    let name = crate::device::device_type_name(d.device_type).unwrap_or("unknown");
    format!("{name}:{}", d.device_id)
}

/// A Python-style quoted string: `\n`, `\t`, `\r`, `\\`, `\"`, `\xNN` for other control
/// bytes and invalid UTF-8, `\uXXXX` / `\UXXXXXXXX` for non-ASCII code points, and terminal
/// colour sequences kept readable as `\x1b[...m`.
pub fn escape_str(data: &[u8]) -> String {
    let mut out = String::with_capacity(data.len() + 2);
    out.push('"');
    let n = data.len();
    let mut i = 0;
    while i < n {
        let c = data[i];
        let d = if i + 1 < n { data[i + 1] } else { 0 };
        if c == 0x1b && d == b'[' {
            let mut j = i + 2;
            while j < n && (data[j].is_ascii_digit() || data[j] == b';') {
                j += 1;
            }
            if j < n && (data[j] == b'm' || data[j] == b'K') {
                out.push_str("\\x1b[");
                out.push_str(&String::from_utf8_lossy(&data[i + 2..=j]));
                i = j + 1;
                continue;
            }
        }
        match c {
            b'\n' => out.push_str("\\n"),
            b'\t' => out.push_str("\\t"),
            b'\r' => out.push_str("\\r"),
            b'\\' => out.push_str("\\\\"),
            b'"' => out.push_str("\\\""),
            c if c < 0x20 || c == 0x7f => {
                let _ = write!(out, "\\x{c:02x}");
            }
            c if c < 0x80 => out.push(c as char),
            _ => {
                let cont = |k: usize| i + k < n && data[i + k] & 0xC0 == 0x80;
                if c & 0xE0 == 0xC0 && cont(1) {
                    let cp = ((c as u32 & 0x1F) << 6) | (d as u32 & 0x3F);
                    let _ = write!(out, "\\u{cp:04x}");
                    i += 2;
                    continue;
                }
                if c & 0xF0 == 0xE0 && i + 2 < n && cont(1) && cont(2) {
                    let cp = ((c as u32 & 0x0F) << 12)
                        | ((d as u32 & 0x3F) << 6)
                        | (data[i + 2] as u32 & 0x3F);
                    let _ = write!(out, "\\u{cp:04x}");
                    i += 3;
                    continue;
                }
                if c & 0xF8 == 0xF0 && i + 3 < n && cont(1) && cont(2) && cont(3) {
                    let cp = ((c as u32 & 0x07) << 18)
                        | ((d as u32 & 0x3F) << 12)
                        | ((data[i + 2] as u32 & 0x3F) << 6)
                        | (data[i + 3] as u32 & 0x3F);
                    let _ = write!(out, "\\U{cp:08x}");
                    i += 4;
                    continue;
                }
                let _ = write!(out, "\\x{c:02x}");
            }
        }
        i += 1;
    }
    out.push('"');
    out
}

/// `b"..."` with printable ASCII kept and every other byte as `\xNN`.
pub fn escape_bytes(data: &[u8]) -> String {
    let mut out = String::from("b\"");
    for &c in data {
        if (32..127).contains(&c) && c != b'"' && c != b'\\' {
            out.push(c as char);
        } else {
            let _ = write!(out, "\\x{c:02x}");
        }
    }
    out.push('"');
    out
}

/// Decimal text of two's-complement little-endian words.
pub fn bigint_decimal(words: &[i64]) -> String {
    let negative = words.last().is_some_and(|&w| w < 0);
    // Magnitude as 32-bit limbs, least significant first.
    let mut limbs: Vec<u32> = Vec::with_capacity(words.len() * 2);
    let mut carry = 1u64;
    for &w in words {
        let mut u = w as u64;
        if negative {
            let (v, c) = (!u).overflowing_add(carry);
            u = v;
            carry = u64::from(c);
        }
        limbs.push(u as u32);
        limbs.push((u >> 32) as u32);
    }
    if limbs.is_empty() {
        // no words: zero (the division loop below needs at least one limb to terminate)
        limbs.push(0);
    }
    while limbs.len() > 1 && *limbs.last().unwrap() == 0 {
        limbs.pop();
    }
    let mut digits = Vec::new();
    loop {
        let mut rem = 0u64;
        for limb in limbs.iter_mut().rev() {
            let cur = (rem << 32) | *limb as u64;
            *limb = (cur / 1_000_000_000) as u32;
            rem = cur % 1_000_000_000;
        }
        while limbs.len() > 1 && *limbs.last().unwrap() == 0 {
            limbs.pop();
        }
        let done = limbs.len() == 1 && limbs[0] == 0;
        let chunk = rem.to_string();
        digits.push(if done { chunk } else { format!("{chunk:0>9}") });
        if done {
            break;
        }
    }
    let mut s = String::new();
    if negative {
        s.push('-');
    }
    for d in digits.iter().rev() {
        s.push_str(d);
    }
    s
}

impl Printer {
    fn new(show_addr: bool) -> Printer {
        Printer {
            show_addr,
            state: RefCell::new(Default::default()),
            stack: RefCell::new(Vec::new()),
            arenas: RefCell::new(Vec::new()),
            hooks: RefCell::new(Vec::new()),
        }
    }

    /// The printer a hook's `fn_repr` makes when called on another thread than the printer it
    /// came from: the objects whose hooks are running there are in progress here too, so that
    /// a hook printing itself through another thread meets its own object (`...`), as the one
    /// printer of the official library does, rather than starting over without end.
    fn seeded(show_addr: bool, hooks: Vec<usize>) -> Printer {
        let p = Printer::new(show_addr);
        p.state
            .borrow_mut()
            .extend(hooks.iter().map(|&o| (o, Visit::InProgress)));
        *p.hooks.borrow_mut() = hooks;
        p
    }

    /// The repr of one owned value.
    fn repr(&self, v: &Any) -> Result<String> {
        if let Some(s) = self.immediate(v)? {
            return Ok(s);
        }
        let arena = {
            let mut arenas = self.arenas.borrow_mut();
            arenas.push(String::new());
            arenas.len() - 1
        };
        let saved = std::mem::take(&mut *self.stack.borrow_mut());
        let r = self
            .push_frame(v, arena)
            .and_then(|()| self.run_loop(arena));
        *self.stack.borrow_mut() = saved;
        r
    }

    fn append(&self, arena: usize, text: &str) {
        self.arenas.borrow_mut()[arena].push_str(text);
    }

    fn run_loop(&self, arena: usize) -> Result<String> {
        loop {
            let next = {
                let mut st = self.stack.borrow_mut();
                let f = st.last_mut().expect("a frame is on the stack");
                if f.next < f.children.len() {
                    let i = f.next;
                    f.next += 1;
                    let sep = match &f.kind {
                        Kind::Array | Kind::List => if i == 0 { "" } else { ", " }.to_string(),
                        Kind::Map if i % 2 == 1 => ": ".to_string(),
                        Kind::Map => if i == 0 { "" } else { ", " }.to_string(),
                        Kind::Object { names } => {
                            format!("{}{}=", if i == 0 { "" } else { ", " }, names[i])
                        }
                    };
                    Some((f.children[i].clone(), sep))
                } else {
                    None
                }
            };
            match next {
                Some((child, sep)) => {
                    self.append(arena, &sep);
                    match self.immediate(&child)? {
                        Some(s) => self.append(arena, &s),
                        None => self.push_frame(&child, arena)?,
                    }
                }
                None => {
                    let f = self.stack.borrow_mut().pop().unwrap();
                    let start = f.start;
                    self.finish(f, arena);
                    if self.stack.borrow().is_empty() {
                        return Ok(self.arenas.borrow()[arena][start..].to_string());
                    }
                }
            }
        }
    }

    /// Opens a frame for `v`, writing its opening text.
    fn push_frame(&self, v: &Any, arena: usize) -> Result<()> {
        let obj = v.as_view().as_object_ptr().expect("frames hold objects");
        // SAFETY: a live object held by `v`.
        let ti = unsafe { (*obj).type_index };
        self.state
            .borrow_mut()
            .insert(obj as usize, Visit::InProgress);
        let view = v.as_view();
        let (kind, children, open) = match ti {
            kTVMFFIArray => {
                let a = view.as_object_of::<ArrayObj>().expect("an ffi.Array");
                let children = a.iter().map(|e| e.to_owned()).collect::<Result<_>>()?;
                (Kind::Array, children, "(".to_string())
            }
            kTVMFFIList => {
                let l = view.as_object_of::<ListObj>().expect("an ffi.List");
                (Kind::List, l.to_vec(), "[".to_string())
            }
            kTVMFFIMap => {
                let m = view.as_object_of::<MapObj>().expect("an ffi.Map");
                let kv = m.to_vec().into_iter().flat_map(|(k, v)| [k, v]).collect();
                (Kind::Map, kv, "{".to_string())
            }
            kTVMFFIDict => {
                let m = view.as_object_of::<DictObj>().expect("an ffi.Dict");
                let kv = m.to_vec().into_iter().flat_map(|(k, v)| [k, v]).collect();
                (Kind::Map, kv, "{".to_string())
            }
            _ => {
                let info = type_info(ti)?;
                let mut header = type_key(info).to_string();
                if self.show_addr {
                    header = format!("{header}@{}", addr(obj));
                }
                let mut names = Vec::new();
                let mut children = Vec::new();
                for f in all_fields(info) {
                    // A field a subclass declares again under the same name prints once.
                    if f.flags() & kTVMFFIFieldFlagBitMaskReprOff != 0
                        || names.iter().any(|n: &String| n == f.name())
                    {
                        continue;
                    }
                    // SAFETY: `obj` is a live instance of a type that has this field.
                    children.push(unsafe { f.get(obj) }?);
                    names.push(f.name().to_string());
                }
                if !children.is_empty() {
                    header.push('(');
                }
                (Kind::Object { names }, children, header)
            }
        };
        let start = self.arenas.borrow()[arena].len();
        self.append(arena, &open);
        self.stack.borrow_mut().push(Frame {
            kind,
            obj,
            ti,
            children,
            next: 0,
            start,
        });
        Ok(())
    }

    /// Closes a frame: its closing text, and where its text lies for later meetings.
    fn finish(&self, f: Frame, arena: usize) {
        let close = match f.kind {
            Kind::Array if f.children.len() == 1 => ",)",
            Kind::Array => ")",
            Kind::List => "]",
            Kind::Map => "}",
            Kind::Object { .. } if f.children.is_empty() => "",
            Kind::Object { .. } => ")",
        };
        self.append(arena, close);
        if self.show_addr && is_container(f.ti) {
            self.append(arena, &format!("@{}", addr(f.obj)));
        }
        let end = self.arenas.borrow()[arena].len();
        self.state.borrow_mut().insert(
            f.obj as usize,
            Visit::Range {
                arena,
                start: f.start,
                end,
            },
        );
    }

    /// The text of a value that needs no frame, or `None`.
    fn immediate(&self, v: &Any) -> Result<Option<String>> {
        let view = v.as_view();
        let ti = view.type_index();
        let text = match ti {
            kTVMFFINone => "None".into(),
            kTVMFFIBool => if view.as_bool() == Some(true) {
                "True"
            } else {
                "False"
            }
            .into(),
            kTVMFFIInt => view.as_i64().unwrap_or_default().to_string(),
            kTVMFFIFloat => format_float(view.as_f64().unwrap_or_default()),
            kTVMFFIDataType => crate::dtype::dtype_to_string(view.as_dtype().unwrap()),
            kTVMFFIDevice => device_text(view.as_device().unwrap()),
            kTVMFFISmallStr => escape_str(str_bytes(&view)),
            kTVMFFISmallBytes => escape_bytes(view.as_bytes().unwrap_or_default()),
            ti if ti < kTVMFFIStaticObjectBegin => type_table::type_key_of(ti),
            _ => return self.immediate_object(v),
        };
        Ok(Some(text))
    }

    fn immediate_object(&self, v: &Any) -> Result<Option<String>> {
        let view = v.as_view();
        let Some(obj) = view.as_object_ptr().filter(|p| !p.is_null()) else {
            return Ok(Some("None".into()));
        };
        match self.state.borrow().get(&(obj as usize)) {
            Some(Visit::Text(s)) => return Ok(Some(s.clone())),
            Some(&Visit::Range { arena, start, end }) => {
                return Ok(Some(self.arenas.borrow()[arena][start..end].to_string()))
            }
            Some(Visit::InProgress) => {
                return Ok(Some(if self.show_addr {
                    format!("...@{}", addr(obj))
                } else {
                    "...".into()
                }))
            }
            None => {}
        }
        if obj == sentinel::missing().as_raw() {
            return Ok(Some("<MISSING>".into()));
        }
        if obj == sentinel::kwargs().as_raw() {
            return Ok(Some("<KWARGS>".into()));
        }
        // SAFETY: a live object held by `v`.
        let ti = unsafe { (*obj).type_index };
        let at = || {
            if self.show_addr {
                format!("@{}", addr(obj))
            } else {
                String::new()
            }
        };
        match ti {
            kTVMFFIBigInt => {
                let b = view.as_object_of::<BigIntObj>().expect("an ffi.BigInt");
                return Ok(Some(bigint_decimal(b.words())));
            }
            kTVMFFIStr => return Ok(Some(escape_str(str_bytes(&view)))),
            kTVMFFIBytes => return Ok(Some(escape_bytes(view.as_bytes().unwrap_or_default()))),
            kTVMFFITensor => {
                // SAFETY: every tensor carries its DLTensor right after the header.
                let t = unsafe { &*((obj as *const u8).add(24) as *const DLTensor) };
                let n = t.ndim.max(0) as usize;
                let shape: &[i64] = if n == 0 || t.shape.is_null() {
                    &[]
                } else {
                    // SAFETY: `ndim` dimensions, kept alive by the tensor.
                    unsafe { std::slice::from_raw_parts(t.shape, n) }
                };
                let dims: Vec<String> = shape.iter().map(i64::to_string).collect();
                return Ok(Some(format!(
                    "{}[{}]@{}{}",
                    crate::dtype::dtype_to_string(t.dtype),
                    dims.join(", "),
                    device_text(t.device),
                    at()
                )));
            }
            kTVMFFIShape => {
                let s = view.as_object_of::<ShapeObj>().expect("an ffi.Shape");
                let dims: Vec<String> = s.as_slice().iter().map(i64::to_string).collect();
                return Ok(Some(format!("Shape({})", dims.join(", "))));
            }
            _ => {}
        }
        if let Some(hook) = type_table::attr_value("__ffi_repr__", ti) {
            if hook.type_index == kTVMFFIFunction {
                self.state
                    .borrow_mut()
                    .insert(obj as usize, Visit::InProgress);
                let mut s = self.call_hook(hook, v)?;
                if self.show_addr && is_container(ti) {
                    s.push_str(&at());
                }
                self.state
                    .borrow_mut()
                    .insert(obj as usize, Visit::Text(s.clone()));
                return Ok(Some(s));
            }
        }
        if type_table::is_instance_of(ti, ENUM_INDEX) {
            // SAFETY: enum objects keep their String cell at offset 32.
            let cell =
                unsafe { AnyView::from_raw(*((obj as *const u8).add(32) as *const TVMFFIAny)) };
            let name = String::from_utf8_lossy(str_bytes(&cell));
            let s = format!("{}.{name}{}", type_table::type_key_of(ti), at());
            self.state
                .borrow_mut()
                .insert(obj as usize, Visit::Text(s.clone()));
            return Ok(Some(s));
        }
        Ok(None)
    }

    /// Calls a `__ffi_repr__` hook with a `fn_repr` that re-enters this printer.
    fn call_hook(&self, hook: TVMFFIAny, v: &Any) -> Result<String> {
        // the printer, re-entered while the hook runs on this thread (`call_hook` keeps it
        // alive and holds none of its cells borrowed across the hook); a fresh one otherwise
        let slot = Arc::new(WalkRef::new(self));
        let inner = slot.clone();
        let show_addr = self.show_addr;
        self.hooks
            .borrow_mut()
            .push(v.as_view().as_object_ptr().map_or(0, |p| p as usize));
        let hooks = self.hooks.borrow().clone();
        let fn_repr =
            Function::from_typed("ffi.ReprPrint.fn_repr", move |x: Any| match inner.live() {
                Some(p) => p.repr(&x),
                // another thread while the hook runs; after it, a printer of its own
                None if inner.running() => Printer::seeded(show_addr, hooks.clone()).repr(&x),
                None => Printer::new(show_addr).repr(&x),
            });
        let args = [*v.raw(), *AnyView::from(&fn_repr).raw()];
        // SAFETY: the column keeps the hook alive; `v` and `fn_repr` outlive the call.
        let r = unsafe { call_raw(hook.value.v_obj, args.as_ptr(), 2) };
        slot.clear();
        self.hooks.borrow_mut().pop();
        let r = r?;
        r.get::<String>().map_err(|_| {
            Error::type_error(format!(
                "__ffi_repr__ must return a str, got {}",
                r.as_view().type_key()
            ))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::array::Array;
    use crate::builtin_types::access_path::{extend, AccessPathObj, AccessStepObj};
    use crate::list::List;

    fn r(v: Any) -> String {
        repr_print(v.as_view()).unwrap()
    }

    #[test]
    fn literals() {
        assert_eq!(format_float(1.5), "1.5");
        assert_eq!(format_float(1e20), "1e+20");
        assert_eq!(format_float(f64::NAN), "nan");
        assert_eq!(format_float(-f64::INFINITY), "-inf");
        assert_eq!(
            escape_str(b"a\"\\\n\x1b[31mx"),
            "\"a\\\"\\\\\\n\\x1b[31mx\""
        );
        assert_eq!(escape_str("é😀".as_bytes()), "\"\\u00e9\\U0001f600\"");
        assert_eq!(escape_str(b"\xff"), "\"\\xff\"");
        assert_eq!(escape_bytes(b"a\x00\""), "b\"a\\x00\\x22\"");
        assert_eq!(bigint_decimal(&[0, 1]), "18446744073709551616");
        assert_eq!(bigint_decimal(&[0, -1]), "-18446744073709551616");
        assert_eq!(bigint_decimal(&[i64::MIN, 0]), "9223372036854775808");
        assert_eq!(bigint_decimal(&[1_000_000_000, 0]), "1000000000");
    }

    #[test]
    fn containers_cycles_and_paths() {
        assert_eq!(r(Any::from(Array::from_vec(vec![Any::from(1i64)]))), "(1,)");
        let l = List::new();
        l.push(Any::from(l.clone()));
        assert_eq!(r(Any::from(l.clone())), "[...]");
        l.clear();
        let root = AccessPathObj::root();
        let p = extend(&root, AccessStepObj::new(0, Any::from("a")));
        let p = extend(&p, AccessStepObj::new(2, Any::from("k")));
        assert_eq!(r(Any::from(p)), "<root>.a[\"k\"]");
        assert_eq!(r(Any::from(crate::sentinel::missing())), "<MISSING>");
    }
}
