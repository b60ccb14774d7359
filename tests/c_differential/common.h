/* common.h: case registry and output helpers of the C ABI differential driver.
 *
 * The driver is compiled against the OFFICIAL headers and linked without an rpath; the library
 * under test is whichever libtvm_ffi.so LD_LIBRARY_PATH finds. Every case prints facts to stdout,
 * one per line, and both libraries' outputs are compared line by line:
 *   plain lines -> compared exactly (a difference is "value", "kind" or "msg", see driver.py)
 *   "~..." lines -> informational (backtrace text, sizes, pointer identity of implementation
 *                   details); a difference only there is "soft" and never fails.
 * Output must not depend on the machine, the run or addresses: no pointers, no timing.
 */
#ifndef CDIFF_COMMON_H_
#define CDIFF_COMMON_H_
#define _GNU_SOURCE
#include <dlpack/dlpack.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <tvm/ffi/c_api.h>
#include <tvm/ffi/extra/c_env_api.h>

typedef void (*case_fn)(long param);
/* novg: NULL, or why the case is not run under valgrind (it leaks or reads stale memory on
 * purpose, or is too slow there); `cdiff list` prints it. */
void cf_register(const char* name, case_fn fn, long param, const char* novg);

#define CASE_IMPL(name, novg)                                              \
  static void cf_case_##name(long param);                                  \
  __attribute__((constructor)) static void cf_reg_##name(void) {           \
    cf_register(#name, cf_case_##name, 0, novg);                           \
  }                                                                        \
  static void cf_case_##name(long param __attribute__((unused)))
#define CASE(name) CASE_IMPL(name, NULL)
#define CASE_NOVG(name, reason) CASE_IMPL(name, reason)

void P(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
/* escape (data,size) into a malloc'd printable string (long data summarised) */
char* esc(const char* d, size_t n);
/* print "<what> rc=<rc>" and the raised error when rc != 0 */
void pr_rc(const char* what, int rc);
/* move the TLS error out and print it ("<prefix> err=none" when empty) */
void pr_err(const char* prefix);
void pr_err_obj(const char* prefix, void* e);
/* print an owned Any and release it */
void pr_any_release(const char* what, TVMFFIAny* a);
void pr_any(const char* what, const TVMFFIAny* a);
void pr_tensor(const char* what, void* t);
void pr_dltensor(const char* what, const DLTensor* t);
void any_release(TVMFFIAny* a);
TVMFFIAny a_none(void);
TVMFFIAny a_int(int64_t v);
TVMFFIAny a_raw(const char* s);
TVMFFIAny a_obj(void* o);
TVMFFIByteArray ba(const char* s);
TVMFFIByteArray ban(const char* s, size_t n);
void* get_global(const char* name);
int call(void* f, TVMFFIAny* args, int n, TVMFFIAny* rv);
uint32_t strong_count(void* o);
void* make_str_obj(const char* s); /* heap ffi.String object (callers pass > 7 bytes) */
uint64_t fnv(const void* d, size_t n);
/* a zeroed CPU DLTensor with one lane of (code, bits); strides NULL, byte_offset 0 */
DLTensor cpu_dl(void* data, int32_t ndim, int64_t* shape, uint8_t code, uint8_t bits);

#endif
