//! `ffi.json.Parse(str) -> Any` and `ffi.json.Stringify(Any, Optional[int]) -> str` (spec §8,
//! Serialization), over the JSON value model of `anyffi::json`.

use anyffi::abi::{kTVMFFIBool, kTVMFFIInt, kTVMFFINone};
use anyffi::function::signature;
use anyffi::{Any, AnyView, Error, Result};

use crate::global::Registrar;

/// A String value of arbitrary bytes (JSON text need not be valid UTF-8 to be written).
fn string_any(bytes: &[u8]) -> Any {
    // SAFETY: `any_from` returns a fresh owned value.
    unsafe { Any::from_raw(anyffi::StrObj::any_from(bytes)) }
}

pub(super) fn register(r: &mut Registrar<'_>) {
    r.typed(
        "ffi.json.Parse",
        "Parse(text): the JSON value of text (None/bool/int/float/str/Array/Map); NaN and \
         (-)Infinity are accepted. Malformed text is a ValueError naming line, column and char.",
        |text: JsonText| -> Result<Any> { anyffi::json::parse(&text.0) },
    );
    const STRINGIFY: &str = "ffi.json.Stringify";
    const PARAMS: [&str; 2] = ["Any", "Optional<int>"];
    r.packed_as(
        STRINGIFY,
        "Stringify(value, indent): JSON text of a None/bool/int/float/str/Array/List/Map value, \
         compact when indent is None or 0.",
        |_value: Any, _indent: Option<i32>| -> JsonString { unreachable!("schema only") },
        |args| {
            let mismatch = |i: usize, got: &AnyView<'_>| {
                Error::type_error(format!(
                    "Mismatched type on argument #{i} when calling: `{}`. Expected `{}` but got `{}`",
                    signature(STRINGIFY, &PARAMS, "str"),
                    PARAMS[i],
                    anyffi::type_table::type_key_of(got.type_index())
                ))
            };
            let [value, indent] = args else {
                return Err(Error::type_error(format!(
                    "Mismatched number of arguments when calling: `{}`. Expected 2 but got {} arguments",
                    signature(STRINGIFY, &PARAMS, "str"),
                    args.len()
                )));
            };
            let indent = match indent.type_index() {
                kTVMFFINone => 0,
                kTVMFFIInt | kTVMFFIBool => indent.as_i64().unwrap_or(0) as i32,
                _ => return Err(mismatch(1, indent)),
            };
            // as an owned Any, like the official `const Any&` parameter: a `const char*` or
            // byte-array view becomes the String/Bytes it stands for
            let value = value.to_owned()?;
            Ok(string_any(&anyffi::json::stringify(value.as_view(), indent)?))
        },
    );
}

/// A `str` argument read as bytes.
struct JsonText(Vec<u8>);

impl anyffi::FromAny for JsonText {
    const TYPE_NAME: &'static str = "ffi.String";
    fn try_from_view(v: &anyffi::AnyView<'_>) -> Option<Self> {
        match v.type_index() {
            anyffi::abi::kTVMFFISmallStr | anyffi::abi::kTVMFFIStr | anyffi::abi::kTVMFFIRawStr => {
                // SAFETY: a live string-like view.
                unsafe { anyffi::string::raw_any_bytes(v.raw()) }.map(|b| JsonText(b.to_vec()))
            }
            _ => None,
        }
    }
}

/// A `str` result of arbitrary bytes.
struct JsonString(Vec<u8>);

impl anyffi::IntoAny for JsonString {
    fn into_any(self) -> Any {
        string_any(&self.0)
    }
    fn schema() -> String {
        r#"{"type":"ffi.String"}"#.into()
    }
}
