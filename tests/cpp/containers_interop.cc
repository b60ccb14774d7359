// containers_interop.cc: Array / List / Map / Dict interoperability between header-only C++
// (compiled from the official tvm-ffi headers into this program) and the libtvm_ffi.so it runs
// against. Every check runs both ways: C++-made containers go through the library's ffi.*
// globals, and library-made containers (from ffi.Array / ffi.List / ffi.Map / ffi.Dict) are read,
// iterated and mutated by inline C++ (lookups, copy-on-write Map::Set, in-place Dict growth,
// erase, List growth). The same source must pass against the official library, which proves the
// expectations, and against anyffi, which proves the layouts.
//
// Build and run: tests/cpp/run.sh LIBDIR   (LIBDIR holds the libtvm_ffi.so under test)

#include <tvm/ffi/any.h>
#include <tvm/ffi/container/array.h>
#include <tvm/ffi/container/dict.h>
#include <tvm/ffi/container/list.h>
#include <tvm/ffi/container/map.h>
#include <tvm/ffi/device.h>
#include <tvm/ffi/error.h>
#include <tvm/ffi/function.h>
#include <tvm/ffi/string.h>

#include <dlfcn.h>

#include <cstdint>
#include <cstdlib>
#include <cstdio>
#include <cstring>
#include <exception>
#include <string>
#include <vector>

using namespace tvm::ffi;

namespace {

int g_passed = 0;
int g_failed = 0;

#define CHECK(cond)                                                          \
  do {                                                                       \
    if (cond) {                                                              \
      ++g_passed;                                                            \
    } else {                                                                 \
      ++g_failed;                                                            \
      std::printf("FAIL %s:%d: %s\n", __FILE__, __LINE__, #cond);            \
    }                                                                        \
  } while (0)

#define CHECK_EQ(a, b)                                                       \
  do {                                                                       \
    auto va_ = (a);                                                          \
    auto vb_ = (b);                                                          \
    if (va_ == vb_) {                                                        \
      ++g_passed;                                                            \
    } else {                                                                 \
      ++g_failed;                                                            \
      std::printf("FAIL %s:%d: %s == %s (%s vs %s)\n", __FILE__, __LINE__, #a, #b, \
                  Show(va_).c_str(), Show(vb_).c_str());                     \
    }                                                                        \
  } while (0)

std::string Show(int64_t v) { return std::to_string(v); }
std::string Show(uint64_t v) { return std::to_string(v); }
std::string Show(int v) { return std::to_string(v); }
std::string Show(bool v) { return v ? "true" : "false"; }
std::string Show(const std::string& v) { return "\"" + v + "\""; }

// Runs one test, turning an escaped exception into a failure.
template <typename F>
void Run(const char* name, F f) {
  int before = g_failed;
  try {
    f();
  } catch (const Error& e) {
    ++g_failed;
    std::printf("FAIL %s: uncaught %s: %s\n", name, e.kind().c_str(), e.message().c_str());
  } catch (const std::exception& e) {
    ++g_failed;
    std::printf("FAIL %s: uncaught %s\n", name, e.what());
  }
  std::printf("%s %s\n", g_failed == before ? "ok  " : "FAIL", name);
}

// Calls `f(args...)` expecting an error of `kind`; returns its message ("" when none).
template <typename... Args>
std::string ExpectError(const char* kind, const Function& f, Args&&... args) {
  try {
    f(std::forward<Args>(args)...);
  } catch (const Error& e) {
    CHECK_EQ(e.kind(), std::string(kind));
    return e.message();
  }
  CHECK(!"expected an error");
  return "";
}

Function G(const char* name) { return Function::GetGlobalRequired(name); }

// Raw view of the MapBaseObj words (offsets of spec §2.4).
struct MapWords {
  void* data;
  uint64_t size;
  uint64_t slots;
  void* deleter;
};

MapWords Words(const ObjectRef& m) {
  const char* base = reinterpret_cast<const char*>(m.get());
  MapWords w;
  std::memcpy(&w, base + 24, sizeof(w));
  return w;
}

const uint64_t kSmallTag = uint64_t(1) << 63;

// Keys "k0".."k{n-1}" (short strings) with every third key long enough for the heap.
std::string Key(int i) { return i % 3 == 2 ? "a-long-heap-key-" + std::to_string(i) : "k" + std::to_string(i); }

// Builds a Map through the library's ffi.Map global.
Map<String, int64_t> LibMap(int n) {
  std::vector<AnyView> args;
  std::vector<String> keys;
  keys.reserve(n);
  for (int i = 0; i < n; ++i) keys.push_back(String(Key(i)));
  std::vector<int64_t> vals(n);
  for (int i = 0; i < n; ++i) {
    vals[i] = i * 10;
    args.push_back(AnyView(keys[i]));
    args.push_back(AnyView(vals[i]));
  }
  Any ret;
  G("ffi.Map").CallPacked(args.data(), static_cast<int32_t>(args.size()), &ret);
  return ret.cast<Map<String, int64_t>>();
}

Dict<String, int64_t> LibDict(int n) {
  std::vector<AnyView> args;
  std::vector<String> keys;
  keys.reserve(n);
  for (int i = 0; i < n; ++i) keys.push_back(String(Key(i)));
  std::vector<int64_t> vals(n);
  for (int i = 0; i < n; ++i) {
    vals[i] = i * 10;
    args.push_back(AnyView(keys[i]));
    args.push_back(AnyView(vals[i]));
  }
  Any ret;
  G("ffi.Dict").CallPacked(args.data(), static_cast<int32_t>(args.size()), &ret);
  return ret.cast<Dict<String, int64_t>>();
}

Map<String, int64_t> CppMap(int n) {
  Map<String, int64_t> m;
  for (int i = 0; i < n; ++i) m.Set(String(Key(i)), i * 10);
  return m;
}

// Iterates through the library's MapForwardIterFunctor protocol.
template <typename M>
std::vector<std::pair<std::string, int64_t>> LibIterate(const M& m, const char* kind) {
  std::vector<std::pair<std::string, int64_t>> out;
  std::string prefix = std::string("ffi.") + kind;
  int64_t n = G((prefix + "Size").c_str())(m).template cast<int64_t>();
  if (n == 0) return out;
  Function it = G((prefix + "ForwardIterFunctor").c_str())(m).template cast<Function>();
  while (true) {
    out.emplace_back(it(0).cast<String>(), it(1).cast<int64_t>());
    if (!it(2).cast<bool>()) break;
  }
  return out;
}

template <typename M>
std::vector<std::pair<std::string, int64_t>> CppIterate(const M& m) {
  std::vector<std::pair<std::string, int64_t>> out;
  for (auto kv : m) out.emplace_back(std::string(kv.first), kv.second);
  return out;
}

std::vector<std::pair<std::string, int64_t>> Expected(int n) {
  std::vector<std::pair<std::string, int64_t>> out;
  for (int i = 0; i < n; ++i) out.emplace_back(Key(i), i * 10);
  return out;
}

int64_t UseCount(const ObjectRef& o) { return o.use_count(); }

// ---------------------------------------------------------------------------------------------

void TestLibraryMapsReadInline() {
  for (int n : {0, 1, 2, 3, 4, 5, 6, 7, 8, 17, 100}) {
    Map<String, int64_t> m = LibMap(n);
    CHECK_EQ(static_cast<int64_t>(m.size()), int64_t(n));
    MapWords w = Words(m);
    if (n <= 4) {
      CHECK((w.slots & kSmallTag) != 0);
      CHECK_EQ(w.slots & ~kSmallTag, uint64_t(n <= 2 ? 2 : 4));
      CHECK(w.data == reinterpret_cast<const char*>(m.get()) + 56);
    } else {
      CHECK((w.slots & kSmallTag) == 0);
      CHECK(w.deleter != nullptr);
    }
    if (n == 6) {
      CHECK_EQ(w.slots, uint64_t(8));
      uint32_t fib_shift;
      std::memcpy(&fib_shift, reinterpret_cast<const char*>(m.get()) + 56, 4);
      CHECK_EQ(int64_t(fib_shift), int64_t(61));
    }
    for (int i = 0; i < n; ++i) {
      CHECK_EQ(m.at(String(Key(i))), int64_t(i * 10));
      CHECK_EQ(static_cast<int64_t>(m.count(String(Key(i)))), int64_t(1));
    }
    CHECK_EQ(static_cast<int64_t>(m.count(String("absent"))), int64_t(0));
    CHECK(!m.Get(String("absent")).has_value());
    CHECK(CppIterate(m) == Expected(n));
    CHECK(LibIterate(m, "Map") == Expected(n));
  }
}

void TestCppMapsThroughLibraryGlobals() {
  Function get = G("ffi.MapGetItem"), size = G("ffi.MapSize"), count = G("ffi.MapCount");
  Function get_or_missing = G("ffi.MapGetItemOrMissing");
  ObjectRef missing = G("ffi.GetInvalidObject")().cast<ObjectRef>();
  for (int n : {0, 1, 3, 4, 5, 9, 64}) {
    Map<String, int64_t> m = CppMap(n);
    CHECK_EQ(size(m).cast<int64_t>(), int64_t(n));
    for (int i = 0; i < n; ++i) {
      CHECK_EQ(get(m, String(Key(i))).cast<int64_t>(), int64_t(i * 10));
      // A short key passed as a heap-allocated std::string-backed String hashes the same.
      CHECK_EQ(count(m, String(std::string(Key(i)))).cast<int64_t>(), int64_t(1));
    }
    CHECK(LibIterate(m, "Map") == Expected(n));
    CHECK_EQ(count(m, String("absent")).cast<int64_t>(), int64_t(0));
    CHECK(get_or_missing(m, String("absent")).cast<ObjectRef>().same_as(missing));
    std::string msg = ExpectError("KeyError", get, m, String("absent"));
    CHECK_EQ(msg, std::string("key is not in Map"));
  }
  // Keys of several kinds: ints, floats, strings, bytes, None.
  Map<Any, Any> mixed;
  mixed.Set(1, String("int"));
  mixed.Set(1.0, String("float"));
  mixed.Set(true, String("bool"));
  mixed.Set(String("1"), String("str"));
  mixed.Set(Bytes("1", 1), String("bytes"));
  mixed.Set(nullptr, String("none"));
  CHECK_EQ(size(mixed).cast<int64_t>(), int64_t(6));
  CHECK_EQ(std::string(get(mixed, 1).cast<String>()), std::string("int"));
  CHECK_EQ(std::string(get(mixed, 1.0).cast<String>()), std::string("float"));
  CHECK_EQ(std::string(get(mixed, true).cast<String>()), std::string("bool"));
  CHECK_EQ(std::string(get(mixed, String("1")).cast<String>()), std::string("str"));
  CHECK_EQ(std::string(get(mixed, Bytes("1", 1)).cast<String>()), std::string("bytes"));
  CHECK_EQ(std::string(get(mixed, nullptr).cast<String>()), std::string("none"));
}

void TestMapCopyOnWriteOfLibraryMaps() {
  for (int n : {3, 4, 5, 7, 8, 40}) {
    Map<String, int64_t> a = LibMap(n);
    Map<String, int64_t> b = a;  // shared: Set must copy
    a.Set(String("extra"), 1);
    CHECK(!a.same_as(b));
    CHECK_EQ(static_cast<int64_t>(a.size()), int64_t(n + 1));
    CHECK_EQ(static_cast<int64_t>(b.size()), int64_t(n));
    CHECK_EQ(G("ffi.MapSize")(b).cast<int64_t>(), int64_t(n));
    CHECK_EQ(G("ffi.MapGetItem")(a, String("extra")).cast<int64_t>(), int64_t(1));
    CHECK_EQ(G("ffi.MapCount")(b, String("extra")).cast<int64_t>(), int64_t(0));
    // Unique: in place (or a grown container), including small -> dense and rehashes, which
    // release the library's storage through its own deleter.
    Map<String, int64_t> u = LibMap(n);
    for (int i = n; i < n + 40; ++i) u.Set(String(Key(i)), i * 10);
    CHECK(CppIterate(u) == Expected(n + 40));
    CHECK(LibIterate(u, "Map") == Expected(n + 40));
    // Erase (copy-on-write when shared).
    Map<String, int64_t> v = u;
    v.erase(String(Key(0)));
    CHECK_EQ(static_cast<int64_t>(v.size()), int64_t(n + 39));
    CHECK_EQ(static_cast<int64_t>(u.size()), int64_t(n + 40));
    CHECK_EQ(G("ffi.MapCount")(v, String(Key(0))).cast<int64_t>(), int64_t(0));
    CHECK_EQ(G("ffi.MapGetItem")(v, String(Key(n + 39))).cast<int64_t>(), int64_t((n + 39) * 10));
  }
}

void TestDictInPlaceBothWays() {
  // A library Dict mutated by inline C++: growth switches the same object in place.
  Dict<String, int64_t> d = LibDict(2);
  const Object* obj = d.get();
  for (int i = 2; i < 50; ++i) d.Set(String(Key(i)), i * 10);
  CHECK(d.get() == obj);
  CHECK(LibIterate(d, "Dict") == Expected(50));
  for (int i = 0; i < 50; i += 2) d.erase(String(Key(i)));
  CHECK_EQ(G("ffi.DictSize")(d).cast<int64_t>(), int64_t(25));
  for (int i = 1; i < 50; i += 2) CHECK_EQ(G("ffi.DictGetItem")(d, String(Key(i))).cast<int64_t>(), int64_t(i * 10));
  d.clear();
  CHECK_EQ(G("ffi.DictSize")(d).cast<int64_t>(), int64_t(0));

  // A C++ Dict mutated through the library's globals: every holder sees the change.
  Dict<String, int64_t> c;
  Dict<String, int64_t> alias = c;
  Function set = G("ffi.DictSetItem"), erase = G("ffi.DictErase");
  for (int i = 0; i < 30; ++i) set(c, String(Key(i)), int64_t(i * 10));
  CHECK(alias.get() == c.get());
  CHECK_EQ(static_cast<int64_t>(alias.size()), int64_t(30));
  CHECK(CppIterate(alias) == Expected(30));
  for (int i = 0; i < 30; ++i) CHECK_EQ(alias.at(String(Key(i))), int64_t(i * 10));
  erase(c, String(Key(5)));
  erase(c, String("absent"));
  CHECK_EQ(static_cast<int64_t>(alias.size()), int64_t(29));
  CHECK(!alias.Get(String(Key(5))).has_value());
  set(c, String(Key(0)), int64_t(-1));  // dense update moves the key to the end
  CHECK_EQ(CppIterate(alias).back().first, Key(0));
  G("ffi.DictClear")(c);
  CHECK(alias.empty());

  // Small dicts: C++ growth of a library small dict, library growth of a C++ small dict.
  Dict<String, int64_t> s1 = LibDict(1);
  s1.Set(String("b"), 2);
  s1.Set(String("c"), 3);
  CHECK_EQ(G("ffi.DictSize")(s1).cast<int64_t>(), int64_t(3));
  CHECK_EQ(G("ffi.DictGetItem")(s1, String("c")).cast<int64_t>(), int64_t(3));
  Dict<String, int64_t> s2;
  s2.Set(String("a"), 1);
  set(s2, String("b"), int64_t(2));
  set(s2, String("c"), int64_t(3));
  set(s2, String("d"), int64_t(4));
  set(s2, String("e"), int64_t(5));
  CHECK_EQ(static_cast<int64_t>(s2.size()), int64_t(5));
  CHECK_EQ(s2.at(String("e")), int64_t(5));
  s2.Set(String("f"), 6);
  CHECK_EQ(G("ffi.DictGetItem")(s2, String("f")).cast<int64_t>(), int64_t(6));
}

void TestArraysAndLists() {
  // Library Array read inline; push_back copies (the library array is shared by `a`).
  Array<int64_t> a = G("ffi.Array")(1, 2, 3).cast<Array<int64_t>>();
  CHECK_EQ(static_cast<int64_t>(a.size()), int64_t(3));
  CHECK_EQ(a[0] + a[1] + a[2], int64_t(6));
  const SeqBaseObj* seq = reinterpret_cast<const SeqBaseObj*>(a.get());
  CHECK_EQ(static_cast<int64_t>(seq->capacity()), int64_t(3));
  Array<int64_t> b = a;
  b.push_back(4);
  CHECK_EQ(static_cast<int64_t>(a.size()), int64_t(3));
  CHECK_EQ(G("ffi.ArraySize")(b).cast<int64_t>(), int64_t(4));
  CHECK_EQ(G("ffi.ArrayGetItem")(b, 3).cast<int64_t>(), int64_t(4));
  CHECK(G("ffi.ArrayContains")(b, 4).cast<bool>());
  CHECK(!G("ffi.ArrayContains")(b, 4.0).cast<bool>());
  std::string msg = ExpectError("IndexError", G("ffi.ArrayGetItem"), b, 4);
  CHECK_EQ(msg, std::string("Index 4 out of bounds 4"));
  // C++ Array through the library.
  Array<String> strs{String("x"), String("a string long enough for the heap")};
  CHECK_EQ(std::string(G("ffi.ArrayGetItem")(strs, 1).cast<String>()),
           std::string("a string long enough for the heap"));
  CHECK(G("ffi.ArrayContains")(strs, String("x")).cast<bool>());

  // Library List grown by inline C++ (the C++ Reserve frees the library buffer through the
  // list's own deleter and keeps that deleter for its new buffer).
  List<int64_t> l = G("ffi.List")(1, 2, 3).cast<List<int64_t>>();
  CHECK_EQ(static_cast<int64_t>(l.capacity()), int64_t(4));
  for (int64_t i = 4; i <= 20; ++i) l.push_back(i);
  CHECK_EQ(G("ffi.ListSize")(l).cast<int64_t>(), int64_t(20));
  CHECK_EQ(G("ffi.ListGetItem")(l, 19).cast<int64_t>(), int64_t(20));
  // C++ List grown and edited by the library.
  List<int64_t> c{1, 2};
  List<int64_t> alias = c;
  for (int64_t i = 3; i <= 20; ++i) G("ffi.ListAppend")(c, i);
  G("ffi.ListInsert")(c, 0, int64_t(0));
  CHECK_EQ(static_cast<int64_t>(alias.size()), int64_t(21));
  CHECK_EQ(alias[0], int64_t(0));
  CHECK_EQ(alias[20], int64_t(20));
  CHECK_EQ(G("ffi.ListPop")(c, 0).cast<int64_t>(), int64_t(0));
  G("ffi.ListEraseRange")(c, 0, 10);
  CHECK_EQ(alias[0], int64_t(11));
  G("ffi.ListReverse")(c);
  CHECK_EQ(alias[0], int64_t(20));
  G("ffi.ListReplaceSlice")(c, 0, 2, List<int64_t>{7, 8, 9});
  CHECK_EQ(static_cast<int64_t>(alias.size()), int64_t(11));
  CHECK_EQ(alias[2], int64_t(9));
  G("ffi.ListSetItem")(c, 1, int64_t(-5));
  CHECK_EQ(alias[1], int64_t(-5));
  msg = ExpectError("IndexError", G("ffi.ListInsert"), c, 99, int64_t(0));
  CHECK_EQ(msg, std::string("Index 99 out of bounds [0, 11]"));
  G("ffi.ListClear")(c);
  CHECK(alias.empty());
}

void TestNoLeaks() {
  // Any object value works as a probe; an Array is an ObjectRef with a visible use count.
  ObjectRef value = Array<int64_t>{1, 2, 3};
  CHECK_EQ(UseCount(value), int64_t(1));
  {
    Map<String, ObjectRef> cm;
    for (int i = 0; i < 10; ++i) cm.Set(String(Key(i)), value);
    Any lm = G("ffi.Map")(String("a"), value, String("b"), value, String("c"), value, String("d"), value,
                         String("e"), value);
    Any ld = G("ffi.Dict")(String("a"), value);
    Dict<String, ObjectRef> d = ld.cast<Dict<String, ObjectRef>>();
    for (int i = 0; i < 10; ++i) d.Set(String(Key(i)), value);
    for (int i = 0; i < 10; i += 3) d.erase(String(Key(i)));
    Any la = G("ffi.Array")(value, value);
    Any ll = G("ffi.List")(value, value);
    List<ObjectRef> l = ll.cast<List<ObjectRef>>();
    for (int i = 0; i < 10; ++i) l.push_back(value);
    G("ffi.ListPop")(l, 0);
    Map<String, ObjectRef> m = lm.cast<Map<String, ObjectRef>>();
    Map<String, ObjectRef> m2 = m;
    m2.Set(String("f"), value);
    m2.erase(String("a"));
    G("ffi.DictSetItem")(ld, String("x"), value);
    CHECK(UseCount(value) > 1);
  }
  CHECK_EQ(UseCount(value), int64_t(1));
}

void TestSentinelsAndDevices() {
  ObjectRef a = G("ffi.GetInvalidObject")().cast<ObjectRef>();
  ObjectRef b = G("ffi.GetInvalidObject")().cast<ObjectRef>();
  ObjectRef k = G("ffi.GetKwargsObject")().cast<ObjectRef>();
  CHECK(a.same_as(b));
  CHECK(!a.same_as(k));
  CHECK_EQ(a->type_index(), int32_t(TypeIndex::kTVMFFIObject));
  DLDevice dev = G("ffi.ContainerFindFirstNonCPUDevice")(Array<int64_t>{1, 2}).cast<DLDevice>();
  CHECK_EQ(int64_t(dev.device_type), int64_t(kDLCPU));
  Array<String> keys = G("ffi.GetRegisteredTypeKeys")().cast<Array<String>>();
  bool has_map = false;
  for (const String& key : keys) has_map = has_map || key == "ffi.Map";
  CHECK(has_map);
}

// The official C++ testing library (its NEEDED libtvm_ffi.so is the one already loaded) checks
// and returns library-made containers with its own inline header code.
void TestOfficialTestingLibrary() {
  const char* path = std::getenv("TVM_FFI_TESTING_LIB");
  if (path == nullptr || dlopen(path, RTLD_NOW | RTLD_LOCAL) == nullptr) {
    std::printf("skip: TVM_FFI_TESTING_LIB not set or not loadable\n");
    return;
  }
  Map<String, int64_t> m = LibMap(9);
  Any same = G("testing.schema_id_map_str_int")(m);
  CHECK(same.cast<ObjectRef>().same_as(m));
  Any bad = G("ffi.Map")(String("a"), String("x"));
  std::string msg = ExpectError("TypeError", G("testing.schema_id_map_str_int"), bad);
  CHECK(msg.find("some value is") != std::string::npos);
  Dict<String, int64_t> d = LibDict(3);
  CHECK(G("testing.schema_id_dict_str_int")(d).cast<ObjectRef>().same_as(d));
  Any a = G("ffi.Array")(1, 2, 3);
  CHECK(G("testing.schema_id_arr_int")(a).cast<ObjectRef>().same_as(a.cast<ObjectRef>()));
  Any l = G("ffi.List")(1, 2, 3);
  CHECK(G("testing.schema_id_list_int")(l).cast<ObjectRef>().same_as(l.cast<ObjectRef>()));
  // An Array where a List<int> is declared is converted by the testing library's header code.
  CHECK_EQ(G("testing.schema_id_list_int")(a).type_index(), int32_t(TypeIndex::kTVMFFIList));
  Map<String, Array<int64_t>> nested =
      G("testing.schema_arr_map_opt")(Array<Optional<int64_t>>{1, std::nullopt},
                                      G("ffi.Map")(String("k"), Array<int64_t>{4, 5}), nullptr)
          .cast<Map<String, Array<int64_t>>>();
  CHECK_EQ(nested.at(String("k"))[1], int64_t(5));
}

}  // namespace

int main() {
  Run("library maps read by inline C++", TestLibraryMapsReadInline);
  Run("C++ maps through library globals", TestCppMapsThroughLibraryGlobals);
  Run("Map copy-on-write of library maps", TestMapCopyOnWriteOfLibraryMaps);
  Run("Dict in place, both ways", TestDictInPlaceBothWays);
  Run("Array and List, both ways", TestArraysAndLists);
  Run("no leaked references", TestNoLeaks);
  Run("sentinels, devices, type keys", TestSentinelsAndDevices);
  Run("official testing library on these containers", TestOfficialTestingLibrary);
  std::printf("%d passed, %d failed\n", g_passed, g_failed);
  return g_failed == 0 ? 0 : 1;
}
