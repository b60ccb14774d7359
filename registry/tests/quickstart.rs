//! The Rust example of the README, kept compiling and passing.

use anyffi::{Any, AnyView, Function, Result};
use anyffi_registry::{get_global, register_typed};

#[test]
fn readme_rust_example() -> Result<()> {
    register_typed("demo.add", |a: i64, b: i64| a + b, false)?;
    let add = get_global("demo.add").expect("registered");
    let sum = add.call(&[AnyView::from(2i64), AnyView::from(3i64)])?;
    assert_eq!(sum.get::<i64>()?, 5);

    let f = Function::from_packed(|_args| Err(anyffi::Error::value_error("bad input")));
    let err = f.call(&[]).unwrap_err();
    assert_eq!(err.kind(), "ValueError");
    let _ = Any::from("owned values release their objects on drop");
    Ok(())
}

#[test]
fn global_table_rules() -> Result<()> {
    register_typed("quickstart.twice", |a: i64| a * 2, false)?;
    let e = register_typed("quickstart.twice", |a: i64| a * 3, false).unwrap_err();
    assert_eq!(e.kind(), "RuntimeError");
    register_typed("quickstart.twice", |a: i64| a * 3, true)?;
    let f = get_global("quickstart.twice").unwrap();
    assert_eq!(f.call(&[AnyView::from(2i64)])?.get::<i64>()?, 6);
    let meta = anyffi_registry::global::get_entry("quickstart.twice")
        .unwrap()
        .metadata;
    assert!(
        meta.starts_with("{\"type_schema\":\"{\\\"type\\\":\\\"ffi.Function\\\""),
        "{meta}"
    );
    assert!(anyffi_registry::global::remove_global("quickstart.twice"));
    assert!(get_global("quickstart.twice").is_none());
    Ok(())
}

#[test]
fn testing_functions() -> Result<()> {
    let apply = get_global("anyffi.testing.apply").unwrap();
    let add_one = get_global("anyffi.testing.add_one").unwrap();
    let r = apply.call(&[AnyView::from(&add_one), AnyView::from(41i64)])?;
    assert_eq!(r.get::<i64>()?, 42);
    let raise = get_global("anyffi.testing.raise_error").unwrap();
    let (k, m) = (Any::from("KeyError"), Any::from("missing key"));
    let e = raise.call(&[k.as_view(), m.as_view()]).unwrap_err();
    assert_eq!(
        (e.kind(), e.message().as_ref()),
        ("KeyError", "missing key")
    );
    let echo = get_global("anyffi.testing.echo").unwrap();
    let s = Any::from("a string longer than seven bytes");
    let back = echo.call(&[s.as_view()])?;
    assert_eq!(back.get::<String>()?, "a string longer than seven bytes");
    assert!(echo.call(&[]).is_err());
    Ok(())
}
