/*
 * tffi_main.c: runner and shared helpers for the C conformance suite.
 *
 * Usage: tffi_tests [--no-fork] [--list] [--timeout SECONDS] [FILTER...]
 *
 * By default every test runs in its own forked child so that a crash or hang
 * in the library under test is reported as one failed test and the rest of
 * the suite still runs (each test then also sees the library's pristine
 * post-load state). --no-fork runs everything in one process (used under
 * valgrind). A FILTER selects tests whose name contains it.
 *
 * The last line of output is exactly "N passed, N failed" (plus
 * ", N skipped" when some tests were skipped); the exit status is nonzero
 * when any test failed.
 */
#define _GNU_SOURCE /* dladdr */
#include <dlfcn.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <fcntl.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tffi_test.h"

#define TFFI_MAX_TESTS 1024
#define TFFI_EXIT_PASS 0
#define TFFI_EXIT_FAIL 1
#define TFFI_EXIT_SKIP 77

typedef struct {
  const char* name;
  const char* file;
  int line;
  tffi_test_fn fn;
} tffi_test_entry;

static tffi_test_entry g_tests[TFFI_MAX_TESTS];
static int g_num_tests = 0;

/* State of the test currently running. */
static int g_cur_failures = 0;
static int g_cur_checks = 0;
static int g_cur_skipped = 0;

void tffi_register(const char* name, const char* file, int line, tffi_test_fn fn) {
  if (g_num_tests >= TFFI_MAX_TESTS) {
    fprintf(stderr, "tffi: too many tests (raise TFFI_MAX_TESTS)\n");
    abort();
  }
  g_tests[g_num_tests].name = name;
  g_tests[g_num_tests].file = file;
  g_tests[g_num_tests].line = line;
  g_tests[g_num_tests].fn = fn;
  ++g_num_tests;
}

static const char* tffi_basename(const char* path) {
  const char* s = strrchr(path, '/');
  return s ? s + 1 : path;
}

void tffi_fail(const char* file, int line, const char* fmt, ...) {
  va_list ap;
  ++g_cur_failures;
  ++g_cur_checks;
  printf("    %s:%d: FAILED: ", tffi_basename(file), line);
  va_start(ap, fmt);
  vprintf(fmt, ap);
  va_end(ap);
  printf("\n");
  fflush(stdout);
}

void tffi_pass(void) { ++g_cur_checks; }

int tffi_current_failures(void) { return g_cur_failures; }

void tffi_skip(const char* file, int line, const char* reason) {
  g_cur_skipped = 1;
  printf("    %s:%d: skipped: %s\n", tffi_basename(file), line, reason);
  fflush(stdout);
}

static void tffi_print_escaped(const char* data, size_t size) {
  size_t i;
  putchar('"');
  for (i = 0; i < size && i < 200; ++i) {
    unsigned char c = (unsigned char)data[i];
    if (c >= 32 && c < 127 && c != '"' && c != '\\') {
      putchar(c);
    } else {
      printf("\\x%02x", c);
    }
  }
  if (size > 200) printf("...");
  putchar('"');
}

void tffi_check_bytes(const char* file, int line, const char* what, const char* data,
                      size_t size, const char* expected, size_t expected_size) {
  if (data != NULL && size == expected_size && memcmp(data, expected, size) == 0) {
    tffi_pass();
    return;
  }
  tffi_fail(file, line, "%s: content mismatch", what);
  printf("      got      (%zu bytes): ", size);
  if (data == NULL) {
    printf("NULL");
  } else {
    tffi_print_escaped(data, size);
  }
  printf("\n      expected (%zu bytes): ", expected_size);
  tffi_print_escaped(expected, expected_size);
  printf("\n");
  fflush(stdout);
}

/* Print the pending error (kind + message) and release it. */
static void tffi_report_and_drop_error(void) {
  void* err = NULL;
  TVMFFIErrorMoveFromRaised(&err);
  if (err == NULL) {
    printf("      (no error was set in TLS)\n");
    return;
  }
  if (tffi_type_index(err) == kTVMFFIError) {
    TVMFFIErrorCell* cell = (TVMFFIErrorCell*)tffi_cell(err);
    printf("      pending error: kind=");
    tffi_print_escaped(cell->kind.data, cell->kind.size);
    printf(" message=");
    tffi_print_escaped(cell->message.data, cell->message.size);
    printf("\n");
  } else {
    printf("      pending error object has type_index %d, not ffi.Error\n", tffi_type_index(err));
  }
  TVMFFIObjectDecRef(err);
}

int tffi_check_ok(const char* file, int line, const char* what, int rc) {
  if (rc == 0) {
    tffi_pass();
    return 1;
  }
  tffi_fail(file, line, "%s returned %d, expected 0", what, rc);
  tffi_report_and_drop_error();
  fflush(stdout);
  return 0;
}

int tffi_check_raises(const char* file, int line, const char* what, int rc, const char* kind,
                      const char* msg_substr) {
  void* err = NULL;
  int ok = 1;
  if (rc != -1) {
    tffi_fail(file, line, "%s returned %d, expected -1 (%s)", what, rc, kind);
    if (rc == 0) return 0;
    ok = 0;
  }
  TVMFFIErrorMoveFromRaised(&err);
  if (err == NULL) {
    tffi_fail(file, line, "%s: no error set in TLS (expected %s)", what, kind);
    return 0;
  }
  if (tffi_type_index(err) != kTVMFFIError) {
    tffi_fail(file, line, "%s: raised object has type_index %d, expected ffi.Error (67)", what,
              tffi_type_index(err));
    TVMFFIObjectDecRef(err);
    return 0;
  }
  {
    TVMFFIErrorCell* cell = (TVMFFIErrorCell*)tffi_cell(err);
    size_t klen = strlen(kind);
    if (cell->kind.size != klen || memcmp(cell->kind.data, kind, klen) != 0) {
      tffi_fail(file, line, "%s: error kind mismatch, expected %s", what, kind);
      printf("      got kind=");
      tffi_print_escaped(cell->kind.data, cell->kind.size);
      printf(" message=");
      tffi_print_escaped(cell->message.data, cell->message.size);
      printf("\n");
      ok = 0;
    }
    if (msg_substr != NULL) {
      /* The message is NUL-terminated only by convention; search within size. */
      size_t n = strlen(msg_substr);
      int found = 0;
      size_t i;
      for (i = 0; n <= cell->message.size && i + n <= cell->message.size; ++i) {
        if (strncasecmp(cell->message.data + i, msg_substr, n) == 0) {
          found = 1;
          break;
        }
      }
      if (!found) {
        tffi_fail(file, line, "%s: error message does not contain \"%s\"", what, msg_substr);
        printf("      got message=");
        tffi_print_escaped(cell->message.data, cell->message.size);
        printf("\n");
        ok = 0;
      }
    }
  }
  TVMFFIObjectDecRef(err);
  if (ok) tffi_pass();
  fflush(stdout);
  return ok;
}

void tffi_check_no_pending_error(const char* file, int line) {
  void* err = NULL;
  TVMFFIErrorMoveFromRaised(&err);
  if (err == NULL) {
    tffi_pass();
    return;
  }
  tffi_fail(file, line, "unexpected pending error in TLS");
  if (tffi_type_index(err) == kTVMFFIError) {
    TVMFFIErrorCell* cell = (TVMFFIErrorCell*)tffi_cell(err);
    printf("      kind=");
    tffi_print_escaped(cell->kind.data, cell->kind.size);
    printf(" message=");
    tffi_print_escaped(cell->message.data, cell->message.size);
    printf("\n");
  }
  TVMFFIObjectDecRef(err);
}

void tffi_any_release(TVMFFIAny* a) {
  if (a->type_index >= kTVMFFIStaticObjectBegin && a->v_obj != NULL) {
    TVMFFIObjectDecRef(a->v_obj);
  }
  *a = tffi_none();
}

int tffi_any_string_view(const TVMFFIAny* a, TVMFFIByteArray* out, int allow_bytes) {
  if (a->type_index == kTVMFFISmallStr || (allow_bytes && a->type_index == kTVMFFISmallBytes)) {
    out->data = a->v_bytes;
    out->size = a->small_str_len;
    return 1;
  }
  if (a->type_index == kTVMFFIStr || (allow_bytes && a->type_index == kTVMFFIBytes)) {
    *out = *(const TVMFFIByteArray*)tffi_cell(a->v_obj);
    return 1;
  }
  return 0;
}

void tffi_check_any_str(const char* file, int line, const char* what, const TVMFFIAny* a,
                        const char* expected) {
  TVMFFIByteArray view;
  if (!tffi_any_string_view(a, &view, 0)) {
    tffi_fail(file, line, "%s: expected a string Any, got type_index %d", what, a->type_index);
    return;
  }
  tffi_check_bytes(file, line, what, view.data, view.size, expected, strlen(expected));
}

TVMFFIAny tffi_make_string(const char* s) {
  TVMFFIByteArray ba = tffi_ba(s);
  TVMFFIAny out = tffi_none();
  if (TVMFFIStringFromByteArray(&ba, &out) != 0) {
    tffi_clear_error();
    out = tffi_none();
  }
  return out;
}

void* tffi_get_global(const char* name) {
  TVMFFIByteArray ba = tffi_ba(name);
  void* f = NULL;
  if (TVMFFIFunctionGetGlobal(&ba, &f) != 0) {
    tffi_clear_error();
    return NULL;
  }
  return f;
}

int tffi_is_anyffi(void) {
  void* f = tffi_get_global("anyffi.testing.nop");
  if (f == NULL) return 0;
  TVMFFIObjectDecRef(f);
  return 1;
}

int tffi_call(void* func, TVMFFIAny* args, int32_t num_args, TVMFFIAny* result) {
  *result = tffi_none();
  return TVMFFIFunctionCall(func, args, num_args, result);
}

void tffi_clear_error(void) {
  void* err = NULL;
  TVMFFIErrorMoveFromRaised(&err);
  if (err != NULL) TVMFFIObjectDecRef(err);
}

static int g_saved_stderr = -1;

void tffi_stderr_silence(void) {
  int devnull;
  if (g_saved_stderr >= 0) return;
  fflush(stderr);
  g_saved_stderr = dup(2);
  devnull = open("/dev/null", O_WRONLY);
  if (devnull >= 0) {
    dup2(devnull, 2);
    close(devnull);
  }
}

void tffi_stderr_restore(void) {
  if (g_saved_stderr < 0) return;
  fflush(stderr);
  dup2(g_saved_stderr, 2);
  close(g_saved_stderr);
  g_saved_stderr = -1;
}

static int g_capture_saved_stderr = -1;
static FILE* g_capture_file = NULL;

void tffi_stderr_capture_begin(void) {
  if (g_capture_saved_stderr >= 0) return;
  fflush(stderr);
  g_capture_file = tmpfile();
  if (g_capture_file == NULL) return;
  g_capture_saved_stderr = dup(2);
  dup2(fileno(g_capture_file), 2);
}

char* tffi_stderr_capture_end(void) {
  char* text;
  long n;
  if (g_capture_saved_stderr < 0) {
    text = (char*)malloc(1);
    if (text != NULL) text[0] = '\0';
    return text;
  }
  fflush(stderr);
  dup2(g_capture_saved_stderr, 2);
  close(g_capture_saved_stderr);
  g_capture_saved_stderr = -1;
  fseek(g_capture_file, 0, SEEK_END);
  n = ftell(g_capture_file);
  if (n < 0) n = 0;
  rewind(g_capture_file);
  text = (char*)malloc((size_t)n + 1);
  if (text != NULL) {
    size_t got = fread(text, 1, (size_t)n, g_capture_file);
    text[got] = '\0';
  }
  fclose(g_capture_file);
  g_capture_file = NULL;
  return text;
}

/* ------------------------------------------------------------------------ */
/* Runner                                                                   */
/* ------------------------------------------------------------------------ */

static int tffi_entry_cmp(const void* pa, const void* pb) {
  const tffi_test_entry* a = (const tffi_test_entry*)pa;
  const tffi_test_entry* b = (const tffi_test_entry*)pb;
  int c = strcmp(a->file, b->file);
  if (c != 0) return c;
  return a->line - b->line;
}

/* Run one test in this process; returns a TFFI_EXIT_* code. */
static int tffi_run_inline(const tffi_test_entry* t) {
  g_cur_failures = 0;
  g_cur_checks = 0;
  g_cur_skipped = 0;
  tffi_clear_error();
  t->fn();
  tffi_clear_error();
  fflush(stdout);
  if (g_cur_failures > 0) return TFFI_EXIT_FAIL;
  if (g_cur_skipped) return TFFI_EXIT_SKIP;
  return TFFI_EXIT_PASS;
}

static int tffi_run_forked(const tffi_test_entry* t, unsigned timeout_s) {
  pid_t pid;
  int status = 0;
  fflush(stdout);
  fflush(stderr);
  pid = fork();
  if (pid < 0) {
    perror("fork");
    return tffi_run_inline(t);
  }
  if (pid == 0) {
    int code;
    if (timeout_s > 0) alarm(timeout_s);
    code = tffi_run_inline(t);
    fflush(stdout);
    fflush(stderr);
    _exit(code);
  }
  if (waitpid(pid, &status, 0) < 0) {
    perror("waitpid");
    return TFFI_EXIT_FAIL;
  }
  if (WIFEXITED(status)) {
    int code = WEXITSTATUS(status);
    if (code == TFFI_EXIT_PASS || code == TFFI_EXIT_SKIP) return code;
    if (code != TFFI_EXIT_FAIL) printf("    test process exited with status %d\n", code);
    return TFFI_EXIT_FAIL;
  }
  if (WIFSIGNALED(status)) {
    int sig = WTERMSIG(status);
    if (sig == SIGALRM) {
      printf("    TIMEOUT after %u s\n", timeout_s);
    } else {
      printf("    CRASHED: killed by signal %d\n", sig);
    }
  }
  return TFFI_EXIT_FAIL;
}

static void tffi_usage(const char* argv0) {
  printf("usage: %s [--no-fork] [--list] [--timeout SECONDS] [FILTER...]\n", argv0);
}

int main(int argc, char** argv) {
  int use_fork = 1, list_only = 0;
  unsigned timeout_s = 60;
  const char* filters[64];
  int num_filters = 0;
  int passed = 0, failed = 0, skipped = 0;
  int i;

  for (i = 1; i < argc; ++i) {
    if (strcmp(argv[i], "--no-fork") == 0) {
      use_fork = 0;
    } else if (strcmp(argv[i], "--list") == 0) {
      list_only = 1;
    } else if (strcmp(argv[i], "--timeout") == 0 && i + 1 < argc) {
      timeout_s = (unsigned)strtoul(argv[++i], NULL, 10);
    } else if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
      tffi_usage(argv[0]);
      return 0;
    } else if (argv[i][0] == '-') {
      tffi_usage(argv[0]);
      return 2;
    } else if (num_filters < 64) {
      filters[num_filters++] = argv[i];
    }
  }

  qsort(g_tests, (size_t)g_num_tests, sizeof(g_tests[0]), tffi_entry_cmp);

  if (!list_only) {
    /* Say which libtvm_ffi.so the dynamic linker picked (LD_LIBRARY_PATH). */
    Dl_info info;
    TVMFFIVersion v;
    TVMFFIGetVersion(&v);
    if (dladdr((void*)&TVMFFIGetVersion, &info) != 0 && info.dli_fname != NULL) {
      printf("library: %s (C ABI %u.%u.%u)\n", info.dli_fname, v.major, v.minor, v.patch);
    }
    fflush(stdout);
  }

  for (i = 0; i < g_num_tests; ++i) {
    const tffi_test_entry* t = &g_tests[i];
    int code, j, selected = (num_filters == 0);
    for (j = 0; j < num_filters; ++j) {
      if (strstr(t->name, filters[j]) != NULL) selected = 1;
    }
    if (!selected) continue;
    if (list_only) {
      printf("%s  (%s:%d)\n", t->name, tffi_basename(t->file), t->line);
      continue;
    }
    printf("[ RUN      ] %s\n", t->name);
    fflush(stdout);
    code = use_fork ? tffi_run_forked(t, timeout_s) : tffi_run_inline(t);
    if (code == TFFI_EXIT_PASS) {
      ++passed;
      printf("[       OK ] %s\n", t->name);
    } else if (code == TFFI_EXIT_SKIP) {
      ++skipped;
      printf("[  SKIPPED ] %s\n", t->name);
    } else {
      ++failed;
      printf("[  FAILED  ] %s\n", t->name);
    }
    fflush(stdout);
  }
  if (list_only) return 0;

  if (skipped > 0) {
    printf("%d passed, %d failed, %d skipped\n", passed, failed, skipped);
  } else {
    printf("%d passed, %d failed\n", passed, failed);
  }
  fflush(stdout);
  return failed > 0 ? 1 : 0;
}
