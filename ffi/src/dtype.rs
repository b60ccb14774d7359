//! TEMPORARY scaffolding, replaced by the full dtype grammar module.
use crate::abi::DLDataType;
pub fn parse_dtype(s: &str) -> Result<DLDataType, String> {
    Err(format!("unknown dtype `{s}`"))
}
pub fn dtype_to_string(t: DLDataType) -> String {
    format!("{}.{}.{}", t.code, t.bits, t.lanes)
}
