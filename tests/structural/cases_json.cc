// cases_json.cc: ffi.json.Parse / ffi.json.Stringify on valid and malformed text, every value
// kind, number formats, escapes and indentation.
#include <cmath>
#include <limits>

#include "harness.h"

using namespace tvm::ffi;
using harness::Call;
using harness::ThenBreakCycle;

namespace {

Any Parse(const std::string& text) { return Call("ffi.json.Parse", String(text)); }

Any Stringify(const Any& v, Optional<int> indent = std::nullopt) {
  if (indent.has_value()) return Call("ffi.json.Stringify", v, *indent);
  return Call("ffi.json.Stringify", v, nullptr);
}

// Parse, then write back compactly (checks both directions at once).
Any RoundTrip(const std::string& text) { return Stringify(Parse(text)); }

// --- parsing valid documents
CASE("json.parse.object") { return Parse(R"({"a": [1, 2.5, "x", null, true, false], "b": {}})"); });
CASE("json.parse.whitespace") { return Parse(" \t\r\n [ 1 ,\n 2 ] \n"); });
CASE("json.parse.empty_containers") { return Parse("[[], {}, [[]], {\"a\": {}}]"); });
CASE("json.parse.ints") { return Parse("[0, -0, 1, -1, 01, 9223372036854775807, -9223372036854775808]"); });
CASE("json.parse.int_overflow_is_float") { return Parse("[9223372036854775808, -9223372036854775809, 99999999999999999999]"); });
CASE("json.parse.floats") { return Parse("[0.5, -0.0, 1e3, 1E-3, 2.5e+10, .5, 5., 1.7976931348623157e308]"); });
CASE("json.parse.special_floats") { return Parse("[NaN, Infinity, -Infinity]"); });
CASE("json.parse.plus_sign") { return Parse("+7"); });
CASE("json.parse.escapes") { return Parse(R"("q\"b\\s\/b\bf\fn\nr\rt\t")"); });
CASE("json.parse.unicode") { return Parse(R"(["\u0041\u00e9\u4e2d", "\ud83d\ude00", "\u0000x"])"); });
CASE("json.parse.raw_utf8") { return Parse("\"caf\xc3\xa9 \xe4\xb8\xad\""); });
CASE("json.parse.duplicate_keys") { return Parse(R"({"a": 1, "b": 2, "a": 3})"); });
CASE("json.parse.many_keys_order") { return Parse(R"({"k9":9,"k1":1,"k5":5,"k3":3,"k7":7,"k0":0,"k2":2})"); });
CASE("json.parse.scalars") { return Array<Any>({Parse("true"), Parse("false"), Parse("null"), Parse("\"\""), Parse("3")}); });
CASE("json.parse.deep") {
  std::string text = std::string(2000, '[') + "1" + std::string(2000, ']');
  return Stringify(Parse(text)).cast<String>() == text;
});

// --- malformed documents: messages with positions
CASE("json.err.empty") { return Parse(""); });
CASE("json.err.spaces_only") { return Parse("  \n "); });
CASE("json.err.bad_object") { return Parse("{not json"); });
CASE("json.err.open_object") { return Parse("{"); });
CASE("json.err.object_trailing_comma") { return Parse("{\"a\": 1,"); });
CASE("json.err.object_comma_close") { return Parse("{\"a\": 1,}"); });
CASE("json.err.object_missing_colon") { return Parse("{\"a\" 1}"); });
CASE("json.err.object_missing_value") { return Parse("{\"a\": }"); });
CASE("json.err.object_missing_comma") { return Parse("{\"a\": 1 \"b\": 2}"); });
CASE("json.err.object_eof_after_value") { return Parse("{\"a\": 1"); });
CASE("json.err.array_unclosed") { return Parse("[1, 2"); });
CASE("json.err.array_trailing_comma") { return Parse("[1,"); });
CASE("json.err.array_comma_close") { return Parse("[1,]"); });
CASE("json.err.array_open") { return Parse("["); });
CASE("json.err.array_missing_comma") { return Parse("[1 2]"); });
CASE("json.err.extra_data") { return Parse("1 2"); });
CASE("json.err.extra_close") { return Parse("[1]]"); });
CASE("json.err.bad_literal_true") { return Parse("tru"); });
CASE("json.err.bad_literal_false") { return Parse("[1, falsy]"); });
CASE("json.err.bad_literal_null") { return Parse("\n\n  nul"); });
CASE("json.err.bad_number") { return Parse("[1, -]"); });
CASE("json.err.number_junk") { return Parse("1-2"); });
CASE("json.err.number_range") { return Parse("1e999"); });
CASE("json.err.number_underflow") { return Parse("1e-400"); });
CASE("json.err.bad_infinity") { return Parse("-Inf"); });
CASE("json.err.bad_nan") { return Parse("Nan"); });
CASE("json.err.letter") { return Parse("x"); });
CASE("json.err.unterminated") { return Parse("[\"abc"); });
CASE("json.err.unterminated_escaped") { return Parse("\"a\\nb"); });
CASE("json.err.control_char") { return Parse("\"a\\n\tb\""); });
CASE("json.err.control_char_plain") { return Parse("\"a\tb\""); });
CASE("json.err.bad_escape") { return Parse("\"a\\xb\""); });
CASE("json.err.bad_unicode") { return Parse("\"\\u12G4\""); });
CASE("json.err.lone_low_surrogate") { return Parse("\"\\udc00\""); });
CASE("json.err.lone_high_surrogate") { return Parse("\"\\ud800x\""); });
CASE("json.err.bad_second_surrogate") { return Parse("\"\\ud800\\u0041\""); });
CASE("json.err.bad_second_hex") { return Parse("\"\\ud800\\uzzzz\""); });
CASE("json.err.multiline_position") { return Parse("{\n  \"a\": 1,\n  \"b\": tru\n}"); });
CASE("json.err.not_a_string") { return Call("ffi.json.Parse", 1); });

// --- round trips through the writer
CASE("json.rt.mixed") { return RoundTrip(R"({"a": [1, 2.5, "x", null, true], "b": {"c": []}})"); });
CASE("json.rt.floats") { return RoundTrip("[0.1, 1e20, 1e-7, -0.0, 123456789.0, 9007199254740992.0, 9007199254740993.5, 3.14159, 1e308, 4.9406564584124654e-324]"); });
CASE("json.err.denormal") { return Parse("5e-324"); });
CASE("json.rt.special") { return RoundTrip("[NaN, Infinity, -Infinity]"); });
CASE("json.rt.escapes") { return RoundTrip(R"("q\"b\\s/\b\f\n\r\t\u0001\u001f\u007f\u00e9")"); });

// --- writing values built here
CASE("json.write.scalars") {
  return Stringify(Array<Any>({nullptr, true, false, 0, -42, 1.5, -2.0, String("s"), String("a long string here")}));
});
CASE("json.write.float_ints") {
  return Stringify(Array<Any>({1.0, -0.0, 1e15, 9007199254740991.0, 9007199254740992.0, 1e300, 0.5, 1.0 / 3}));
});
CASE("json.write.nan_inf") {
  return Stringify(Array<Any>({std::nan(""), -std::nan(""), std::numeric_limits<double>::infinity(),
                               -std::numeric_limits<double>::infinity()}));
});
CASE("json.write.list") { return Stringify(List<Any>({1, List<Any>({2}), Array<Any>({})})); });
CASE("json.write.map") { return Stringify(Map<Any, Any>({{String("x"), 1}, {String("y"), Array<Any>({1, 2})}})); });
CASE("json.write.map_dense") {
  Map<Any, Any> m;
  for (int i = 0; i < 12; ++i) m.Set(String("key" + std::to_string(i)), i);
  return Stringify(m);
});
CASE("json.write.indent2") { return Stringify(Array<Any>({1, Map<Any, Any>({{String("b"), 2}})}), 2); });
CASE("json.write.indent4_nested") {
  return Stringify(Map<Any, Any>({{String("a"), Array<Any>({})}, {String("m"), Map<Any, Any>()},
                                  {String("l"), List<Any>({1, 2})}}),
                   4);
});
CASE("json.write.indent0") { return Stringify(Array<Any>({1, 2}), 0); });
CASE("json.write.indent_negative") { return Stringify(Array<Any>({1, Array<Any>({2})}), -2); });
CASE("json.write.empty_indent") { return Stringify(Array<Any>({}), 2); });
CASE("json.write.control_bytes") { return Stringify(String(std::string("a\x01\x7f\x1f/\"\\", 7))); });
CASE("json.write.raw_high_bytes") { return Stringify(String("\xff\xfe")); });
CASE("json.err.write_dict") { return Stringify(Dict<Any, Any>({{String("a"), 1}})); });
CASE("json.err.write_bytes") { return Stringify(Bytes("x")); });
CASE("json.err.write_shape") { return Stringify(Shape({1, 2})); });
CASE("json.err.write_device") { return Stringify(DLDevice{kDLCPU, 0}); });
CASE("json.err.write_nested_unsupported") { return Stringify(Array<Any>({1, Array<Any>({Bytes("q")})})); });
CASE("json.err.write_int_key") { return Stringify(Map<Any, Any>({{1, 2}})); });
CASE("json.err.write_list_cycle") {
  List<Any> l({1});
  l.push_back(l);
  return ThenBreakCycle([&] { return Stringify(l); }, [&] { l.clear(); });
});
CASE("json.write.shared_list_twice") {
  List<Any> l({1});
  return Stringify(Array<Any>({l, l}));
});
CASE("json.err.write_bad_indent") { return Call("ffi.json.Stringify", 1, String("x")); });

}  // namespace
