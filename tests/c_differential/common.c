/* common.c: output helpers and main of the C ABI differential driver (see common.h).
 *
 *   cdiff list                  every case, one a line: NAME, or NAME<TAB>novg<TAB>REASON
 *   cdiff run NAME              run one case (prints END when it returns)
 *   cdiff forkeach SECS NAME..  run each named case in a forked child with an alarm of SECS
 *                               seconds ("### CASE NAME pid=PID" / "### STATUS NAME ..."); used
 *                               under valgrind, where one start-up serves every case
 */
#include "common.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

typedef struct {
  const char* name;
  case_fn fn;
  long param;
  const char* novg;
} Case;
static Case g_cases[4096];
static int g_ncases;

void cf_register(const char* name, case_fn fn, long param, const char* novg) {
  if (g_ncases >= 4096) {
    fprintf(stderr, "too many cases\n");
    exit(2);
  }
  g_cases[g_ncases].name = name;
  g_cases[g_ncases].fn = fn;
  g_cases[g_ncases].param = param;
  g_cases[g_ncases].novg = novg;
  g_ncases++;
}

void P(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vprintf(fmt, ap);
  va_end(ap);
  putchar('\n');
  fflush(stdout);
}

uint64_t fnv(const void* d, size_t n) {
  const unsigned char* p = (const unsigned char*)d;
  uint64_t h = 1469598103934665603ULL;
  for (size_t i = 0; i < n; i++) {
    h ^= p[i];
    h *= 1099511628211ULL;
  }
  return h;
}

static char* esc_raw(const char* d, size_t n) {
  char* out = (char*)malloc(n * 4 + 3);
  size_t k = 0;
  out[k++] = '"';
  for (size_t i = 0; i < n; i++) {
    unsigned char c = (unsigned char)d[i];
    if (c >= 0x20 && c < 0x7f && c != '\\' && c != '"') {
      out[k++] = (char)c;
    } else {
      k += (size_t)sprintf(out + k, "\\x%02x", c);
    }
  }
  out[k++] = '"';
  out[k] = 0;
  return out;
}

char* esc(const char* d, size_t n) {
  if (d == NULL) {
    char* r = (char*)malloc(32);
    snprintf(r, 32, "<NULL data, size %zu>", n);
    return r;
  }
  if (n <= 400) return esc_raw(d, n);
  char* head = esc_raw(d, 160);
  char* tail = esc_raw(d + n - 80, 80);
  size_t L = strlen(head) + strlen(tail) + 128;
  char* r = (char*)malloc(L);
  snprintf(r, L, "<len %zu fnv %016llx> %s ... %s", n, (unsigned long long)fnv(d, n), head,
           tail);
  free(head);
  free(tail);
  return r;
}

void pr_err_obj(const char* prefix, void* e) {
  if (e == NULL) {
    P("%s err=none", prefix);
    return;
  }
  int32_t ti = ((TVMFFIObject*)e)->type_index;
  if (ti != kTVMFFIError) {
    P("%s err=<non-error object, type %d>", prefix, ti);
    return;
  }
  TVMFFIErrorCell* c = (TVMFFIErrorCell*)((char*)e + sizeof(TVMFFIObject));
  char* k = esc(c->kind.data, c->kind.size);
  char* m = esc(c->message.data, c->message.size);
  P("%s err.kind=%s", prefix, k);
  P("%s err.msg=%s", prefix, m);
  P("~%s err.backtrace_nonempty=%d", prefix, c->backtrace.size > 0);
  P("%s err.cause=%s err.extra=%s", prefix, c->cause_chain ? "set" : "null",
    c->extra_context ? "set" : "null");
  free(k);
  free(m);
}

void pr_err(const char* prefix) {
  void* e = (void*)0x1;
  TVMFFIErrorMoveFromRaised(&e);
  if (e == (void*)0x1) {
    P("%s err=<slot untouched>", prefix);
    return;
  }
  pr_err_obj(prefix, e);
  if (e) TVMFFIObjectDecRef(e);
}

void pr_rc(const char* what, int rc) {
  P("%s rc=%d", what, rc);
  if (rc != 0) pr_err(what);
}

void any_release(TVMFFIAny* a) {
  if (a->type_index >= kTVMFFIStaticObjectBegin && a->v_obj) TVMFFIObjectDecRef(a->v_obj);
  memset(a, 0, sizeof(*a));
}

TVMFFIAny a_none(void) {
  TVMFFIAny a;
  memset(&a, 0, sizeof(a));
  return a;
}
TVMFFIAny a_int(int64_t v) {
  TVMFFIAny a = a_none();
  a.type_index = kTVMFFIInt;
  a.v_int64 = v;
  return a;
}
TVMFFIAny a_raw(const char* s) {
  TVMFFIAny a = a_none();
  a.type_index = kTVMFFIRawStr;
  a.v_c_str = s;
  return a;
}
TVMFFIAny a_obj(void* o) {
  TVMFFIAny a = a_none();
  a.type_index = ((TVMFFIObject*)o)->type_index;
  a.v_obj = (TVMFFIObject*)o;
  return a;
}
TVMFFIByteArray ba(const char* s) {
  TVMFFIByteArray r;
  r.data = s;
  r.size = strlen(s);
  return r;
}
TVMFFIByteArray ban(const char* s, size_t n) {
  TVMFFIByteArray r;
  r.data = s;
  r.size = n;
  return r;
}
uint32_t strong_count(void* o) {
  return (uint32_t)(__atomic_load_n(&((TVMFFIObject*)o)->combined_ref_count, __ATOMIC_SEQ_CST) &
                    0xffffffffu);
}

void* get_global(const char* name) {
  TVMFFIByteArray b = ba(name);
  void* f = NULL;
  int rc = TVMFFIFunctionGetGlobal(&b, &f);
  if (rc != 0) pr_rc("get_global", rc);
  return f;
}

int call(void* f, TVMFFIAny* args, int n, TVMFFIAny* rv) {
  *rv = a_none();
  return TVMFFIFunctionCall(f, args, n, rv);
}

void* make_str_obj(const char* s) {
  TVMFFIByteArray b = ba(s);
  TVMFFIAny out = a_none();
  if (TVMFFIStringFromByteArray(&b, &out) != 0 || out.type_index != kTVMFFIStr) {
    P("make_str_obj failed type %d", out.type_index);
    exit(3);
  }
  return out.v_obj;
}

void pr_dltensor(const char* what, const DLTensor* t) {
  char buf[2048];
  size_t k = 0;
  k += (size_t)snprintf(buf + k, sizeof(buf) - k, "%s ndim=%d dtype=(%u,%u,%u) dev=(%d,%d) off=%llu",
                        what, t->ndim, t->dtype.code, t->dtype.bits, t->dtype.lanes,
                        (int)t->device.device_type, t->device.device_id,
                        (unsigned long long)t->byte_offset);
  int nd = t->ndim;
  if (nd > 8) nd = 8;
  if (nd < 0) nd = 0;
  if (t->shape) {
    k += (size_t)snprintf(buf + k, sizeof(buf) - k, " shape=[");
    for (int i = 0; i < nd; i++)
      k += (size_t)snprintf(buf + k, sizeof(buf) - k, "%lld,", (long long)t->shape[i]);
    k += (size_t)snprintf(buf + k, sizeof(buf) - k, "]");
  } else {
    k += (size_t)snprintf(buf + k, sizeof(buf) - k, " shape=NULL");
  }
  if (t->strides) {
    k += (size_t)snprintf(buf + k, sizeof(buf) - k, " strides=[");
    for (int i = 0; i < nd; i++)
      k += (size_t)snprintf(buf + k, sizeof(buf) - k, "%lld,", (long long)t->strides[i]);
    k += (size_t)snprintf(buf + k, sizeof(buf) - k, "]");
  } else {
    k += (size_t)snprintf(buf + k, sizeof(buf) - k, " strides=NULL");
  }
  P("%s", buf);
}

void pr_tensor(const char* what, void* t) {
  if (t == NULL) {
    P("%s tensor=NULL", what);
    return;
  }
  P("%s type=%d", what, ((TVMFFIObject*)t)->type_index);
  pr_dltensor(what, (DLTensor*)((char*)t + sizeof(TVMFFIObject)));
}

void pr_any(const char* what, const TVMFFIAny* a) {
  int32_t ti = a->type_index;
  switch (ti) {
    case kTVMFFINone:
      P("%s None pad=%u payload=%llx", what, a->zero_padding, (unsigned long long)a->v_uint64);
      return;
    case kTVMFFIInt:
      P("%s Int %lld pad=%u", what, (long long)a->v_int64, a->zero_padding);
      return;
    case kTVMFFIBool:
      P("%s Bool %lld pad=%u", what, (long long)a->v_int64, a->zero_padding);
      return;
    case kTVMFFIFloat:
      P("%s Float %.17g bits=%llx", what, a->v_float64, (unsigned long long)a->v_uint64);
      return;
    case kTVMFFIOpaquePtr:
      P("%s OpaquePtr %s", what, a->v_ptr ? "nonnull" : "NULL");
      return;
    case kTVMFFIDLTensorPtr:
      P("%s DLTensorPtr %s", what, a->v_ptr ? "nonnull" : "NULL");
      return;
    case kTVMFFIDataType:
      P("%s DataType (%u,%u,%u)", what, a->v_dtype.code, a->v_dtype.bits, a->v_dtype.lanes);
      return;
    case kTVMFFIDevice:
      P("%s Device (%d,%d)", what, (int)a->v_device.device_type, a->v_device.device_id);
      return;
    case kTVMFFIRawStr: {
      char* e = a->v_c_str ? esc(a->v_c_str, strlen(a->v_c_str)) : NULL;
      P("%s RawStr %s", what, e ? e : "NULL");
      free(e);
      return;
    }
    case kTVMFFIByteArrayPtr: {
      const TVMFFIByteArray* b = (const TVMFFIByteArray*)a->v_ptr;
      char* e = b ? esc(b->data, b->size) : NULL;
      P("%s ByteArrayPtr %s", what, e ? e : "NULL");
      free(e);
      return;
    }
    case kTVMFFIObjectRValueRef:
      P("%s ObjectRValueRef %s", what, a->v_ptr ? "nonnull" : "NULL");
      return;
    case kTVMFFISmallStr:
    case kTVMFFISmallBytes: {
      uint32_t n = a->small_str_len;
      char* e = esc(a->v_bytes, n > 8 ? 8 : n);
      P("%s %s len=%u %s", what, ti == kTVMFFISmallStr ? "SmallStr" : "SmallBytes", n, e);
      free(e);
      return;
    }
    case kTVMFFIStr:
    case kTVMFFIBytes: {
      if (a->v_obj == NULL) {
        P("%s %s with NULL v_obj", what, ti == kTVMFFIStr ? "Str" : "Bytes");
        return;
      }
      TVMFFIByteArray* b = (TVMFFIByteArray*)((char*)a->v_obj + sizeof(TVMFFIObject));
      char* e = esc(b->data, b->size);
      P("%s %s len=%zu %s nul_term=%d", what, ti == kTVMFFIStr ? "Str" : "Bytes", b->size, e,
        b->data ? b->data[b->size] == 0 : -1);
      free(e);
      return;
    }
    default:
      break;
  }
  if (ti >= kTVMFFIStaticObjectBegin) {
    if (a->v_obj == NULL) {
      P("%s Object type=%d NULL", what, ti);
      return;
    }
    P("%s Object type=%d hdr_type=%d", what, ti, a->v_obj->type_index);
    if (ti == kTVMFFIError) pr_err_obj(what, a->v_obj);
    if (ti == kTVMFFITensor) pr_tensor(what, a->v_obj);
    if (ti == kTVMFFIShape) {
      TVMFFIShapeCell* s = (TVMFFIShapeCell*)((char*)a->v_obj + sizeof(TVMFFIObject));
      P("%s shape size=%zu", what, s->size);
    }
    return;
  }
  P("%s type=%d pad=%u payload=%llx", what, ti, a->zero_padding, (unsigned long long)a->v_uint64);
}

void pr_any_release(const char* what, TVMFFIAny* a) {
  pr_any(what, a);
  any_release(a);
}

static const Case* find_case(const char* name) {
  for (int i = 0; i < g_ncases; i++)
    if (strcmp(g_cases[i].name, name) == 0) return &g_cases[i];
  return NULL;
}

int main(int argc, char** argv) {
  setvbuf(stdout, NULL, _IONBF, 0);
  if (argc == 2 && strcmp(argv[1], "list") == 0) {
    for (int i = 0; i < g_ncases; i++) {
      for (int j = 0; j < i; j++) {
        if (strcmp(g_cases[i].name, g_cases[j].name) == 0) {
          fprintf(stderr, "duplicate case name %s\n", g_cases[i].name);
          return 2;
        }
      }
      if (g_cases[i].novg)
        printf("%s\tnovg\t%s\n", g_cases[i].name, g_cases[i].novg);
      else
        printf("%s\n", g_cases[i].name);
    }
    return 0;
  }
  if (argc == 3 && strcmp(argv[1], "run") == 0) {
    const Case* c = find_case(argv[2]);
    if (!c) {
      fprintf(stderr, "no case %s\n", argv[2]);
      return 2;
    }
    c->fn(c->param);
    P("END");
    return 0;
  }
  if (argc >= 3 && strcmp(argv[1], "forkeach") == 0) {
    unsigned secs = (unsigned)atoi(argv[2]);
    for (int i = 3; i < argc; i++) {
      const Case* c = find_case(argv[i]);
      if (!c) {
        fprintf(stderr, "no case %s\n", argv[i]);
        return 2;
      }
      pid_t pid = fork();
      if (pid == 0) {
        alarm(secs);
        printf("### CASE %s pid=%d\n", c->name, (int)getpid());
        c->fn(c->param);
        P("END");
        exit(0); /* exit, not _exit: the exit-time cases need the process-exit clean-up */
      }
      int st = 0;
      waitpid(pid, &st, 0);
      if (WIFEXITED(st))
        printf("### STATUS %s exit=%d\n", c->name, WEXITSTATUS(st));
      else if (WIFSIGNALED(st))
        printf("### STATUS %s signal=%d\n", c->name, WTERMSIG(st));
    }
    return 0;
  }
  fprintf(stderr, "usage: %s list | run NAME | forkeach SECS NAME...\n", argv[0]);
  return 2;
}

DLTensor cpu_dl(void* data, int32_t ndim, int64_t* shape, uint8_t code, uint8_t bits) {
  DLTensor t;
  memset(&t, 0, sizeof(t));
  t.data = data;
  t.device.device_type = kDLCPU;
  t.ndim = ndim;
  t.shape = shape;
  t.dtype.code = code;
  t.dtype.bits = bits;
  t.dtype.lanes = 1;
  return t;
}
