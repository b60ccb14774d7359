// harness.h: the case runner shared by tests/structural/cases_*.cc. A case is a name and a
// callable returning an Any; its line is `name = <value>` or `name ! <ErrorKind>: <message>`.
// The printer reads every value with header-only C++ (never with the library under test), so the
// same text is produced on both libraries exactly when their results agree.
#ifndef ANYFFI_TESTS_STRUCTURAL_HARNESS_H_
#define ANYFFI_TESTS_STRUCTURAL_HARNESS_H_

#include <tvm/ffi/any.h>
#include <tvm/ffi/big_int.h>
#include <tvm/ffi/container/array.h>
#include <tvm/ffi/container/dict.h>
#include <tvm/ffi/container/list.h>
#include <tvm/ffi/container/map.h>
#include <tvm/ffi/container/shape.h>
#include <tvm/ffi/container/tensor.h>
#include <tvm/ffi/error.h>
#include <tvm/ffi/function.h>
#include <tvm/ffi/string.h>

#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

namespace harness {

using namespace tvm::ffi;

inline std::string EscapeBytes(const char* data, size_t size) {
  std::string out;
  for (size_t i = 0; i < size; ++i) {
    unsigned char c = static_cast<unsigned char>(data[i]);
    if (c == '"' || c == '\\') {
      out.push_back('\\');
      out.push_back(static_cast<char>(c));
    } else if (c < 0x20 || c >= 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\x%02x", c);
      out += buf;
    } else {
      out.push_back(static_cast<char>(c));
    }
  }
  return out;
}

inline std::string FloatText(double v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.17g", v);
  return buf;
}

inline std::string TypeKeyOf(int32_t type_index) {
  const TVMFFITypeInfo* info = TVMFFIGetTypeInfo(type_index);
  if (info == nullptr) return "<unknown " + std::to_string(type_index) + ">";
  return std::string(info->type_key.data, info->type_key.size);
}

std::string Show(const AnyView& v, int depth = 0);

// Reads field `name` of `obj` through reflection (None when absent).
inline Any FieldOf(const Object* obj, const char* name) {
  const TVMFFITypeInfo* info = TVMFFIGetTypeInfo(obj->type_index());
  for (int j = 0; j < info->num_fields; ++j) {
    const TVMFFIFieldInfo* f = info->fields + j;
    if (std::string(f->name.data, f->name.size) == name) {
      Any value;
      const void* addr = reinterpret_cast<const char*>(obj) + f->offset;
      if (f->getter(const_cast<void*>(addr), reinterpret_cast<TVMFFIAny*>(&value)) == 0) return value;
    }
  }
  return Any(nullptr);
}

// An access path as `<root>.field[1]["key"]` (missing steps as `<missing:...>`).
inline std::string ShowAccessPath(const Object* path, int depth) {
  std::vector<std::string> parts;
  const Object* cur = path;
  while (cur != nullptr) {
    Any step = FieldOf(cur, "step");
    if (step == nullptr) break;
    const Object* s = step.cast<const Object*>();
    int64_t kind = FieldOf(s, "kind").cast<int64_t>();
    Any key = FieldOf(s, "key");
    std::string k = Show(key, depth + 1);
    const char* forms[] = {".%s", "[%s]", "[%s]", ".<missing:%s>", "[<missing:%s>]", "[<missing:%s>]"};
    if (kind == 0 || kind == 3) k = key.cast<String>();
    char buf[512];
    std::snprintf(buf, sizeof(buf), forms[kind >= 0 && kind < 6 ? kind : 0], k.c_str());
    parts.push_back(buf);
    Any parent = FieldOf(cur, "parent");
    cur = parent == nullptr ? nullptr : parent.cast<const Object*>();
  }
  std::string out = "<root>";
  for (auto it = parts.rbegin(); it != parts.rend(); ++it) out += *it;
  return out;
}

inline std::string ShowObjectFields(const Object* obj, int depth) {
  const TVMFFITypeInfo* info = TVMFFIGetTypeInfo(obj->type_index());
  if (TypeKeyOf(obj->type_index()) == "ffi.reflection.AccessPath") return ShowAccessPath(obj, depth);
  std::string out = TypeKeyOf(obj->type_index()) + "{";
  bool first = true;
  auto one = [&](const TVMFFIFieldInfo* f) {
    if (!first) out += ", ";
    first = false;
    out += std::string(f->name.data, f->name.size) + "=";
    Any value;
    const void* addr = reinterpret_cast<const char*>(obj) + f->offset;
    if (f->getter(const_cast<void*>(addr), reinterpret_cast<TVMFFIAny*>(&value)) != 0) {
      out += "<getter failed>";
      return;
    }
    out += Show(value, depth + 1);
  };
  for (int i = 1; i < info->type_depth; ++i) {
    const TVMFFITypeInfo* p = info->type_ancestors[i];
    for (int j = 0; j < p->num_fields; ++j) one(p->fields + j);
  }
  for (int j = 0; j < info->num_fields; ++j) one(info->fields + j);
  return out + "}";
}

inline std::string Show(const AnyView& v, int depth) {
  if (depth > 40) return "...";
  const TVMFFIAny* raw = reinterpret_cast<const TVMFFIAny*>(&v);
  int32_t ti = raw->type_index;
  switch (ti) {
    case TypeIndex::kTVMFFINone:
      return "None";
    case TypeIndex::kTVMFFIBool:
      return raw->v_int64 ? "True" : "False";
    case TypeIndex::kTVMFFIInt:
      return std::to_string(raw->v_int64);
    case TypeIndex::kTVMFFIFloat:
      return "f" + FloatText(raw->v_float64);
    case TypeIndex::kTVMFFIDataType: {
      DLDataType d = raw->v_dtype;
      return "dtype(" + std::to_string(d.code) + "," + std::to_string(d.bits) + "," +
             std::to_string(d.lanes) + ")";
    }
    case TypeIndex::kTVMFFIDevice:
      return "device(" + std::to_string(raw->v_device.device_type) + "," +
             std::to_string(raw->v_device.device_id) + ")";
    case TypeIndex::kTVMFFIOpaquePtr:
      return "ptr";
    case TypeIndex::kTVMFFISmallStr:
    case TypeIndex::kTVMFFIStr: {
      String s = v.cast<String>();
      return "\"" + EscapeBytes(s.data(), s.size()) + "\"";
    }
    case TypeIndex::kTVMFFISmallBytes:
    case TypeIndex::kTVMFFIBytes: {
      Bytes b = v.cast<Bytes>();
      return "b\"" + EscapeBytes(b.data(), b.size()) + "\"";
    }
    case TypeIndex::kTVMFFIBigInt: {
      TVMFFIByteArray w = TVMFFIBigIntGetContentByteArray(raw);
      std::string out = "bigint(";
      for (size_t i = 0; i < w.size / 8; ++i) {
        int64_t word;
        std::memcpy(&word, w.data + 8 * i, 8);
        if (i) out += ",";
        out += std::to_string(word);
      }
      return out + ")";
    }
    case TypeIndex::kTVMFFIArray:
    case TypeIndex::kTVMFFIList: {
      std::string out = ti == TypeIndex::kTVMFFIArray ? "(" : "[";
      const SeqBaseObj* seq = v.cast<const SeqBaseObj*>();
      for (int64_t i = 0; i < static_cast<int64_t>(seq->size()); ++i) {
        if (i) out += ", ";
        out += Show((*seq)[i], depth + 1);
      }
      return out + (ti == TypeIndex::kTVMFFIArray ? ")" : "]");
    }
    case TypeIndex::kTVMFFIMap:
    case TypeIndex::kTVMFFIDict: {
      std::string out = ti == TypeIndex::kTVMFFIMap ? "{" : "dict{";
      const MapBaseObj* m = v.cast<const MapBaseObj*>();
      bool first = true;
      for (const auto& kv : *m) {
        if (!first) out += ", ";
        first = false;
        out += Show(kv.first, depth + 1) + ": " + Show(kv.second, depth + 1);
      }
      return out + "}";
    }
    case TypeIndex::kTVMFFIShape: {
      Shape s = v.cast<Shape>();
      std::string out = "shape(";
      for (size_t i = 0; i < s.size(); ++i) {
        if (i) out += ",";
        out += std::to_string(s[i]);
      }
      return out + ")";
    }
    case TypeIndex::kTVMFFITensor: {
      Tensor t = v.cast<Tensor>();
      std::string out = "tensor(";
      for (int i = 0; i < t.ndim(); ++i) out += (i ? "," : "") + std::to_string(t.size(i));
      return out + ")";
    }
    case TypeIndex::kTVMFFIFunction:
      return "<function>";
    case TypeIndex::kTVMFFIError: {
      Error e = v.cast<Error>();
      return "<error " + e.kind() + ": " + e.message() + ">";
    }
    default:
      if (ti >= TypeIndex::kTVMFFIStaticObjectBegin) {
        return ShowObjectFields(v.cast<const Object*>(), depth);
      }
      return "<" + TypeKeyOf(ti) + ">";
  }
}

inline std::string OneLine(std::string s) {
  for (char& c : s) {
    if (c == '\n') c = '|';
  }
  return s;
}

struct Case {
  std::string name;
  std::function<Any()> run;
};

inline std::vector<Case>& Cases() {
  static std::vector<Case> cases;
  return cases;
}

struct AddCase {
  AddCase(const char* name, std::function<Any()> run) { Cases().push_back({name, std::move(run)}); }
};

#define HCAT2(a, b) a##b
#define HCAT(a, b) HCAT2(a, b)
/*! \brief Registers a case: CASE("name") { return ...; } */
#define CASE(name) \
  static ::harness::AddCase HCAT(case_, __COUNTER__)(name, []() -> ::tvm::ffi::Any

/*!
 * \brief Runs every case. Cases named `ours.*` exercise inputs the official library cannot survive
 * (cycles make it recurse until the stack overflows); they are skipped when HARNESS_SKIP_OURS is
 * set, and their expected lines are written by hand in expected_ours.txt.
 */
inline int RunAll() {
  const char* skip = std::getenv("HARNESS_SKIP_OURS");
  for (const Case& c : Cases()) {
    if (skip != nullptr && skip[0] != 0 && c.name.rfind("ours.", 0) == 0) continue;
    std::string line;
    try {
      Any r = c.run();
      line = c.name + " = " + Show(r);
    } catch (const Error& e) {
      line = c.name + " ! " + e.kind() + ": " + e.message();
    } catch (const std::exception& e) {
      line = c.name + " ! std::exception: " + e.what();
    }
    std::printf("%s\n", OneLine(line).c_str());
  }
  std::fflush(stdout);
  return 0;
}

/*! \brief Calls the global function `name` of the library under test. */
template <typename... Args>
inline Any Call(const char* name, Args&&... args) {
  return Function::GetGlobalRequired(name)(std::forward<Args>(args)...);
}

/*!
 * \brief Runs `f` on a value in a reference cycle, then `break_cycle` (also when `f` throws),
 *  so that the case leaks nothing (and valgrind stays clean).
 */
template <typename F, typename G>
inline Any ThenBreakCycle(F f, G break_cycle) {
  Any r;
  try {
    r = f();
  } catch (...) {
    break_cycle();
    throw;
  }
  break_cycle();
  return r;
}

/*! \brief A BigInt from little-endian 64-bit words. */
inline Any BigIntOf(std::vector<int64_t> words) {
  TVMFFIByteArray bytes{reinterpret_cast<const char*>(words.data()), words.size() * 8};
  Any out;
  TVM_FFI_CHECK_SAFE_CALL(TVMFFIBigIntFromByteArray(&bytes, reinterpret_cast<TVMFFIAny*>(&out)));
  return out;
}

}  // namespace harness

#endif  // ANYFFI_TESTS_STRUCTURAL_HARNESS_H_
