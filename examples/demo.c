/*
 * The anyffi demo (run by ./run): a C program that uses libtvm_ffi.so through anyffi's own
 * header only. It registers C functions, calls built-in and registered functions, passes a
 * tensor zero-copy through DLPack, and shows how errors travel.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "anyffi/c_api.h"

#define CHECK(call)                                                        \
  do {                                                                     \
    if ((call) != 0) {                                                     \
      report_error(#call);                                                 \
      exit(1);                                                             \
    }                                                                      \
  } while (0)

static TVMFFIByteArray bytes(const char* s) {
  TVMFFIByteArray b = {s, strlen(s)};
  return b;
}

/* The error cell follows the 24-byte object header. */
static const TVMFFIErrorCell* error_cell(void* err) {
  return (const TVMFFIErrorCell*)((char*)err + sizeof(TVMFFIObject));
}

static void report_error(const char* what) {
  void* err = NULL;
  TVMFFIErrorMoveFromRaised(&err);
  if (err == NULL) {
    fprintf(stderr, "%s failed without an error\n", what);
    return;
  }
  const TVMFFIErrorCell* c = error_cell(err);
  fprintf(stderr, "%s failed: %.*s: %.*s\n", what, (int)c->kind.size, c->kind.data,
          (int)c->message.size, c->message.data);
  TVMFFIObjectDecRef(err);
}

static void* get_global(const char* name) {
  TVMFFIByteArray n = bytes(name);
  void* f = NULL;
  CHECK(TVMFFIFunctionGetGlobal(&n, &f));
  if (f == NULL) {
    fprintf(stderr, "global function %s is not registered\n", name);
    exit(1);
  }
  return f;
}

static TVMFFIAny int_any(int64_t v) {
  TVMFFIAny a;
  memset(&a, 0, sizeof(a));
  a.type_index = kTVMFFIInt;
  a.value.v_int64 = v;
  return a;
}

static TVMFFIAny obj_any(void* obj) {
  TVMFFIAny a;
  memset(&a, 0, sizeof(a));
  a.type_index = ((TVMFFIObject*)obj)->type_index;
  a.value.v_obj = (TVMFFIObject*)obj;
  return a;
}

/* demo.sum(t): sums a float32 tensor of any shape (contiguous), reading the DLTensor in place. */
static int sum_tensor(void* self, const TVMFFIAny* args, int32_t n, TVMFFIAny* result) {
  (void)self;
  const DLTensor* t = NULL;
  if (n == 1 && args[0].type_index == kTVMFFITensor) {
    t = (const DLTensor*)((char*)args[0].value.v_obj + sizeof(TVMFFIObject));
  } else if (n == 1 && args[0].type_index == kTVMFFIDLTensorPtr) {
    t = (const DLTensor*)args[0].value.v_ptr;
  }
  if (t == NULL || t->dtype.code != kDLFloat || t->dtype.bits != 32) {
    TVMFFIErrorSetRaisedFromCStr("TypeError", "demo.sum: expected one float32 tensor");
    return -1;
  }
  int64_t count = 1;
  for (int i = 0; i < t->ndim; ++i) count *= t->shape[i];
  const float* data = (const float*)((char*)t->data + t->byte_offset);
  double s = 0;
  for (int64_t i = 0; i < count; ++i) s += data[i];
  memset(result, 0, sizeof(*result));
  result->type_index = kTVMFFIFloat;
  result->value.v_float64 = s;
  return 0;
}

/* demo.scale(x): 10 * x, a closure over `self` (the factor). */
static int scale(void* self, const TVMFFIAny* args, int32_t n, TVMFFIAny* result) {
  if (n != 1 || args[0].type_index != kTVMFFIInt) {
    TVMFFIErrorSetRaisedFromCStr("TypeError", "demo.scale: expected one int");
    return -1;
  }
  *result = int_any(*(int64_t*)self * args[0].value.v_int64);
  return 0;
}

static void free_factor(void* self) { free(self); }

static void noop_deleter(DLManagedTensor* mt) { (void)mt; }

/* runtime.empty((n,), "float32", cpu:0) -> a new ffi.Tensor from the device runtime. */
static void* empty_f32(void* f_empty, void* f_shape, int64_t n) {
  TVMFFIAny dim = int_any(n), shape, out;
  memset(&shape, 0, sizeof(shape));
  CHECK(TVMFFIFunctionCall(f_shape, &dim, 1, &shape));
  TVMFFIAny args[3];
  args[0] = shape;
  TVMFFIByteArray dt = bytes("float32");
  CHECK(TVMFFIStringFromByteArray(&dt, &args[1]));
  memset(&args[2], 0, sizeof(args[2]));
  args[2].type_index = kTVMFFIDevice;
  args[2].value.v_device.device_type = kDLCPU;
  memset(&out, 0, sizeof(out));
  CHECK(TVMFFIFunctionCall(f_empty, args, 3, &out));
  TVMFFIObjectDecRef(shape.value.v_obj);
  if (args[1].type_index >= kTVMFFIStaticObjectBegin) TVMFFIObjectDecRef(args[1].value.v_obj);
  return out.value.v_obj;
}

static float* tensor_f32(void* t) {
  const DLTensor* dl = (const DLTensor*)((char*)t + sizeof(TVMFFIObject));
  return (float*)((char*)dl->data + dl->byte_offset);
}

int main(void) {
  TVMFFIVersion v;
  TVMFFIGetVersion(&v);
  printf("libtvm_ffi.so (anyffi), C ABI %u.%u.%u\n", v.major, v.minor, v.patch);

  /* 1. A built-in function. */
  void* add_one = get_global("anyffi.testing.add_one");
  TVMFFIAny arg = int_any(41), out = int_any(0);
  out.type_index = kTVMFFINone;
  CHECK(TVMFFIFunctionCall(add_one, &arg, 1, &out));
  printf("anyffi.testing.add_one(41) = %lld\n", (long long)out.value.v_int64);

  /* 2. Register C functions globally: one with state (self + deleter), one plain. */
  int64_t* factor = malloc(sizeof(int64_t));
  *factor = 10;
  void* f_scale = NULL;
  CHECK(TVMFFIFunctionCreate(factor, scale, free_factor, &f_scale));
  TVMFFIByteArray name = bytes("demo.scale");
  CHECK(TVMFFIFunctionSetGlobal(&name, f_scale, 0));
  void* f_sum = NULL;
  CHECK(TVMFFIFunctionCreate(NULL, sum_tensor, NULL, &f_sum));
  name = bytes("demo.sum");
  CHECK(TVMFFIFunctionSetGlobal(&name, f_sum, 0));
  printf("registered demo.scale and demo.sum\n");

  /* 3. Call our function through another one: anyffi.testing.apply(f, *args). */
  void* apply = get_global("anyffi.testing.apply");
  TVMFFIAny apply_args[2] = {obj_any(f_scale), int_any(7)};
  out.type_index = kTVMFFINone;
  CHECK(TVMFFIFunctionCall(apply, apply_args, 2, &out));
  printf("anyffi.testing.apply(demo.scale, 7) = %lld\n", (long long)out.value.v_int64);

  /* 4. A tensor: wrap a C array zero-copy via DLPack and let a registered function read it. */
  float data[2][3] = {{1, 2, 3}, {4, 5, 6}};
  int64_t shape[2] = {2, 3};
  DLManagedTensor mt;
  memset(&mt, 0, sizeof(mt));
  mt.dl_tensor.data = data;
  mt.dl_tensor.device.device_type = kDLCPU;
  mt.dl_tensor.ndim = 2;
  mt.dl_tensor.dtype.code = kDLFloat;
  mt.dl_tensor.dtype.bits = 32;
  mt.dl_tensor.dtype.lanes = 1;
  mt.dl_tensor.shape = shape;
  mt.deleter = noop_deleter;
  void* tensor = NULL;
  CHECK(TVMFFITensorFromDLPack(&mt, 16, 1, &tensor));
  const DLTensor* dl = (const DLTensor*)((char*)tensor + sizeof(TVMFFIObject));
  printf("tensor from DLPack: shape (%lld, %lld), strides (%lld, %lld), same data: %s\n",
         (long long)dl->shape[0], (long long)dl->shape[1], (long long)dl->strides[0],
         (long long)dl->strides[1], dl->data == (void*)data ? "yes" : "no");
  TVMFFIAny t_arg = obj_any(tensor);
  out.type_index = kTVMFFINone;
  CHECK(TVMFFIFunctionCall(get_global("demo.sum"), &t_arg, 1, &out));
  printf("demo.sum(tensor) = %g\n", out.value.v_float64);

  /* 5. A built-in object: ffi.Shape(2, 3, 4). */
  TVMFFIAny dims[3] = {int_any(2), int_any(3), int_any(4)};
  void* ffi_shape = get_global("ffi.Shape");
  out.type_index = kTVMFFINone;
  CHECK(TVMFFIFunctionCall(ffi_shape, dims, 3, &out));
  const TVMFFIShapeCell* cell = (const TVMFFIShapeCell*)((char*)out.value.v_obj + sizeof(TVMFFIObject));
  printf("ffi.Shape(2, 3, 4) has %zu dims, product %lld\n", cell->size,
         (long long)(cell->data[0] * cell->data[1] * cell->data[2]));
  TVMFFIObjectDecRef(out.value.v_obj);

  /* 6. Errors travel as objects with a kind, a message and a backtrace. */
  void* raise = get_global("anyffi.testing.raise_error");
  TVMFFIAny r_args[2];
  TVMFFIByteArray kind = bytes("ValueError"), msg = bytes("a demonstration error");
  CHECK(TVMFFIStringFromByteArray(&kind, &r_args[0]));
  CHECK(TVMFFIStringFromByteArray(&msg, &r_args[1]));
  out.type_index = kTVMFFINone;
  if (TVMFFIFunctionCall(raise, r_args, 2, &out) != 0) {
    void* err = NULL;
    TVMFFIErrorMoveFromRaised(&err);
    const TVMFFIErrorCell* c = error_cell(err);
    printf("anyffi.testing.raise_error raised %.*s: %.*s\n", (int)c->kind.size, c->kind.data,
           (int)c->message.size, c->message.data);
    TVMFFIObjectDecRef(err);
  }
  for (int i = 0; i < 2; ++i) {
    if (r_args[i].type_index >= kTVMFFIStaticObjectBegin) TVMFFIObjectDecRef(r_args[i].value.v_obj);
  }

  /* 7. The device runtime and the operator library, both packed functions: c = a + b. */
  void* f_empty = get_global("runtime.empty");
  void* f_add = get_global("ops.add");
  void* a = empty_f32(f_empty, ffi_shape, 4);
  void* b = empty_f32(f_empty, ffi_shape, 4);
  void* c = empty_f32(f_empty, ffi_shape, 4);
  for (int i = 0; i < 4; ++i) {
    tensor_f32(a)[i] = (float)i;
    tensor_f32(b)[i] = 10.0f * (float)i;
  }
  TVMFFIAny add_args[3] = {obj_any(c), obj_any(a), obj_any(b)};
  out.type_index = kTVMFFINone;
  CHECK(TVMFFIFunctionCall(f_add, add_args, 3, &out));
  printf("ops.add(c, a, b) on runtime.empty tensors: c = [%g, %g, %g, %g]\n", tensor_f32(c)[0],
         tensor_f32(c)[1], tensor_f32(c)[2], tensor_f32(c)[3]);
  TVMFFIObjectDecRef(a);
  TVMFFIObjectDecRef(b);
  TVMFFIObjectDecRef(c);
  TVMFFIObjectDecRef(f_add);
  TVMFFIObjectDecRef(f_empty);

  /* Release everything we own. */
  TVMFFIObjectDecRef(tensor);
  TVMFFIObjectDecRef(f_scale);
  TVMFFIObjectDecRef(f_sum);
  TVMFFIObjectDecRef(apply);
  TVMFFIObjectDecRef(raise);
  TVMFFIObjectDecRef(ffi_shape);
  TVMFFIObjectDecRef(add_one);
  printf("done\n");
  return 0;
}
