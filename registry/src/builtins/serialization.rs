//! The JSON object graph built-ins (spec §8, Serialization): `ffi.ToJSONGraph`,
//! `ffi.ToJSONGraphString`, `ffi.FromJSONGraph`, `ffi.FromJSONGraphString`.

use anyffi::serialization as ser;
use anyffi::{Any, AnyView, Result};

use crate::global::Registrar;

/// A String value of arbitrary bytes.
fn string_any(bytes: &[u8]) -> Any {
    // SAFETY: `any_from` returns a fresh owned value.
    unsafe { Any::from_raw(anyffi::StrObj::any_from(bytes)) }
}

/// A `str` argument as bytes.
struct Text(Vec<u8>);

impl anyffi::FromAny for Text {
    const TYPE_NAME: &'static str = "ffi.String";
    fn try_from_view(v: &AnyView<'_>) -> Option<Self> {
        match v.type_index() {
            anyffi::abi::kTVMFFISmallStr | anyffi::abi::kTVMFFIStr | anyffi::abi::kTVMFFIRawStr => {
                // SAFETY: a live string-like view.
                unsafe { anyffi::string::raw_any_bytes(v.raw()) }.map(|b| Text(b.to_vec()))
            }
            _ => None,
        }
    }
}

/// A `str` result of arbitrary bytes.
struct TextOut(Vec<u8>);

impl anyffi::IntoAny for TextOut {
    fn into_any(self) -> Any {
        string_any(&self.0)
    }
    fn schema() -> String {
        r#"{"type":"ffi.String"}"#.into()
    }
}

fn graph_string(value: &Any, metadata: &Any) -> Result<TextOut> {
    let graph = Any::from(ser::to_json_graph(value, metadata)?);
    anyffi::json::stringify(graph.as_view(), 0).map(TextOut)
}

pub(super) fn register(r: &mut Registrar<'_>) {
    r.typed(
        "ffi.ToJSONGraph",
        "ToJSONGraph(value, metadata): the JSON object graph of value ({\"root_index\", \
         \"nodes\", \"metadata\"}), each shared value written once.",
        |value: Any, metadata: Any| -> Result<Any> {
            ser::to_json_graph(&value, &metadata).map(Any::from)
        },
    );
    r.typed(
        "ffi.ToJSONGraphString",
        "ToJSONGraphString(value, metadata): ToJSONGraph as compact JSON text.",
        |value: Any, metadata: Any| -> Result<TextOut> { graph_string(&value, &metadata) },
    );
    r.typed(
        "ffi.FromJSONGraph",
        "FromJSONGraph(graph): the value a JSON object graph describes.",
        |graph: Any| -> Result<Any> { ser::from_json_graph(graph.as_view()) },
    );
    r.typed(
        "ffi.FromJSONGraphString",
        "FromJSONGraphString(text): FromJSONGraph of parsed JSON text.",
        |text: Text| -> Result<Any> {
            let graph = anyffi::json::parse(&text.0)?;
            ser::from_json_graph(graph.as_view())
        },
    );
}
