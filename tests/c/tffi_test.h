/*
 * tffi_test.h: a tiny test framework plus helpers for the TVM FFI C ABI
 * conformance suite.
 *
 * The suite is compiled against the OFFICIAL apache-tvm-ffi headers and linked
 * with -ltvm_ffi (no rpath), so the same binary can be pointed at either the
 * official libtvm_ffi.so or ours through LD_LIBRARY_PATH.
 *
 * Framework:
 *   TEST(name) { ... }   defines and registers a test (run in file/line order).
 *   CHECK*(...)          records file:line on failure and continues.
 *   REQUIRE*(...)        like CHECK but returns from the test on failure
 *                        (use it before dereferencing a result).
 *   SKIP("why")          marks the test skipped and returns.
 *
 * Ownership rule for every test: free everything you create (DecRef objects,
 * release owned Anys, call DLPack deleters), so that valgrind reports no
 * definite leaks against the official library.
 */
#ifndef TFFI_TEST_H_
#define TFFI_TEST_H_

#include <dlpack/dlpack.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <tvm/ffi/c_api.h>
#include <tvm/ffi/extra/c_env_api.h>

/* ------------------------------------------------------------------------ */
/* Registration and bookkeeping                                             */
/* ------------------------------------------------------------------------ */

typedef void (*tffi_test_fn)(void);

void tffi_register(const char* name, const char* file, int line, tffi_test_fn fn);
void tffi_fail(const char* file, int line, const char* fmt, ...)
    __attribute__((format(printf, 3, 4)));
void tffi_pass(void);
void tffi_skip(const char* file, int line, const char* reason);
/* Number of failed checks in the current test so far. */
int tffi_current_failures(void);

#define TFFI_CAT2(a, b) a##b
#define TFFI_CAT(a, b) TFFI_CAT2(a, b)

#define TEST(name)                                                      \
  static void TFFI_CAT(tffi_test_, name)(void);                         \
  __attribute__((constructor)) static void TFFI_CAT(tffi_reg_, name)(void) { \
    tffi_register(#name, __FILE__, __LINE__, TFFI_CAT(tffi_test_, name));   \
  }                                                                     \
  static void TFFI_CAT(tffi_test_, name)(void)

#define SKIP(reason)                         \
  do {                                       \
    tffi_skip(__FILE__, __LINE__, (reason)); \
    return;                                  \
  } while (0)

/* ------------------------------------------------------------------------ */
/* Checks                                                                   */
/* ------------------------------------------------------------------------ */

#define CHECK(cond)                                           \
  do {                                                        \
    if (cond) {                                               \
      tffi_pass();                                            \
    } else {                                                  \
      tffi_fail(__FILE__, __LINE__, "CHECK(%s)", #cond);      \
    }                                                         \
  } while (0)

#define REQUIRE(cond)                                         \
  do {                                                        \
    if (cond) {                                               \
      tffi_pass();                                            \
    } else {                                                  \
      tffi_fail(__FILE__, __LINE__, "REQUIRE(%s)", #cond);    \
      return;                                                 \
    }                                                         \
  } while (0)

#define TFFI_CHECK_EQ_I64_IMPL(a, b, on_fail)                                          \
  do {                                                                                 \
    long long tffi_a_ = (long long)(a), tffi_b_ = (long long)(b);                      \
    if (tffi_a_ == tffi_b_) {                                                          \
      tffi_pass();                                                                     \
    } else {                                                                           \
      tffi_fail(__FILE__, __LINE__, "%s == %s (%lld vs %lld)", #a, #b, tffi_a_, tffi_b_); \
      on_fail;                                                                         \
    }                                                                                  \
  } while (0)

#define TFFI_CHECK_EQ_U64_IMPL(a, b, on_fail)                                     \
  do {                                                                            \
    unsigned long long tffi_a_ = (unsigned long long)(a);                         \
    unsigned long long tffi_b_ = (unsigned long long)(b);                         \
    if (tffi_a_ == tffi_b_) {                                                     \
      tffi_pass();                                                                \
    } else {                                                                      \
      tffi_fail(__FILE__, __LINE__, "%s == %s (0x%llx vs 0x%llx)", #a, #b, tffi_a_, \
                tffi_b_);                                                         \
      on_fail;                                                                    \
    }                                                                             \
  } while (0)

#define TFFI_NOTHING ((void)0)
/* Signed integer equality. */
#define CHECK_EQ(a, b) TFFI_CHECK_EQ_I64_IMPL(a, b, TFFI_NOTHING)
#define REQUIRE_EQ(a, b) TFFI_CHECK_EQ_I64_IMPL(a, b, return)
/* Unsigned equality, printed in hex (refcount words, bit patterns). */
#define CHECK_EQ_HEX(a, b) TFFI_CHECK_EQ_U64_IMPL(a, b, TFFI_NOTHING)
#define REQUIRE_EQ_HEX(a, b) TFFI_CHECK_EQ_U64_IMPL(a, b, return)

#define CHECK_PTR_EQ(a, b)                                                               \
  do {                                                                                   \
    const void* tffi_a_ = (const void*)(a);                                              \
    const void* tffi_b_ = (const void*)(b);                                              \
    if (tffi_a_ == tffi_b_) {                                                            \
      tffi_pass();                                                                       \
    } else {                                                                             \
      tffi_fail(__FILE__, __LINE__, "%s == %s (%p vs %p)", #a, #b, tffi_a_, tffi_b_);    \
    }                                                                                    \
  } while (0)

/* Compare (data,size) with a NUL-terminated expected string. */
#define CHECK_BYTES(data, size, expected)                                               \
  tffi_check_bytes(__FILE__, __LINE__, #data, (const char*)(data), (size_t)(size),       \
                   (expected), strlen(expected))
/* Compare (data,size) with (expected,expected_size); binary-safe. */
#define CHECK_BYTES_N(data, size, expected, expected_size)                              \
  tffi_check_bytes(__FILE__, __LINE__, #data, (const char*)(data), (size_t)(size),       \
                   (const char*)(expected), (size_t)(expected_size))
/* Compare a TVMFFIByteArray with a NUL-terminated expected string. */
#define CHECK_BA(ba, expected) CHECK_BYTES((ba).data, (ba).size, expected)
void tffi_check_bytes(const char* file, int line, const char* what, const char* data,
                      size_t size, const char* expected, size_t expected_size);

/* rc must be 0; otherwise the pending error is printed and consumed. */
#define CHECK_OK(expr) tffi_check_ok(__FILE__, __LINE__, #expr, (expr))
#define REQUIRE_OK(expr)                                         \
  do {                                                           \
    if (!tffi_check_ok(__FILE__, __LINE__, #expr, (expr))) return; \
  } while (0)
int tffi_check_ok(const char* file, int line, const char* what, int rc);

/*
 * rc must be -1 and the TLS error slot must hold an ffi.Error of the given kind
 * whose message contains msg_substr, compared case-insensitively (NULL: do
 * not check the message). The
 * error is consumed. Returns 1 when everything matched.
 */
#define CHECK_RAISES(expr, kind, msg_substr) \
  tffi_check_raises(__FILE__, __LINE__, #expr, (expr), (kind), (msg_substr))
int tffi_check_raises(const char* file, int line, const char* what, int rc, const char* kind,
                      const char* msg_substr);

/* The TLS error slot must be empty (consumes and reports a stale error). */
#define CHECK_NO_PENDING_ERROR() tffi_check_no_pending_error(__FILE__, __LINE__)
void tffi_check_no_pending_error(const char* file, int line);

/* ------------------------------------------------------------------------ */
/* Helpers                                                                  */
/* ------------------------------------------------------------------------ */

/* Byte array over a C string (borrowed). */
static inline TVMFFIByteArray tffi_ba(const char* s) {
  TVMFFIByteArray r;
  r.data = s;
  r.size = strlen(s);
  return r;
}

/* Strong+weak combined count word of an object (atomic load). */
static inline uint64_t tffi_refcount(void* obj) {
  return __atomic_load_n(&((TVMFFIObject*)obj)->combined_ref_count, __ATOMIC_SEQ_CST);
}
static inline uint32_t tffi_strong(void* obj) { return (uint32_t)(tffi_refcount(obj) & 0xFFFFFFFFu); }
static inline int32_t tffi_type_index(void* obj) { return ((TVMFFIObject*)obj)->type_index; }
/* Pointer to the payload right after the 24-byte object header. */
static inline void* tffi_cell(void* obj) { return (char*)obj + sizeof(TVMFFIObject); }

static inline TVMFFIAny tffi_none(void) {
  TVMFFIAny a;
  memset(&a, 0, sizeof(a));
  a.type_index = kTVMFFINone;
  return a;
}
static inline TVMFFIAny tffi_int(int64_t v) {
  TVMFFIAny a = tffi_none();
  a.type_index = kTVMFFIInt;
  a.v_int64 = v;
  return a;
}
static inline TVMFFIAny tffi_float(double v) {
  TVMFFIAny a = tffi_none();
  a.type_index = kTVMFFIFloat;
  a.v_float64 = v;
  return a;
}
static inline TVMFFIAny tffi_bool(int v) {
  TVMFFIAny a = tffi_none();
  a.type_index = kTVMFFIBool;
  a.v_int64 = v ? 1 : 0;
  return a;
}
static inline TVMFFIAny tffi_opaque_ptr(void* p) {
  TVMFFIAny a = tffi_none();
  a.type_index = kTVMFFIOpaquePtr;
  a.v_ptr = p;
  return a;
}
/* A borrowed view on a C string (type RawStr, as AnyView only). */
static inline TVMFFIAny tffi_raw_str(const char* s) {
  TVMFFIAny a = tffi_none();
  a.type_index = kTVMFFIRawStr;
  a.v_c_str = s;
  return a;
}
/* A borrowed view on an object (type taken from its header). */
static inline TVMFFIAny tffi_obj_view(void* obj) {
  TVMFFIAny a = tffi_none();
  a.type_index = tffi_type_index(obj);
  a.v_obj = (TVMFFIObject*)obj;
  return a;
}

/* Release an owned Any (DecRef when it holds an object) and reset it to None. */
void tffi_any_release(TVMFFIAny* a);

/*
 * If `a` holds a string (SmallStr 11 or Str 65), write a borrowed view on its
 * content into *out and return 1; otherwise return 0. Bytes (12/66) too when
 * allow_bytes is nonzero.
 */
int tffi_any_string_view(const TVMFFIAny* a, TVMFFIByteArray* out, int allow_bytes);

/* Check `a` is a string (either encoding) equal to expected. */
#define CHECK_ANY_STR(a, expected) tffi_check_any_str(__FILE__, __LINE__, #a, (a), (expected))
void tffi_check_any_str(const char* file, int line, const char* what, const TVMFFIAny* a,
                        const char* expected);

/* Owned Any string built with TVMFFIStringFromByteArray (caller releases). */
TVMFFIAny tffi_make_string(const char* s);

/* New reference to a global function, or NULL when it is not registered. */
void* tffi_get_global(const char* name);

/* Whether the library under test is anyffi (it always registers anyffi.testing.*): tests of
 * behaviour the official library lacks (or exits on) skip without it. */
int tffi_is_anyffi(void);

/*
 * Call a function object. *result is initialised to None first. Returns the
 * library's return code.
 */
int tffi_call(void* func, TVMFFIAny* args, int32_t num_args, TVMFFIAny* result);

/* Drop whatever error is pending in this thread's TLS slot. */
void tffi_clear_error(void);

/*
 * Temporarily send stderr to /dev/null around calls where the library is
 * documented to log (e.g. TVMFFITypeRegisterMetadata on a duplicate), so the
 * suite's output stays readable. Calls must be paired; not nestable.
 */
void tffi_stderr_silence(void);
void tffi_stderr_restore(void);

/*
 * Collect what is written to stderr (file descriptor 2) between the two calls;
 * _end returns it NUL-terminated (malloc'd, caller frees; "" if capturing failed).
 * Calls must be paired; not nestable, not combined with tffi_stderr_silence.
 */
void tffi_stderr_capture_begin(void);
char* tffi_stderr_capture_end(void);

#endif /* TFFI_TEST_H_ */
