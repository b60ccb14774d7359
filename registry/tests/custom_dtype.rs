//! Custom dtypes (`custom[name]bits`): named by the global functions `dtype.get_custom_type_code`
//! and `dtype.get_custom_type_name`, which a user library registers (TVM does), as upstream.
//! Its own test binary: the functions are process-wide.

use anyffi::abi::DLDataType;
use anyffi::dtype::{parse_dtype, try_dtype_to_string};
use anyffi::Error;
use anyffi_registry::global::remove_global;
use anyffi_registry::register_typed;

fn dt(code: u8, bits: u8, lanes: u16) -> DLDataType {
    DLDataType { code, bits, lanes }
}

#[test]
fn custom_dtypes_go_through_the_registered_functions() {
    // none registered: upstream's "not found" ValueError, both ways
    let e = parse_dtype("custom[posit]32").unwrap_err();
    assert_eq!(e.kind(), "ValueError");
    assert!(
        e.message()
            .starts_with("Function dtype.get_custom_type_code not found"),
        "{e}"
    );
    let e = try_dtype_to_string(dt(150, 32, 1)).unwrap_err();
    assert!(
        e.message()
            .starts_with("Function dtype.get_custom_type_name not found"),
        "{e}"
    );

    register_typed(
        "dtype.get_custom_type_code",
        |name: String| -> anyffi::Result<i64> {
            match name.as_str() {
                "posit" => Ok(150),
                "low" => Ok(128),
                "wide" => Ok(256),
                _ => Err(Error::new("KeyError", format!("no custom type `{name}`"))),
            }
        },
        false,
    )
    .unwrap();
    register_typed(
        "dtype.get_custom_type_name",
        |code: i64| -> anyffi::Result<String> {
            match code {
                150 => Ok("posit".into()),
                _ => Err(Error::new("KeyError", format!("no custom code {code}"))),
            }
        },
        false,
    )
    .unwrap();

    assert_eq!(parse_dtype("custom[posit]32").unwrap(), dt(150, 32, 1));
    assert_eq!(parse_dtype("custom[posit]16x4").unwrap(), dt(150, 16, 4));
    assert_eq!(
        parse_dtype("custom[posit]8xvscalex2").unwrap(),
        dt(150, 8, 65534)
    );
    // printed as upstream prints it: lanes, but no bits (the float8 names' rule covers codes
    // above them too); without bits (or 0) a dtype has upstream's default 32, so the printed
    // text parses back
    assert_eq!(parse_dtype("custom[posit]").unwrap(), dt(150, 32, 1));
    assert_eq!(parse_dtype("custom[posit]0x4").unwrap(), dt(150, 32, 4));
    assert_eq!(parse_dtype("custom[posit]x4").unwrap(), dt(150, 32, 4));
    assert_eq!(
        try_dtype_to_string(dt(150, 32, 1)).unwrap(),
        "custom[posit]"
    );
    assert_eq!(
        try_dtype_to_string(dt(150, 16, 4)).unwrap(),
        "custom[posit]x4"
    );

    // the function's own error keeps its kind
    let e = parse_dtype("custom[nope]32").unwrap_err();
    assert_eq!(
        (e.kind(), &*e.message()),
        ("KeyError", "no custom type `nope`")
    );
    let e = try_dtype_to_string(dt(200, 32, 1)).unwrap_err();
    assert_eq!(
        (e.kind(), &*e.message()),
        ("KeyError", "no custom code 200")
    );
    // what upstream would store silently is refused
    for (s, want) in [
        (
            "custom[low]32",
            "returned 128 for custom dtype `custom[low]32`: custom type codes are 129 to 255",
        ),
        ("custom[wide]32", "returned 256"),
        ("custom[posit]300", "Bits value 300 is out of range"),
        ("custom[posit]32y", "unknown dtype `custom[posit]32y`"),
        ("custom[posit]]8", "unknown dtype `custom[posit]]8`"),
        ("custom[posit]32x0", "Invalid lanes specification"),
        (
            "custom[posit",
            "expected closing brace after 'custom' type in custom[posit",
        ),
        (
            "customposit",
            "expected opening brace after 'custom' type in customposit",
        ),
    ] {
        let e = parse_dtype(s).unwrap_err();
        assert_eq!(e.kind(), "ValueError", "{s}: {e}");
        assert!(e.message().contains(want), "{s}: {e}");
    }

    // the name reaches the function as written, bytes that are not UTF-8 included
    assert!(remove_global("dtype.get_custom_type_code"));
    anyffi_registry::register_packed(
        "dtype.get_custom_type_code",
        |args| {
            let b = args[0].as_str_bytes().unwrap();
            Ok(anyffi::Any::from(if b == b"p\xffq" { 151i64 } else { 152 }))
        },
        false,
    )
    .unwrap();
    let t = anyffi::dtype::parse_dtype_bytes(b"custom[p\xffq]8").unwrap();
    assert_eq!(t, dt(151, 8, 1));

    // a function giving the wrong type of result: TypeError naming it
    assert!(remove_global("dtype.get_custom_type_code"));
    register_typed(
        "dtype.get_custom_type_code",
        |_n: String| "150".to_string(),
        false,
    )
    .unwrap();
    let e = parse_dtype("custom[posit]32").unwrap_err();
    assert_eq!(e.kind(), "TypeError");
    assert!(
        e.message()
            .contains("dtype.get_custom_type_code returned ffi.String"),
        "{e}"
    );
    assert!(remove_global("dtype.get_custom_type_code"));
    assert!(remove_global("dtype.get_custom_type_name"));
}
