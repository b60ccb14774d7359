/*
 * test_error.c: Error objects and the thread-local error slot (spec §1.1,
 * §1.2, §2.1 TVMFFIErrorCell).
 */
#include <string.h>
#include <pthread.h>

#include "tffi_test.h"

static void* make_error(const char* kind, const char* msg, const char* bt) {
  TVMFFIByteArray k = tffi_ba(kind), m = tffi_ba(msg), b = tffi_ba(bt);
  void* err = NULL;
  if (TVMFFIErrorCreate(&k, &m, &b, &err) != 0) return NULL;
  return err;
}

static TVMFFIErrorCell* error_cell(void* err) { return (TVMFFIErrorCell*)tffi_cell(err); }

TEST(error_create_fields) {
  void* err = make_error("ValueError", "bad value given", "  File \"x.c\", line 1, in f\n");
  TVMFFIErrorCell* cell;
  REQUIRE(err != NULL);
  CHECK_EQ(tffi_type_index(err), kTVMFFIError);
  CHECK_EQ_HEX(tffi_refcount(err), 0x0000000100000001ULL);
  cell = error_cell(err);
  CHECK_BA(cell->kind, "ValueError");
  CHECK_BA(cell->message, "bad value given");
  CHECK_BA(cell->backtrace, "  File \"x.c\", line 1, in f\n");
  CHECK(cell->update_backtrace != NULL);
  CHECK(cell->cause_chain == NULL);
  CHECK(cell->extra_context == NULL);
  /* TVMFFIErrorCreate never touches the TLS slot. */
  CHECK_NO_PENDING_ERROR();
  CHECK_OK(TVMFFIObjectDecRef(err));
}

TEST(error_create_empty_fields) {
  void* err = make_error("", "", "");
  REQUIRE(err != NULL);
  CHECK_EQ(error_cell(err)->kind.size, 0);
  CHECK_EQ(error_cell(err)->message.size, 0);
  CHECK_EQ(error_cell(err)->backtrace.size, 0);
  CHECK_OK(TVMFFIObjectDecRef(err));
}

TEST(error_set_raised_increments_and_move_empties) {
  void* err = make_error("RuntimeError", "boom", "");
  void* got = (void*)0x1;
  REQUIRE(err != NULL);
  TVMFFIErrorSetRaised(err);
  /* The slot takes its own reference; the caller keeps hers. */
  CHECK_EQ_HEX(tffi_refcount(err), 0x0000000100000002ULL);
  TVMFFIErrorMoveFromRaised(&got);
  CHECK_PTR_EQ(got, err);
  /* Moved out: the count does not change. */
  CHECK_EQ_HEX(tffi_refcount(err), 0x0000000100000002ULL);
  got = (void*)0x1;
  TVMFFIErrorMoveFromRaised(&got);
  CHECK(got == NULL);
  CHECK_OK(TVMFFIObjectDecRef(err));
  CHECK_OK(TVMFFIObjectDecRef(err));
}

TEST(error_set_raised_replaces_previous) {
  void* e1 = make_error("RuntimeError", "first", "");
  void* e2 = make_error("ValueError", "second", "");
  void* got = NULL;
  REQUIRE(e1 != NULL && e2 != NULL);
  TVMFFIErrorSetRaised(e1);
  CHECK_EQ(tffi_strong(e1), 2);
  TVMFFIErrorSetRaised(e2);
  /* The previous error was released by the slot. */
  CHECK_EQ(tffi_strong(e1), 1);
  CHECK_EQ(tffi_strong(e2), 2);
  TVMFFIErrorMoveFromRaised(&got);
  CHECK_PTR_EQ(got, e2);
  if (got != NULL) TVMFFIObjectDecRef(got);
  CHECK_OK(TVMFFIObjectDecRef(e1));
  CHECK_OK(TVMFFIObjectDecRef(e2));
}

TEST(error_move_from_empty_slot_gives_null) {
  void* got = (void*)0x1;
  tffi_clear_error();
  TVMFFIErrorMoveFromRaised(&got);
  CHECK(got == NULL);
}

/* The backtrace of an error raised from C starts at the caller: no frame of the library's own
 * error functions on top (upstream leaves TVMFFIErrorSetRaisedFromCStr out by name). */
__attribute__((noinline)) static void raise_from_c_here(void) {
  TVMFFIErrorSetRaisedFromCStr("ValueError", "from C");
}

TEST(error_set_raised_from_cstr_backtrace_starts_at_the_caller) {
  void* got = NULL;
  raise_from_c_here();
  TVMFFIErrorMoveFromRaised(&got);
  REQUIRE(got != NULL);
  TVMFFIByteArray bt = error_cell(got)->backtrace;
  const char* nl = memchr(bt.data, '\n', bt.size);
  size_t first = nl ? (size_t)(nl - bt.data) : bt.size;
  char line[512] = {0};
  memcpy(line, bt.data, first < sizeof(line) - 1 ? first : sizeof(line) - 1);
  CHECK(strstr(line, "raise_from_c_here") != NULL);
  CHECK_OK(TVMFFIObjectDecRef(got));
}

TEST(error_set_raised_from_cstr) {
  void* got = NULL;
  TVMFFIErrorSetRaisedFromCStr("TypeError", "something went wrong");
  TVMFFIErrorMoveFromRaised(&got);
  REQUIRE(got != NULL);
  CHECK_EQ(tffi_type_index(got), kTVMFFIError);
  CHECK_EQ_HEX(tffi_refcount(got), 0x0000000100000001ULL);
  CHECK_BA(error_cell(got)->kind, "TypeError");
  CHECK_BA(error_cell(got)->message, "something went wrong");
  CHECK(error_cell(got)->update_backtrace != NULL);
  CHECK_OK(TVMFFIObjectDecRef(got));
}

TEST(error_set_raised_from_cstr_parts) {
  const char* parts[] = {"a", NULL, "b", "c"};
  const char* parts2[] = {"only one part"};
  void* got = NULL;
  TVMFFIErrorSetRaisedFromCStrParts("ValueError", parts, 4);
  TVMFFIErrorMoveFromRaised(&got);
  REQUIRE(got != NULL);
  CHECK_BA(error_cell(got)->kind, "ValueError");
  CHECK_BA(error_cell(got)->message, "abc");
  CHECK_OK(TVMFFIObjectDecRef(got));

  got = NULL;
  TVMFFIErrorSetRaisedFromCStrParts("IndexError", parts2, 1);
  TVMFFIErrorMoveFromRaised(&got);
  REQUIRE(got != NULL);
  CHECK_BA(error_cell(got)->kind, "IndexError");
  CHECK_BA(error_cell(got)->message, "only one part");
  CHECK_OK(TVMFFIObjectDecRef(got));

  got = NULL;
  TVMFFIErrorSetRaisedFromCStrParts("KeyError", parts, 0);
  TVMFFIErrorMoveFromRaised(&got);
  REQUIRE(got != NULL);
  CHECK_BA(error_cell(got)->message, "");
  CHECK_OK(TVMFFIObjectDecRef(got));
}

TEST(error_create_with_cause_and_extra_context) {
  void* cause = make_error("ValueError", "root cause", "");
  TVMFFIAny extra = tffi_make_string("extra context object");
  TVMFFIByteArray k = tffi_ba("RuntimeError"), m = tffi_ba("outer"), b = tffi_ba("bt\n");
  void* err = NULL;
  REQUIRE(cause != NULL);
  REQUIRE_EQ(extra.type_index, kTVMFFIStr);
  REQUIRE_OK(TVMFFIErrorCreateWithCauseAndExtraContext(&k, &m, &b, cause, extra.v_obj, &err));
  REQUIRE(err != NULL);
  CHECK_EQ(tffi_type_index(err), kTVMFFIError);
  CHECK_BA(error_cell(err)->kind, "RuntimeError");
  CHECK_BA(error_cell(err)->message, "outer");
  CHECK_BA(error_cell(err)->backtrace, "bt\n");
  CHECK_PTR_EQ(error_cell(err)->cause_chain, cause);
  CHECK_PTR_EQ(error_cell(err)->extra_context, extra.v_obj);
  /* The inputs are borrowed: the error took its own references. */
  CHECK_EQ(tffi_strong(cause), 2);
  CHECK_EQ(tffi_strong(extra.v_obj), 2);
  CHECK_OK(TVMFFIObjectDecRef(err));
  CHECK_EQ(tffi_strong(cause), 1);
  CHECK_EQ(tffi_strong(extra.v_obj), 1);
  CHECK_OK(TVMFFIObjectDecRef(cause));
  tffi_any_release(&extra);
}

TEST(error_create_with_null_cause_and_extra) {
  TVMFFIByteArray k = tffi_ba("RuntimeError"), m = tffi_ba("x"), b = tffi_ba("");
  void* err = NULL;
  REQUIRE_OK(TVMFFIErrorCreateWithCauseAndExtraContext(&k, &m, &b, NULL, NULL, &err));
  REQUIRE(err != NULL);
  CHECK(error_cell(err)->cause_chain == NULL);
  CHECK(error_cell(err)->extra_context == NULL);
  CHECK_OK(TVMFFIObjectDecRef(err));
}

TEST(error_update_backtrace_modes) {
  void* err = make_error("RuntimeError", "m", "frame0\n");
  TVMFFIErrorCell* cell;
  TVMFFIByteArray more = tffi_ba("frame1\n"), repl = tffi_ba("replaced\n"), empty = tffi_ba("");
  REQUIRE(err != NULL);
  cell = error_cell(err);
  REQUIRE(cell->update_backtrace != NULL);
  cell->update_backtrace(err, &more, kTVMFFIBacktraceUpdateModeAppend);
  CHECK_BA(cell->backtrace, "frame0\nframe1\n");
  cell->update_backtrace(err, &repl, kTVMFFIBacktraceUpdateModeReplace);
  CHECK_BA(cell->backtrace, "replaced\n");
  cell->update_backtrace(err, &more, kTVMFFIBacktraceUpdateModeAppend);
  CHECK_BA(cell->backtrace, "replaced\nframe1\n");
  cell->update_backtrace(err, &empty, kTVMFFIBacktraceUpdateModeReplace);
  CHECK_EQ(cell->backtrace.size, 0);
  /* kind and message are untouched. */
  CHECK_BA(cell->kind, "RuntimeError");
  CHECK_BA(cell->message, "m");
  CHECK_OK(TVMFFIObjectDecRef(err));
}

/* Appending an error's own backtrace to itself doubles it (the range points into the buffer
 * the update grows). */
TEST(error_update_backtrace_appends_itself) {
  void* err = make_error("RuntimeError", "m", "0123456789abcdefghijklmnopqrstu\n");
  TVMFFIErrorCell* cell;
  TVMFFIByteArray self;
  REQUIRE(err != NULL);
  cell = error_cell(err);
  self = cell->backtrace;
  cell->update_backtrace(err, &self, kTVMFFIBacktraceUpdateModeAppend);
  CHECK_BA(cell->backtrace,
           "0123456789abcdefghijklmnopqrstu\n0123456789abcdefghijklmnopqrstu\n");
  CHECK_EQ(cell->backtrace.data[cell->backtrace.size], '\0');
  CHECK_OK(TVMFFIObjectDecRef(err));
}

/* TVMFFIBacktrace's text is NUL-terminated in place (a C caller may print it with %s). */
TEST(error_backtrace_text_is_nul_terminated) {
  int i;
  for (i = 0; i < 3; ++i) {
    const TVMFFIByteArray* bt = TVMFFIBacktrace(i == 0 ? NULL : __FILE__, 10 * i, i == 2 ? "f" : NULL, i);
    REQUIRE(bt != NULL);
    REQUIRE(bt->data != NULL);
    CHECK_EQ(bt->data[bt->size], '\0');
    CHECK_EQ(strlen(bt->data), bt->size);
  }
}

TEST(error_not_cleared_by_successful_call) {
  /* A successful call does not clear a pending error (spec §1.1). */
  void* got = NULL;
  TVMFFIAny out = tffi_none();
  TVMFFIErrorSetRaisedFromCStr("ValueError", "stale");
  CHECK_OK(TVMFFIStringFromByteArray(&(TVMFFIByteArray){"abc", 3}, &out));
  TVMFFIErrorMoveFromRaised(&got);
  REQUIRE(got != NULL);
  CHECK_BA(error_cell(got)->message, "stale");
  CHECK_OK(TVMFFIObjectDecRef(got));
}

/* A thread ends with an error still raised, and that error holds an object whose deleter calls
 * the library (moves the raised error out, raises one, parses a bad dtype). The deleter runs
 * while the thread's storage is torn down: the library must not abort (anyffi did, session 8). */
static int tls_teardown_action;
static int tls_teardown_deleter_ran;
static void tls_teardown_deleter(void* handle) {
  (void)handle;
  tls_teardown_deleter_ran++;
  if (tls_teardown_action == 0) {
    void* e = NULL;
    TVMFFIErrorMoveFromRaised(&e);
    if (e) TVMFFIObjectDecRef(e);
  } else if (tls_teardown_action == 1) {
    TVMFFIErrorSetRaisedFromCStr("ValueError", "raised while the thread ends");
  } else {
    DLDataType d;
    TVMFFIByteArray s = tffi_ba("notadtype");
    TVMFFIDataTypeFromString(&s, &d);
  }
}
static void* tls_teardown_thread(void* arg) {
  (void)arg;
  void *o = NULL, *e = NULL;
  TVMFFIByteArray k = tffi_ba("ValueError"), m = tffi_ba("pending at thread exit"), b = tffi_ba("");
  if (TVMFFIObjectCreateOpaque((void*)0x1, kTVMFFIOpaquePyObject, tls_teardown_deleter, &o) != 0)
    return NULL;
  if (TVMFFIErrorCreateWithCauseAndExtraContext(&k, &m, &b, NULL, o, &e) == 0) {
    TVMFFIErrorSetRaised(e);
    TVMFFIObjectDecRef(e);
  }
  TVMFFIObjectDecRef(o);
  return NULL;
}
TEST(error_pending_at_thread_exit_with_reentrant_deleter) {
  for (tls_teardown_action = 0; tls_teardown_action < 3; tls_teardown_action++) {
    pthread_t th;
    int before = tls_teardown_deleter_ran;
    REQUIRE_EQ(pthread_create(&th, NULL, tls_teardown_thread, NULL), 0);
    pthread_join(th, NULL);
    CHECK_EQ(tls_teardown_deleter_ran, before + 1);
  }
  CHECK_NO_PENDING_ERROR();
}
