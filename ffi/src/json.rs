//! The JSON value model of `ffi.json.Parse` / `ffi.json.Stringify` (spec §8, Serialization):
//! null/true/false, int64 and double numbers (plus `NaN`, `Infinity`, `-Infinity`), strings,
//! `ffi.Array` for arrays and `ffi.Map` for objects, with the official number formats, escapes,
//! indentation and error messages (`<what>: line L column C (char P)`).
//!
//! Rationale: both directions keep their own stack of open containers instead of recursing, so
//! deeply nested input is limited by memory, never by the thread's stack. The number conversions
//! go through the C library's `strtoll`/`strtod`/`snprintf`, exactly the functions whose edge
//! cases (overflow to double, `ERANGE`, `%.17g`) define the official text.

use std::ffi::CStr;

use crate::abi::*;
use crate::any::{Any, AnyView};
use crate::array::{Array, ArrayObj};
use crate::error::{Error, Result};
use crate::list::ListObj;
use crate::map::{Map, MapObj};
use crate::string::{raw_any_bytes, Str, StrObj};

// ---------------------------------------------------------------------------------------------
// Parsing
// ---------------------------------------------------------------------------------------------

/// Parses `text` into a JSON value; malformed text is a ValueError with its position.
pub fn parse(text: &[u8]) -> Result<Any> {
    Parser::new(text).run().map_err(Error::value_error)
}

/// A container being parsed.
enum Open {
    Array(Vec<Any>),
    /// Finished pairs and the key whose value is being parsed.
    Object(Vec<(Any, Any)>, Any),
}

/// What the parser does after a failure: the message is already set, or the generic one
/// ("Syntax error near") applies at the current position.
struct Fail;

struct Parser<'a> {
    s: &'a [u8],
    cur: usize,
    line: i64,
    line_begin: usize,
    message: Option<String>,
}

impl<'a> Parser<'a> {
    fn new(s: &'a [u8]) -> Self {
        Parser {
            s,
            cur: 0,
            line: 1,
            line_begin: 0,
            message: None,
        }
    }

    #[inline]
    fn peek(&self) -> Option<u8> {
        self.s.get(self.cur).copied()
    }

    fn skip_spaces(&mut self) {
        while let Some(c) = self.peek() {
            if !matches!(c, b' ' | b'\t' | b'\n' | b'\r') {
                break;
            }
            if c == b'\n' {
                self.line += 1;
                self.line_begin = self.cur + 1;
            }
            self.cur += 1;
        }
    }

    /// Consumes `pattern` while it matches; whether all of it matched.
    fn match_literal(&mut self, pattern: &[u8]) -> bool {
        for &p in pattern {
            match self.peek() {
                Some(c) if c == p => self.cur += 1,
                Some(_) => {
                    // The mismatching character is consumed too, as the official matcher does.
                    self.cur += 1;
                    return false;
                }
                None => return false,
            }
        }
        true
    }

    /// Records `what` at the current position and fails.
    fn fail<T>(&mut self, what: &str) -> std::result::Result<T, Fail> {
        self.message = Some(self.context(what));
        Err(Fail)
    }

    /// Records `what` at `pos` (moving there) and fails.
    fn fail_at<T>(&mut self, pos: usize, what: &str) -> std::result::Result<T, Fail> {
        self.cur = pos;
        self.fail(what)
    }

    fn context(&self, what: &str) -> String {
        format!(
            "{what}: line {} column {} (char {})",
            self.line,
            self.cur as i64 - self.line_begin as i64 + 1,
            self.cur
        )
    }

    fn run(mut self) -> std::result::Result<Any, String> {
        match self.parse_document() {
            Ok(v) => Ok(v),
            Err(Fail) => Err(match self.message.take() {
                Some(m) => m,
                None => self.context("Syntax error near"),
            }),
        }
    }

    fn parse_document(&mut self) -> std::result::Result<Any, Fail> {
        let mut stack: Vec<Open> = Vec::new();
        'value: loop {
            // One value: a scalar, an empty container, or the opening of a container whose
            // first element (or key) is then parsed by the next round.
            self.skip_spaces();
            let start = self.cur;
            let mut value = match self.peek() {
                None => return self.fail("Expecting value"),
                Some(b'{') => {
                    self.cur += 1;
                    self.skip_spaces();
                    match self.peek() {
                        None => {
                            return self.fail("Expecting property name enclosed in double quotes")
                        }
                        Some(b'}') => {
                            self.cur += 1;
                            Any::from(Map::new())
                        }
                        Some(_) => {
                            let key = self.object_key()?;
                            stack.push(Open::Object(Vec::new(), key));
                            continue 'value;
                        }
                    }
                }
                Some(b'[') => {
                    self.cur += 1;
                    self.skip_spaces();
                    match self.peek() {
                        None => return self.fail("Expecting value"),
                        Some(b']') => {
                            self.cur += 1;
                            Any::from(Array::empty())
                        }
                        Some(_) => {
                            stack.push(Open::Array(Vec::new()));
                            continue 'value;
                        }
                    }
                }
                Some(b'"') => self.string()?,
                Some(c @ (b't' | b'f' | b'n')) => {
                    self.cur += 1;
                    let (rest, v): (&[u8], Any) = match c {
                        b't' => (b"rue", Any::from(true)),
                        b'f' => (b"alse", Any::from(false)),
                        _ => (b"ull", Any::none()),
                    };
                    if !self.match_literal(rest) {
                        return self.fail_at(start, "Expecting value");
                    }
                    v
                }
                Some(_) => self.number()?,
            };
            // Hand the finished value to the enclosing containers, closing those that end here.
            loop {
                match stack.last_mut() {
                    None => {
                        self.skip_spaces();
                        if self.peek().is_some() {
                            return self.fail("Extra data");
                        }
                        return Ok(value);
                    }
                    Some(Open::Array(items)) => {
                        items.push(value);
                        self.skip_spaces();
                        match self.peek() {
                            Some(b',') => {
                                self.cur += 1;
                                self.skip_spaces();
                                if self.peek().is_none() {
                                    return Err(Fail);
                                }
                                continue 'value;
                            }
                            Some(b']') => {
                                self.cur += 1;
                                let Some(Open::Array(items)) = stack.pop() else {
                                    unreachable!("the top of the stack is an array")
                                };
                                value = Any::from(Array::from_vec(items));
                            }
                            _ => return self.fail("Expecting ',' delimiter"),
                        }
                    }
                    Some(Open::Object(pairs, key)) => {
                        pairs.push((std::mem::take(key), value));
                        self.skip_spaces();
                        match self.peek() {
                            Some(b'}') => {
                                self.cur += 1;
                                let Some(Open::Object(pairs, _)) = stack.pop() else {
                                    unreachable!("the top of the stack is an object")
                                };
                                value = Any::from(map_from_pairs(pairs).map_err(|e| {
                                    self.message = Some(e.message().into_owned());
                                    Fail
                                })?);
                            }
                            Some(b',') => {
                                self.cur += 1;
                                self.skip_spaces();
                                if self.peek().is_none() {
                                    return Err(Fail);
                                }
                                let next = self.object_key()?;
                                if let Some(Open::Object(_, key)) = stack.last_mut() {
                                    *key = next;
                                }
                                continue 'value;
                            }
                            _ => return self.fail("Expecting ',' delimiter"),
                        }
                    }
                }
            }
        }
    }

    /// `"key" :` (the current character is not a space and not the end).
    fn object_key(&mut self) -> std::result::Result<Any, Fail> {
        if self.peek() != Some(b'"') {
            return self.fail("Expecting property name enclosed in double quotes");
        }
        let key = self.string()?;
        self.skip_spaces();
        if self.peek() != Some(b':') {
            return self.fail("Expecting ':' delimiter");
        }
        self.cur += 1;
        Ok(key)
    }

    /// A string starting at the current `"`. Strings without escapes keep the compact
    /// representation; escaped ones are heap strings, as the official parser makes them.
    fn string(&mut self) -> std::result::Result<Any, Fail> {
        let start = self.cur;
        self.cur += 1;
        while let Some(c) = self.peek() {
            if c == b'"' {
                let content = &self.s[start + 1..self.cur];
                self.cur += 1;
                return Ok(Any::from_raw_owned_value(StrObj::any_from(content)));
            }
            if c < b' ' || c == b'\\' {
                return self.string_with_escapes(start);
            }
            self.cur += 1;
        }
        self.fail_at(start, "Unterminated string starting at")
    }

    fn string_with_escapes(&mut self, start: usize) -> std::result::Result<Any, Fail> {
        let mut out: Vec<u8> = self.s[start + 1..self.cur].to_vec();
        while let Some(c) = self.peek() {
            if c < b' ' {
                return self.fail("Invalid control character at");
            }
            if c == b'"' {
                self.cur += 1;
                return Ok(Any::from(Str::from_content(&out)));
            }
            if c != b'\\' {
                out.push(c);
                self.cur += 1;
                continue;
            }
            self.cur += 1;
            let simple = match self.peek() {
                Some(b'"') => Some(b'"'),
                Some(b'\\') => Some(b'\\'),
                Some(b'/') => Some(b'/'),
                Some(b'b') => Some(0x08),
                Some(b'f') => Some(0x0c),
                Some(b'n') => Some(b'\n'),
                Some(b'r') => Some(b'\r'),
                Some(b't') => Some(b'\t'),
                Some(b'u') => None,
                _ => return self.fail("Invalid \\escape"),
            };
            if let Some(b) = simple {
                out.push(b);
                self.cur += 1;
                continue;
            }
            let escape_pos = self.cur;
            self.cur += 1;
            let Some(first) = self.hex4() else {
                return self.fail_at(escape_pos, "Invalid \\uXXXX escape");
            };
            let code_point = if (0xD800..=0xDFFF).contains(&first) {
                if first >= 0xDC00 || !self.match_literal(b"\\u") {
                    return self.fail_at(escape_pos, "Invalid surrogate pair of \\uXXXX escapes");
                }
                let second_pos = self.cur;
                let Some(second) = self.hex4() else {
                    return self.fail_at(second_pos, "Invalid \\uXXXX escape");
                };
                if !(0xDC00..=0xDFFF).contains(&second) {
                    return self.fail_at(second_pos, "Invalid surrogate pair of \\uXXXX escapes");
                }
                ((first - 0xD800) << 10) + (second - 0xDC00) + 0x10000
            } else {
                first
            };
            push_utf8(&mut out, code_point);
        }
        self.fail_at(start, "Unterminated string starting at")
    }

    /// Four hex digits; the position advances past every digit read.
    fn hex4(&mut self) -> Option<u32> {
        let mut v = 0u32;
        for _ in 0..4 {
            let d = (self.peek()? as char).to_digit(16)?;
            v = v * 16 + d;
            self.cur += 1;
        }
        Some(v)
    }

    fn number(&mut self) -> std::result::Result<Any, Fail> {
        let start = self.cur;
        let mut buf: Vec<u8> = Vec::new();
        let special = match self.peek() {
            Some(b'-') => {
                buf.push(b'-');
                self.cur += 1;
                (self.peek() == Some(b'I')).then_some((&b"Infinity"[..], f64::NEG_INFINITY))
            }
            Some(b'I') => Some((&b"Infinity"[..], f64::INFINITY)),
            Some(b'N') => Some((&b"NaN"[..], f64::NAN)),
            _ => None,
        };
        if let Some((word, v)) = special {
            if self.match_literal(word) {
                return Ok(Any::from(v));
            }
            return self.fail_at(start, "Expecting value");
        }
        let mut maybe_int = true;
        while let Some(c) = self.peek() {
            if !(c.is_ascii_digit() || matches!(c, b'e' | b'E' | b'+' | b'-' | b'.')) {
                break;
            }
            if matches!(c, b'.' | b'e' | b'E') {
                maybe_int = false;
            }
            buf.push(c);
            self.cur += 1;
        }
        if buf.is_empty() {
            return self.fail("Expecting value");
        }
        if maybe_int {
            if let Some(i) = c_strtoll(&buf) {
                return Ok(Any::from(i));
            }
        }
        match c_strtod(&buf) {
            Some(f) => Ok(Any::from(f)),
            None => self.fail_at(start, "Expecting value"),
        }
    }
}

fn push_utf8(out: &mut Vec<u8>, cp: u32) {
    if cp < 0x80 {
        out.push(cp as u8);
    } else if cp < 0x800 {
        out.push(0xC0 | (cp >> 6) as u8);
        out.push(0x80 | (cp & 0x3F) as u8);
    } else if cp < 0x10000 {
        out.push(0xE0 | (cp >> 12) as u8);
        out.push(0x80 | ((cp >> 6) & 0x3F) as u8);
        out.push(0x80 | (cp & 0x3F) as u8);
    } else {
        out.push(0xF0 | (cp >> 18) as u8);
        out.push(0x80 | ((cp >> 12) & 0x3F) as u8);
        out.push(0x80 | ((cp >> 6) & 0x3F) as u8);
        out.push(0x80 | (cp & 0x3F) as u8);
    }
}

/// A map built from every pair at once, as the official parser's `Map(first, last)`: with 4
/// or more pairs (repeated keys counted) a dense table, where a repeated key moves to the end.
fn map_from_pairs(pairs: Vec<(Any, Any)>) -> Result<Map> {
    Map::from_range(pairs)
}

fn errno_location() -> *mut libc::c_int {
    // SAFETY: always valid for the calling thread.
    unsafe { libc::__errno_location() }
}

/// `strtoll(buf, &end, 10)` accepting only a complete, in-range conversion.
fn c_strtoll(buf: &[u8]) -> Option<i64> {
    let mut z = buf.to_vec();
    z.push(0);
    let mut end: *mut libc::c_char = std::ptr::null_mut();
    // SAFETY: `z` is NUL-terminated; errno is thread-local.
    let v = unsafe {
        *errno_location() = 0;
        libc::strtoll(z.as_ptr() as *const libc::c_char, &mut end, 10)
    };
    // SAFETY: errno is thread-local.
    let ok = unsafe { *errno_location() } == 0 && end as usize == z.as_ptr() as usize + buf.len();
    ok.then_some(v)
}

/// `strtod(buf, &end)` accepting only a complete conversion without `ERANGE`.
fn c_strtod(buf: &[u8]) -> Option<f64> {
    let mut z = buf.to_vec();
    z.push(0);
    let mut end: *mut libc::c_char = std::ptr::null_mut();
    // SAFETY: `z` is NUL-terminated; errno is thread-local.
    let v = unsafe {
        *errno_location() = 0;
        libc::strtod(z.as_ptr() as *const libc::c_char, &mut end)
    };
    // SAFETY: errno is thread-local.
    let ok = unsafe { *errno_location() } == 0 && end as usize == z.as_ptr() as usize + buf.len();
    ok.then_some(v)
}

// ---------------------------------------------------------------------------------------------
// Writing
// ---------------------------------------------------------------------------------------------

/// Writes `value` as JSON text; `indent` spaces per level (0: compact).
pub fn stringify(value: AnyView<'_>, indent: i32) -> Result<Vec<u8>> {
    Writer {
        out: Vec::new(),
        indent: indent as i64,
        total: 0,
        active_lists: Default::default(),
    }
    .run(value)
}

/// The JSON text of a float, as the official writer prints it.
pub fn format_float(v: f64, out: &mut Vec<u8>) {
    if v.is_nan() {
        out.extend_from_slice(b"NaN");
    } else if v.is_infinite() {
        out.extend_from_slice(if v < 0.0 { b"-Infinity" } else { b"Infinity" });
    } else if v.abs() < (1u64 << 53) as f64 && v.fract() == 0.0 {
        // Integral values keep a ".0" so that they read back as floats.
        c_format(out, c"%.1f", v.trunc());
    } else {
        c_format(out, c"%.17g", v);
    }
}

fn c_format(out: &mut Vec<u8>, fmt: &CStr, v: f64) {
    let mut buf = [0u8; 64];
    // SAFETY: the buffer is large enough for any `%.1f` of |v| < 2^53 or `%.17g`; snprintf
    // truncates otherwise and NUL-terminates.
    let n = unsafe {
        libc::snprintf(
            buf.as_mut_ptr() as *mut libc::c_char,
            buf.len(),
            fmt.as_ptr(),
            v,
        )
    };
    let n = (n.max(0) as usize).min(buf.len() - 1);
    out.extend_from_slice(&buf[..n]);
}

/// A JSON string literal of `bytes` (escapes `"`, `\`, `/`, the named control characters,
/// other controls and DEL as `\u00xx`; every other byte as is).
pub fn escape_string(bytes: &[u8], out: &mut Vec<u8>) {
    out.push(b'"');
    for &b in bytes {
        match b {
            b'"' => out.extend_from_slice(b"\\\""),
            b'\\' => out.extend_from_slice(b"\\\\"),
            b'/' => out.extend_from_slice(b"\\/"),
            0x08 => out.extend_from_slice(b"\\b"),
            0x0c => out.extend_from_slice(b"\\f"),
            b'\n' => out.extend_from_slice(b"\\n"),
            b'\r' => out.extend_from_slice(b"\\r"),
            b'\t' => out.extend_from_slice(b"\\t"),
            b if b < 0x20 || b == 0x7f => {
                out.extend_from_slice(format!("\\u{:04x}", b).as_bytes());
            }
            b => out.push(b),
        }
    }
    out.push(b'"');
}

/// A container being written: owned copies of its entries and the position of the next one.
struct Frame {
    kind: FrameKind,
    items: Vec<(Option<Any>, Any)>,
    next: usize,
    list: Option<*mut TVMFFIObject>,
}

#[derive(Clone, Copy, PartialEq)]
enum FrameKind {
    Seq,
    Object,
}

struct Writer {
    out: Vec<u8>,
    indent: i64,
    total: i64,
    active_lists: crate::structural::PtrSet<usize>,
}

impl Writer {
    fn newline(&mut self) {
        self.out.push(b'\n');
        for _ in 0..self.total.max(0) {
            self.out.push(b' ');
        }
    }

    fn run(mut self, root: AnyView<'_>) -> Result<Vec<u8>> {
        let mut stack: Vec<Frame> = Vec::new();
        if let Some(frame) = self.write_value(root)? {
            self.open(&frame);
            stack.push(frame);
        }
        while let Some(top) = stack.last_mut() {
            if top.next < top.items.len() {
                let i = top.next;
                top.next += 1;
                let (key, value) = std::mem::take(&mut top.items[i]);
                let kind = top.kind;
                if i != 0 {
                    self.out.push(b',');
                }
                if self.indent != 0 {
                    self.newline();
                }
                if kind == FrameKind::Object {
                    let key = key.unwrap_or_default();
                    // SAFETY: the key is a live value.
                    match unsafe { string_content(key.raw()) } {
                        Some(b) => escape_string(b, &mut self.out),
                        None => {
                            return Err(Error::value_error(format!(
                                "Expect key to be string, got `{}`",
                                crate::function::mismatch_type_key(&key.as_view())
                            )))
                        }
                    }
                    self.out.push(b':');
                    if self.indent != 0 {
                        self.out.push(b' ');
                    }
                }
                if let Some(frame) = self.write_value(value.as_view())? {
                    self.open(&frame);
                    stack.push(frame);
                }
                continue;
            }
            let frame = stack.pop().expect("non-empty stack");
            if self.indent != 0 {
                self.total -= self.indent;
                self.newline();
            }
            self.out.push(if frame.kind == FrameKind::Object {
                b'}'
            } else {
                b']'
            });
            if let Some(list) = frame.list {
                self.active_lists.remove(&(list as usize));
            }
        }
        Ok(self.out)
    }

    fn open(&mut self, frame: &Frame) {
        self.out.push(if frame.kind == FrameKind::Object {
            b'{'
        } else {
            b'['
        });
        if self.indent != 0 {
            self.total += self.indent;
        }
    }

    /// Writes a scalar, or returns the frame of a container to open.
    fn write_value(&mut self, v: AnyView<'_>) -> Result<Option<Frame>> {
        let raw = v.raw();
        let seq = |items: Vec<Any>, list| Frame {
            kind: FrameKind::Seq,
            items: items.into_iter().map(|x| (None, x)).collect(),
            next: 0,
            list,
        };
        match raw.type_index {
            kTVMFFINone => self.out.extend_from_slice(b"null"),
            kTVMFFIBool => {
                // SAFETY: Bool stores v_int64.
                let b = unsafe { raw.value.v_int64 } != 0;
                self.out
                    .extend_from_slice(if b { b"true" } else { b"false" });
            }
            kTVMFFIInt => {
                // SAFETY: Int stores v_int64.
                let i = unsafe { raw.value.v_int64 };
                self.out.extend_from_slice(i.to_string().as_bytes());
            }
            kTVMFFIFloat => {
                // SAFETY: Float stores v_float64.
                format_float(unsafe { raw.value.v_float64 }, &mut self.out);
            }
            kTVMFFISmallStr | kTVMFFIStr => {
                // SAFETY: a live string value.
                let b = unsafe { raw_any_bytes(raw) }.unwrap_or_default();
                escape_string(b, &mut self.out);
            }
            kTVMFFIArray => {
                let arr = v.as_object_of::<ArrayObj>().expect("an Array value");
                return Ok(Some(seq(arr.to_vec(), None)));
            }
            kTVMFFIList => {
                let list = v.as_object_of::<ListObj>().expect("a List value");
                let obj = list.as_raw();
                if !self.active_lists.insert(obj as usize) {
                    return Err(Error::value_error("Cycle detected: List contains itself"));
                }
                return Ok(Some(seq(list.to_vec(), Some(obj))));
            }
            kTVMFFIMap => {
                let map = v.as_object_of::<MapObj>().expect("a Map value");
                let items = map
                    .to_vec()
                    .into_iter()
                    .map(|(k, x)| (Some(k), x))
                    .collect();
                return Ok(Some(Frame {
                    kind: FrameKind::Object,
                    items,
                    next: 0,
                    list: None,
                }));
            }
            _ => {
                return Err(Error::value_error(format!(
                    "Unsupported type: `{}`",
                    crate::function::mismatch_type_key(&v)
                )))
            }
        }
        Ok(None)
    }
}

/// The content of a String value (small or heap), or `None` for any other type.
///
/// # Safety
/// `v` must be a live value.
unsafe fn string_content(v: &TVMFFIAny) -> Option<&[u8]> {
    match v.type_index {
        // SAFETY: per the caller.
        kTVMFFISmallStr | kTVMFFIStr => unsafe { raw_any_bytes(v) },
        _ => None,
    }
}

impl Any {
    /// Adopts a raw owned value produced by this crate's constructors.
    fn from_raw_owned_value(raw: TVMFFIAny) -> Any {
        // SAFETY: callers pass values freshly made by `StrObj::any_from` & co (owned).
        unsafe { Any::from_raw(raw) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> Result<Any> {
        parse(s.as_bytes())
    }

    fn s(v: &Any, indent: i32) -> String {
        String::from_utf8(stringify(v.as_view(), indent).unwrap()).unwrap()
    }

    fn err(s: &str) -> String {
        p(s).unwrap_err().message().into_owned()
    }

    #[test]
    fn repeated_keys_land_where_the_official_parser_puts_them() {
        // (recorded on the official library: its objects are one `Map(first, last)` call, a
        // dense table from 4 pairs on, where a repeated key moves to the end)
        for (text, want) in [
            (r#"{"a":1,"b":2,"a":3}"#, r#"{"a":3,"b":2}"#),
            (r#"{"a":1,"b":2,"c":3,"a":4}"#, r#"{"b":2,"c":3,"a":4}"#),
            (r#"{"a":1,"b":2,"a":3,"c":4}"#, r#"{"b":2,"a":3,"c":4}"#),
            (r#"{"a":1,"a":2,"a":3,"a":4}"#, r#"{"a":4}"#),
            (
                r#"{"a":1,"b":2,"c":3,"d":4,"a":5}"#,
                r#"{"b":2,"c":3,"d":4,"a":5}"#,
            ),
            (
                r#"{"x":1,"y":2,"x":3,"y":4,"z":5,"x":6}"#,
                r#"{"y":4,"z":5,"x":6}"#,
            ),
        ] {
            assert_eq!(s(&p(text).unwrap(), 0), want, "{text}");
        }
    }

    #[test]
    fn round_trips() {
        for text in [
            r#"{"a":[1,2.5,"x",null,true,false],"b":{}}"#,
            "[]",
            "[[],[[]],{}]",
            r#""esc\"\\\/\b\f\n\r\t\u0001\u007f""#,
            "-9223372036854775808",
            "1.0",
            "1.0000000000000001e+300",
        ] {
            let v = p(text).unwrap();
            assert_eq!(s(&v, 0), text, "{text}");
        }
    }

    #[test]
    fn numbers() {
        assert_eq!(p("12").unwrap().get::<i64>().unwrap(), 12);
        assert_eq!(p("+1").unwrap().get::<i64>().unwrap(), 1);
        assert_eq!(p("01").unwrap().get::<i64>().unwrap(), 1);
        assert_eq!(p("1e2").unwrap().type_index(), kTVMFFIFloat);
        assert_eq!(
            p("99999999999999999999").unwrap().get::<f64>().unwrap(),
            1e20
        );
        assert!(p("NaN").unwrap().get::<f64>().unwrap().is_nan());
        assert_eq!(
            p("-Infinity").unwrap().get::<f64>().unwrap(),
            f64::NEG_INFINITY
        );
        let mut out = Vec::new();
        format_float(0.1, &mut out);
        assert_eq!(out, b"0.10000000000000001");
        out.clear();
        format_float(-3.0, &mut out);
        assert_eq!(out, b"-3.0");
        out.clear();
        format_float(1e20, &mut out);
        assert_eq!(out, b"1e+20");
    }

    #[test]
    fn errors_name_their_position() {
        assert_eq!(
            err("{not json"),
            "Expecting property name enclosed in double quotes: line 1 column 2 (char 1)"
        );
        assert_eq!(
            err("[1, 2"),
            "Expecting ',' delimiter: line 1 column 6 (char 5)"
        );
        assert_eq!(err("[1,"), "Syntax error near: line 1 column 4 (char 3)");
        assert_eq!(err(""), "Expecting value: line 1 column 1 (char 0)");
        assert_eq!(err("\n  tru"), "Expecting value: line 2 column 3 (char 3)");
        assert_eq!(err("1 2"), "Extra data: line 1 column 3 (char 2)");
        assert_eq!(
            err("\"abc"),
            "Unterminated string starting at: line 1 column 1 (char 0)"
        );
        assert_eq!(
            err("\"a\\x\""),
            "Invalid \\escape: line 1 column 4 (char 3)"
        );
        assert_eq!(err("1e999"), "Expecting value: line 1 column 1 (char 0)");
    }

    #[test]
    fn deep_nesting_needs_no_stack() {
        // Parsing and writing run on a small stack; only dropping the nested arrays (the
        // containers' own recursive release) needs a large one.
        let depth = 100_000;
        let text = "[".repeat(depth) + &"]".repeat(depth);
        let small = std::thread::Builder::new().stack_size(256 << 10);
        let (value, back) = small
            .spawn(move || {
                let v = p(&text).unwrap();
                let back = s(&v, 0);
                (v, back == text)
            })
            .unwrap()
            .join()
            .unwrap();
        assert!(back);
        let big = std::thread::Builder::new().stack_size(512 << 20);
        big.spawn(move || drop(value)).unwrap().join().unwrap();
    }

    #[test]
    fn indent() {
        let v = p(r#"[1,{"b":2}]"#).unwrap();
        assert_eq!(s(&v, 2), "[\n  1,\n  {\n    \"b\": 2\n  }\n]");
        assert_eq!(s(&p("[]").unwrap(), 2), "[\n]");
    }

    #[test]
    fn list_cycles_are_errors() {
        let l = crate::list::List::new();
        l.push(Any::from(l.clone()));
        let e = stringify(Any::from(l.clone()).as_view(), 0).unwrap_err();
        assert_eq!(e.message(), "Cycle detected: List contains itself");
        l.clear();
    }
}
