// Launching Triton's compiled kernels from C++, and a C++ autograd node around them.
//
// Why: a Python torch.autograd.Function costs about eager PyTorch's whole forward+backward of a
// small op in host time before it does any work, and its backward's Python runs cold on autograd's
// device thread (docs/performance.md). Here an op's call is a Program: the tensors it allocates
// and the compiled kernels it launches, with every kernel argument named as a slot (an input, an
// allocation), a per-call scalar or a constant. Python builds one Program per call signature
// (kernels/_native.py, from the launchers that kernels/_launch.py binds); a call then runs in C++:
// allocate, pack the arguments, cuLaunchKernel. Its backward is another Program, run by an
// autograd node of our own (NativeNode) with no Python at all. An op's Entry finds a call's
// Program by its signature, so a call seen before takes no Python beyond the entry point's first
// line.
//
// The CUDA driver is reached through dlopen/dlsym of libcuda.so.1 (which Triton and torch have
// loaded already), the stream through c10's device-guard interface, so this file compiles with
// torch's headers alone: no CUDA toolkit is needed to build it.

#include <torch/extension.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/functions/utils.h>
#include <torch/csrc/autograd/functions/basic_ops.h>
#include <torch/csrc/autograd/python_variable.h>
#include <torch/csrc/Exceptions.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>

#include <dlfcn.h>

#include <climits>
#include <mutex>
#include <cmath>
#include <cstdint>
#include <type_traits>
#include <unordered_map>
#include <stdexcept>
#include <string>
#include <vector>

namespace fkh_native {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// Errors are std::runtime_error (Python's RuntimeError) with messages built from std::string and
// std::to_string. No iostream: torch's extension build on the GPU hosts links this module with its
// own copy of libstdc++, whose stream locale is never set up, so formatting a number through an
// ostream (TORCH_CHECK's message, std::ostringstream) crashed the process (H100 host, torch 2.11).
inline void append(std::string& out, const char* part) { out += part != nullptr ? part : "(null)"; }
inline void append(std::string& out, const std::string& part) { out += part; }
template <typename T, std::enable_if_t<std::is_arithmetic_v<T>, int> = 0>
void append(std::string& out, T part) {
  out += std::to_string(part);
}

template <typename... Parts>
std::string text(const Parts&... parts) {
  std::string message = "fkh native: ";
  (append(message, parts), ...);
  return message;
}

#define FKH_REQUIRE(condition, ...) \
  do {                                                   \
    if (!(condition)) throw std::runtime_error(text(__VA_ARGS__)); \
  } while (0)

// ---- the CUDA driver -------------------------------------------------------------------------

using CUresult = int;
using LaunchKernelFn = CUresult (*)(void* function, unsigned grid_x, unsigned grid_y, unsigned grid_z,
                                    unsigned block_x, unsigned block_y, unsigned block_z, unsigned shared_bytes,
                                    void* stream, void** params, void** extra);
using ErrorStringFn = CUresult (*)(CUresult, const char**);
using CtxGetCurrentFn = CUresult (*)(void** context);
using CtxSetCurrentFn = CUresult (*)(void* context);
using CtxGetDeviceFn = CUresult (*)(int* device);
using DeviceGetFn = CUresult (*)(int* device, int ordinal);
using PrimaryCtxRetainFn = CUresult (*)(void** context, int device);
using TensorMapReplaceAddressFn = CUresult (*)(void* tensor_map, void* address);

struct Driver {
  LaunchKernelFn launch = nullptr;
  ErrorStringFn error_string = nullptr;
  CtxGetCurrentFn ctx_get_current = nullptr;
  CtxSetCurrentFn ctx_set_current = nullptr;
  CtxGetDeviceFn ctx_get_device = nullptr;
  DeviceGetFn device_get = nullptr;
  PrimaryCtxRetainFn primary_ctx_retain = nullptr;
  TensorMapReplaceAddressFn tensor_map_replace_address = nullptr;  // CUDA 12 drivers and later
};

template <typename Fn>
Fn symbol(void* lib, const char* name) {
  auto fn = reinterpret_cast<Fn>(dlsym(lib, name));
  FKH_REQUIRE(fn != nullptr, "libcuda.so.1 exports no ", name);
  return fn;
}

const Driver& driver() {
  static const Driver loaded = [] {
    Driver d;
    void* lib = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD);  // loaded by torch and Triton already
    if (lib == nullptr) lib = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL);
    FKH_REQUIRE(lib != nullptr, "cannot open libcuda.so.1: ", dlerror());
    d.launch = symbol<LaunchKernelFn>(lib, "cuLaunchKernel");
    d.error_string = symbol<ErrorStringFn>(lib, "cuGetErrorString");
    d.ctx_get_current = symbol<CtxGetCurrentFn>(lib, "cuCtxGetCurrent");
    d.ctx_set_current = symbol<CtxSetCurrentFn>(lib, "cuCtxSetCurrent");
    d.ctx_get_device = symbol<CtxGetDeviceFn>(lib, "cuCtxGetDevice");
    d.device_get = symbol<DeviceGetFn>(lib, "cuDeviceGet");
    d.primary_ctx_retain = symbol<PrimaryCtxRetainFn>(lib, "cuDevicePrimaryCtxRetain");
    d.tensor_map_replace_address =
        reinterpret_cast<TensorMapReplaceAddressFn>(dlsym(lib, "cuTensorMapReplaceAddress"));
    return d;
  }();
  return loaded;
}

void check(const Driver& cuda, CUresult status, const char* what, const std::string& name) {
  if (status == 0) return;
  const char* message = "unknown error";
  cuda.error_string(status, &message);
  throw std::runtime_error(text(what, " ", name, " failed: CUDA error ", status, " (", message, ")"));
}

// Make the device's primary context current on this thread. torch's runtime calls do it lazily, so
// a thread that has made none (autograd's device thread, whose allocations hit the caching
// allocator's cache) may have no current context; the driver API needs one. Triton's kernels are
// loaded into the primary context.
//
// A thread remembers the last context it found current for a device, so a call whose current
// context is that one costs one driver call (cuCtxGetCurrent, a thread-local read), not three.
struct KnownContext {
  c10::DeviceIndex device = -1;
  void* context = nullptr;
};
thread_local KnownContext known_context;

void ensure_context(const Driver& cuda, const c10::Device& device) {
  void* context = nullptr;
  check(cuda, cuda.ctx_get_current(&context), "reading", "the current context");
  if (context != nullptr && context == known_context.context && device.index() == known_context.device) return;
  int wanted = 0;
  check(cuda, cuda.device_get(&wanted, device.index()), "finding", "the device");
  if (context != nullptr) {
    int current = -1;
    check(cuda, cuda.ctx_get_device(&current), "reading", "the context's device");
    if (current == wanted) {
      known_context = KnownContext{device.index(), context};
      return;
    }
  }
  // retained once per thread and device for the process's life, as the runtime does
  check(cuda, cuda.primary_ctx_retain(&context, wanted), "retaining", "the primary context");
  check(cuda, cuda.ctx_set_current(context), "setting", "the current context");
  known_context = KnownContext{device.index(), context};
}

void* current_stream(const c10::Device& device) {
  const auto* impl = c10::impl::getDeviceGuardImpl(device.type());
  return impl->getStream(device).native_handle();
}

// ---- programs --------------------------------------------------------------------------------

// Where a kernel parameter's value comes from (kernels/_native.py builds them).
enum Kind : int64_t {
  kTensor = 0,     // the data pointer of slot `index` (16-byte aligned when `value` is 1)
  kConstI32 = 1,   // `value`
  kConstI64 = 2,
  kConstU64 = 3,
  kConstF32 = 4,   // `fvalue`
  kConstF64 = 5,
  kFloatArgF32 = 6,  // the call's float scalar `index`, as float
  kFloatArgF64 = 7,
  kIntArgI32 = 8,    // the call's int scalar `index`
  kIntArgI64 = 9,
  kIntArgU64 = 10,
  kNull = 11,        // a null pointer (Triton's scratch pointers where the kernel needs none)
  kConstI8 = 12,
  kTensorMap = 13,   // the launch's tensor map `value` (a CUtensorMap) pointed at slot `index`'s data
};

struct Param {
  int64_t kind;
  int64_t index;
  int64_t value;
  double fvalue;
};

// A CUtensorMap's 128 bytes, as Triton's encoder made them for an example tensor of the slot's
// layout; a launch copies it and replaces the address with the call's tensor's.
struct alignas(64) TensorMap {
  uint64_t words[16];
};

struct Launch {
  void* function;
  unsigned grid[3];
  unsigned threads;
  unsigned shared;
  std::vector<Param> params;
  std::string name;
  std::vector<TensorMap> maps;
};

struct Alloc {
  std::vector<int64_t> sizes;
  c10::ScalarType dtype;
};

constexpr size_t kMaxParams = 192;  // attention's backward takes 105: 8 tensor descriptors of 9 parameters each, 33 others
constexpr size_t kMaxMaps = 8;

union Value {
  void* pointer;
  int8_t i8;
  int32_t i32;
  int64_t i64;
  uint64_t u64;
  float f32;
  double f64;
};

// One direction of an op's call. Slots are numbered: first what the call is given (forward: its
// inputs; backward: what the forward saved, then one gradient per forward output), then one per
// allocation, in order.
struct Program : torch::CustomClassHolder {
  int64_t given = 0;
  std::vector<Alloc> allocs;
  std::vector<Launch> launches;
  // forward: the slots returned, whether each is differentiable, the slots saved for backward;
  // backward: the slot of each forward input's gradient (-1: none) and the row of it taken (-1: all)
  std::vector<int64_t> outputs;
  std::vector<bool> differentiable;
  std::vector<int64_t> saved;
  std::vector<int64_t> rows;
  // backward: the layout the kernels read each output gradient in (it is copied into it if not)
  std::vector<c10::ScalarType> grad_dtypes;
  std::vector<bool> grad_read;  // backward: whether its kernels read each output gradient
  // backward: the layout the kernels read each saved tensor in (a saved-tensor hook may hand back
  // another: it is copied into this one)
  std::vector<c10::ScalarType> saved_dtypes;
  std::vector<std::vector<int64_t>> saved_sizes;
  std::vector<std::vector<int64_t>> saved_strides;
  std::vector<std::vector<int64_t>> grad_sizes;
  std::vector<std::vector<int64_t>> grad_strides;
  c10::intrusive_ptr<Program> backward;

  void run(std::vector<at::Tensor>& slots, const std::vector<double>& floats, const std::vector<int64_t>& ints,
           const c10::Device& device) const {
    FKH_REQUIRE(static_cast<int64_t>(slots.size()) == given, "a program given ", given,
                " tensors got ", slots.size());
    const auto options = at::TensorOptions().device(device);
    for (const auto& alloc : allocs) {
      slots.push_back(at::empty(alloc.sizes, options.dtype(alloc.dtype)));
    }
    if (launches.empty()) return;
    c10::DeviceGuard guard(device);
    const Driver& cuda = driver();
    ensure_context(cuda, device);
    void* stream = current_stream(device);
    Value values[kMaxParams];
    void* pointers[kMaxParams];
    TensorMap maps[kMaxMaps];
    for (const auto& launch : launches) {
      const size_t n = launch.params.size();
      for (size_t i = 0; i < n; ++i) {
        const Param& p = launch.params[i];
        Value& v = values[i];
        switch (p.kind) {
          case kTensor: {
            const at::Tensor& t = slots[p.index];
            FKH_REQUIRE(t.defined(), launch.name, " argument ", i, " reads slot ", p.index, ", which holds no tensor");
            v.pointer = t.data_ptr();
            FKH_REQUIRE(p.value == 0 || (reinterpret_cast<uintptr_t>(v.pointer) & 15) == 0, launch.name,
                    " was compiled for a 16-byte aligned argument ", i, " and got a misaligned tensor (slot ", p.index,
                    ")");
            break;
          }
          case kConstI8: v.i8 = static_cast<int8_t>(p.value); break;
          case kConstI32: v.i32 = static_cast<int32_t>(p.value); break;
          case kConstI64: v.i64 = p.value; break;
          case kConstU64: v.u64 = static_cast<uint64_t>(p.value); break;
          case kConstF32: v.f32 = static_cast<float>(p.fvalue); break;
          case kConstF64: v.f64 = p.fvalue; break;
          case kFloatArgF32: v.f32 = static_cast<float>(floats.at(p.index)); break;
          case kFloatArgF64: v.f64 = floats.at(p.index); break;
          case kIntArgI32:
            FKH_REQUIRE(ints.at(p.index) >= INT32_MIN && ints.at(p.index) <= INT32_MAX, launch.name, " argument ", i,
                        " is 32-bit and got ", ints.at(p.index));
            v.i32 = static_cast<int32_t>(ints.at(p.index));
            break;
          case kIntArgI64: v.i64 = ints.at(p.index); break;
          case kIntArgU64: v.u64 = static_cast<uint64_t>(ints.at(p.index)); break;
          case kNull: v.pointer = nullptr; break;
          case kTensorMap: {
            const at::Tensor& t = slots[p.index];
            FKH_REQUIRE(t.defined(), launch.name, " argument ", i, " maps slot ", p.index, ", which holds no tensor");
            void* address = t.data_ptr();
            FKH_REQUIRE((reinterpret_cast<uintptr_t>(address) & 15) == 0, launch.name, " argument ", i,
                        " is a tensor map, which needs a 16-byte aligned tensor (slot ", p.index, ")");
            TensorMap& map = maps[p.value];
            map = launch.maps[p.value];
            check(cuda, cuda.tensor_map_replace_address(&map, address), "pointing a tensor map of", launch.name);
            pointers[i] = &map;
            continue;
          }
          default: throw std::runtime_error(text("unknown parameter kind ", p.kind));
        }
        pointers[i] = &v;
      }
      if (launch.grid[0] == 0 || launch.grid[1] == 0 || launch.grid[2] == 0) continue;
      check(cuda, cuda.launch(launch.function, launch.grid[0], launch.grid[1], launch.grid[2], launch.threads, 1, 1,
                              launch.shared, stream, pointers, nullptr),
            "launching", launch.name);
    }
  }
};

using ProgramPtr = c10::intrusive_ptr<Program>;

c10::Device call_device(at::TensorList tensors) {
  for (const auto& t : tensors) {
    if (t.defined()) return t.device();
  }
  throw std::runtime_error(text("a call with no tensor"));
}

// ---- autograd --------------------------------------------------------------------------------

// `t` in the layout the kernels were compiled for: itself, or a copy where its dtype, sizes,
// strides or 16-byte alignment differ (never written: autograd may hand the same tensor elsewhere).
at::Tensor in_layout(const at::Tensor& t, c10::ScalarType dtype, const std::vector<int64_t>& sizes,
                     const std::vector<int64_t>& strides) {
  FKH_REQUIRE(t.defined(), "a backward was given an undefined tensor where its kernels read one");
  const bool aligned = (reinterpret_cast<uintptr_t>(t.data_ptr()) & 15) == 0;
  if (t.scalar_type() == dtype && t.sizes() == c10::IntArrayRef(sizes) && t.strides() == c10::IntArrayRef(strides) &&
      aligned) {
    return t;
  }
  FKH_REQUIRE(t.sizes() == c10::IntArrayRef(sizes), "a backward was given a tensor of another shape than the one ",
              "its kernels read");
  at::Tensor copy = at::empty_strided(sizes, strides, t.options().dtype(dtype));
  copy.copy_(t);
  return copy;
}

// The backward node a forward that records a graph creates: autograd's own kind of node (the kind
// eager's generated backward functions are), holding the program and the call's scalars as
// members. A torch::autograd::Function's node (CppNode) costs microseconds more a call: its
// context keeps the scalars in a string-keyed map of IValues, and its forward wraps every output
// through the general custom-function path (views, dirty and non-differentiable bookkeeping).
struct NativeNode : public torch::autograd::Node {
  ProgramPtr forward;                // its backward is what apply() runs
  std::vector<double> floats;
  std::vector<int64_t> ints;
  std::vector<bool> present;         // per forward input: given (an edge of this node) or None
  std::vector<torch::autograd::SavedVariable> saved;
  std::mutex mutex;

  std::string name() const override { return "fkh::NativeBackward"; }

  void release_variables() override {
    std::lock_guard<std::mutex> lock(mutex);
    for (auto& variable : saved) variable.reset_data();
  }

  variable_list apply(variable_list&& grads) override;
};

// The node's owning pointer: std::shared_ptr in older torch, c10::intrusive_ptr in newer.
using NodePtr = decltype(torch::autograd::Edge::function);
template <typename Ptr, typename N>
struct MakeNode;
template <typename N>
struct MakeNode<std::shared_ptr<torch::autograd::Node>, N> {
  // deleteNode (found by argument-dependent lookup: newer torch has none) frees a long chain of
  // nodes without recursing
  static std::shared_ptr<N> make() {
    return std::shared_ptr<N>(new N(), [](N* node) { deleteNode(node); });
  }
};
template <typename N>
struct MakeNode<c10::intrusive_ptr<torch::autograd::Node>, N> {
  static c10::intrusive_ptr<N> make() { return c10::make_intrusive<N>(); }
};
template <typename N>
auto self_pointer(N* node, int) -> decltype(node->getptr()) {
  return node->getptr();
}
template <typename N>
auto self_pointer(N* node, long) -> decltype(node->shared_from_this()) {
  return node->shared_from_this();
}

// Row `row` of a 2-d tensor as a tensor over the same storage, made as ATen's
// alias_with_sizes_and_strides makes one: no dispatch and none of autograd's view bookkeeping
// (Tensor::select costs both), which a gradient the node returns does not need. The row has a
// version counter of its own (a view shares its base's): the rows of one buffer cover separate
// memory, so an in-place change of one (AccumulateGrad may keep it as a .grad) is no other's.
at::Tensor row_of(const at::Tensor& t, int64_t row) {
  FKH_REQUIRE(t.dim() == 2 && row >= 0 && row < t.size(0), "row ", row, " of a tensor of ", t.dim(), " dimensions");
  at::Tensor out = at::detail::make_tensor<c10::TensorImpl>(c10::TensorImpl::VIEW, c10::Storage(t.storage()),
                                                            t.key_set(), t.dtype());
  const int64_t size = t.size(1), stride = t.stride(1);
  out.unsafeGetTensorImpl()->set_sizes_and_strides(c10::IntArrayRef(size), c10::IntArrayRef(stride),
                                                   t.storage_offset() + row * t.stride(0));
  return out;
}

variable_list NativeNode::apply(variable_list&& grads) {
  std::lock_guard<std::mutex> lock(mutex);
  const Program& program = *forward->backward;
  const NodePtr self = self_pointer(this, 0);
  std::vector<at::Tensor> slots;
  slots.reserve(program.given + program.allocs.size());
  // a released variable raises autograd's own error (a second backward without retain_graph)
  for (const auto& variable : saved) slots.push_back(variable.unpack(self));
  FKH_REQUIRE(slots.size() == program.saved_dtypes.size(), "a backward given ", slots.size(),
              " saved tensors where the program takes ", program.saved_dtypes.size());
  for (size_t i = 0; i < slots.size(); ++i) {
    slots[i] = in_layout(slots[i], program.saved_dtypes[i], program.saved_sizes[i], program.saved_strides[i]);
  }
  FKH_REQUIRE(grads.size() == program.grad_dtypes.size(), "a backward given ", grads.size(),
              " output gradients where the program takes ", program.grad_dtypes.size());
  for (size_t i = 0; i < grads.size(); ++i) {
    at::Tensor g = grads[i];
    if (!program.grad_read[i]) {  // a gradient no kernel reads (a non-differentiable output's)
      slots.emplace_back();
      continue;
    }
    if (!g.defined()) {  // an output that went unused: its gradient is zero
      g = at::zeros(program.grad_sizes[i], slots.at(0).options().dtype(program.grad_dtypes[i]));
    }
    slots.push_back(in_layout(g, program.grad_dtypes[i], program.grad_sizes[i], program.grad_strides[i]));
  }
  program.run(slots, floats, ints, slots.at(0).device());
  // one gradient per edge: per given forward input
  variable_list result;
  result.reserve(program.outputs.size());
  for (size_t i = 0; i < program.outputs.size(); ++i) {
    if (!present.at(i)) continue;
    const int64_t slot = program.outputs[i];
    if (slot < 0) {
      result.emplace_back();
    } else {
      result.push_back(program.rows[i] < 0 ? slots[slot] : row_of(slots[slot], program.rows[i]));
    }
  }
  // create_graph=True with gradients that need gradients: the kernels' gradients have no graph
  // of their own. As Python's once_differentiable does, they get a node that raises if anything
  // differentiates through them, instead of a silently wrong second derivative.
  bool differentiated = false;
  for (const auto& g : grads) differentiated = differentiated || (g.defined() && g.requires_grad());
  if (at::GradMode::is_enabled() && differentiated) {
    variable_list defined;
    std::vector<size_t> where;
    for (size_t i = 0; i < result.size(); ++i) {
      if (!result[i].defined()) continue;
      defined.push_back(result[i].detach().requires_grad_(true));
      where.push_back(i);
    }
    auto error = std::make_shared<torch::autograd::DelayedError>(
        "fkh native: this kernel's backward is not differentiable (a second derivative through it, "
        "create_graph=True, needs the eager reference)",
        static_cast<int64_t>(defined.size()));
    variable_list wrapped = (*error)(std::move(defined));
    for (size_t k = 0; k < where.size(); ++k) result[where[k]] = wrapped[k];
  }
  return result;
}

std::vector<at::Tensor> given_tensors(const std::vector<std::optional<at::Tensor>>& inputs) {
  std::vector<at::Tensor> tensors;
  tensors.reserve(inputs.size());
  for (const auto& t : inputs) tensors.push_back(t.has_value() ? *t : at::Tensor());
  return tensors;
}

// Forward-mode AD (a dual tensor: torch.autograd.forward_ad) has no formula here: refuse it
// rather than return an output without its tangent.
void refuse_dual(const std::vector<at::Tensor>& inputs) {
  for (const auto& t : inputs) {
    FKH_REQUIRE(!t.defined() || !t._fw_grad(/*level=*/0).defined(),
                "forward-mode AD (a dual tensor input) is not implemented for this kernel");
  }
}

// A call with no graph to record: the forward program alone, given its inputs (undefined: None).
// `duals_checked`: the caller has refused dual tensors already (an Entry's signature() does).
std::vector<at::Tensor> run_given(const ProgramPtr& program, std::vector<at::Tensor> slots,
                                  const std::vector<double>& floats, const std::vector<int64_t>& ints,
                                  bool duals_checked = false) {
  if (!duals_checked) refuse_dual(slots);
  program->run(slots, floats, ints, call_device(slots));
  std::vector<at::Tensor> outputs;
  outputs.reserve(program->outputs.size());
  for (int64_t slot : program->outputs) outputs.push_back(slots[slot]);
  return outputs;
}

// A call that records its backward (the program must have one), given its inputs (undefined:
// None): the forward program run, then a NativeNode whose edges are the given inputs' and whose
// inputs are the forward's outputs (a non-differentiable one's is undefined), as eager's
// generated code records an op.
std::vector<at::Tensor> apply_given(const ProgramPtr& program, std::vector<at::Tensor> slots,
                                    const std::vector<double>& floats, const std::vector<int64_t>& ints,
                                    bool duals_checked = false) {
  FKH_REQUIRE(program->backward, "apply() needs a program with a backward");
  const size_t given = slots.size();  // the inputs: the program appends its allocations after them
  FKH_REQUIRE(program->backward->outputs.size() == given, "a program of ", program->backward->outputs.size(),
              " inputs given ", given);
  if (!duals_checked) refuse_dual(slots);
  program->run(slots, floats, ints, call_device(slots));
  auto node = MakeNode<NodePtr, NativeNode>::make();
  std::vector<at::Tensor> edges;
  edges.reserve(given);
  node->present.reserve(given);
  for (size_t i = 0; i < given; ++i) {
    node->present.push_back(slots[i].defined());
    if (slots[i].defined()) edges.push_back(slots[i]);
  }
  node->set_next_edges(torch::autograd::collect_next_edges(edges));
  node->forward = program;
  node->floats = floats;
  node->ints = ints;
  std::vector<at::Tensor> outputs;
  outputs.reserve(program->outputs.size());
  std::vector<bool> has_history(slots.size(), false);
  for (size_t i = 0; i < program->outputs.size(); ++i) {
    const int64_t slot = program->outputs[i];
    at::Tensor output = slots[slot];
    if (program->differentiable[i]) {
      torch::autograd::set_history(output, node);
      has_history[slot] = true;
    } else {
      node->add_input_metadata(torch::autograd::Node::undefined_input());
    }
    outputs.push_back(std::move(output));
  }
  // saved after set_history: an output is saved as one (no reference cycle through its grad_fn)
  node->saved.reserve(program->saved.size());
  for (int64_t slot : program->saved) node->saved.emplace_back(slots[slot], has_history[slot]);
  return outputs;
}

std::vector<at::Tensor> run(const ProgramPtr& program, const std::vector<std::optional<at::Tensor>>& inputs,
                            const std::vector<double>& floats, const std::vector<int64_t>& ints) {
  return run_given(program, given_tensors(inputs), floats, ints);
}

std::vector<at::Tensor> apply(const ProgramPtr& program, const std::vector<std::optional<at::Tensor>>& inputs,
                              const std::vector<double>& floats, const std::vector<int64_t>& ints) {
  return apply_given(program, given_tensors(inputs), floats, ints);
}

// ---- an op's entry: its programs by call signature --------------------------------------------

// A call's signature as the key of an Entry's table: grad mode, then per tensor argument -1 where
// it is None, else its dtype, device, 16-byte alignment, requires_grad, sizes and strides. It
// holds every field of the Python plan keys (kernels/_norm_native.py, kernels/softmax.py) and
// more, so a program found under it is the one the Python path records for the call.
struct KeyHash {
  size_t operator()(const std::vector<int64_t>& key) const noexcept {
    size_t h = key.size();
    for (int64_t v : key) h ^= static_cast<size_t>(v) + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
    return h;
  }
};

// Whether `t` is a tensor the programs may be given: strided, on CUDA, not nested, carrying no
// dispatch key that gives it other semantics (a Python subclass's, functorch's wrappers,
// functionalization, a conjugate or negative view) and no forward-mode tangent.
bool plain(const at::Tensor& t) {
  static const c10::DispatchKeySet other({c10::DispatchKey::Python, c10::DispatchKey::FuncTorchBatched,
                                          c10::DispatchKey::FuncTorchGradWrapper, c10::DispatchKey::Functionalize,
                                          c10::DispatchKey::Conjugate, c10::DispatchKey::Negative,
                                          c10::DispatchKey::ZeroTensor});
  return t.layout() == c10::kStrided && t.is_cuda() && !t.is_nested() && !t.key_set().has_any(other) &&
         !t._fw_grad(/*level=*/0).defined();
}

// The key of a call's tensors (`args`' first `count`), or false where one is neither None nor a
// plain torch.Tensor (or Parameter) that plain() accepts.
bool signature(PyObject* const* args, int64_t count, std::vector<int64_t>& key, std::vector<at::Tensor>& tensors,
               bool& grad) {
  const bool grad_mode = at::GradMode::is_enabled();
  key.push_back(grad_mode);
  bool any_requires = false;
  for (int64_t i = 0; i < count; ++i) {
    PyObject* obj = args[i];
    if (obj == Py_None) {
      key.push_back(-1);
      tensors.emplace_back();
      continue;
    }
    if (!THPVariable_CheckExact(obj)) return false;
    const at::Tensor& t = THPVariable_Unpack(obj);
    if (!plain(t)) return false;
    const bool needs_grad = t.requires_grad();
    any_requires = any_requires || needs_grad;
    key.push_back(static_cast<int64_t>(t.scalar_type()));
    key.push_back(t.device().index());
    key.push_back((reinterpret_cast<uintptr_t>(t.data_ptr()) & 15) == 0);
    key.push_back(needs_grad);
    key.push_back(t.dim());
    for (int64_t size : t.sizes()) key.push_back(size);
    for (int64_t stride : t.strides()) key.push_back(stride);
    tensors.push_back(t);
  }
  grad = grad_mode && any_requires;
  return true;
}

// One op's table of programs by call signature, and its call: given the op's arguments (its
// tensors, None where absent, then its float and its int scalars, in the order its programs take
// them), the program recorded for their signature runs, all in C++; a call whose signature has no
// program (not recorded yet, or recorded as not served), or whose scalar breaks a rule below,
// returns None and the op takes its Python path, which validates it and records its program.
// The Python path validated every earlier call of a signature; its checks read only what the key
// holds and the scalars, and the scalars' checks are repeated here: finite, at least `float_min`,
// and 0 where `float_needs` names a tensor argument that is None.
struct Entry {
  static constexpr int64_t kSlotsAhead = 8;  // room for a program's allocations in the call's slots
  int64_t tensors = 0;
  std::vector<double> float_min;
  std::vector<int64_t> float_needs;
  int64_t ints = 0;
  bool single = false;  // the call returns its one output, not a list
  size_t limit = 0;     // a table this full starts afresh (kernels/_launch.py's PLAN_LIMIT)
  std::unordered_map<std::vector<int64_t>, ProgramPtr, KeyHash> programs;

  size_t arity() const { return static_cast<size_t>(tensors) + float_min.size() + static_cast<size_t>(ints); }

  pybind11::object call(const pybind11::args& args) const {
    return call(&PySequence_Fast_ITEMS(args.ptr())[0], args.size());
  }

  pybind11::object call(PyObject* const* items, size_t nargs) const {
    if (nargs != arity()) return pybind11::none();
    std::vector<double> floats;
    if (!float_min.empty()) floats.reserve(float_min.size());
    for (size_t i = 0; i < float_min.size(); ++i) {
      PyObject* obj = items[tensors + i];
      double value;
      if (PyFloat_CheckExact(obj)) {
        value = PyFloat_AS_DOUBLE(obj);
      } else if (PyLong_CheckExact(obj)) {
        value = PyLong_AsDouble(obj);
        if (value == -1.0 && PyErr_Occurred()) {
          PyErr_Clear();
          return pybind11::none();
        }
      } else {
        return pybind11::none();
      }
      if (!std::isfinite(value) || value < float_min[i]) return pybind11::none();
      if (value != 0.0 && float_needs[i] >= 0 && items[float_needs[i]] == Py_None) return pybind11::none();
      floats.push_back(value);
    }
    std::vector<int64_t> int_values;
    if (ints > 0) int_values.reserve(ints);
    for (int64_t i = 0; i < ints; ++i) {
      PyObject* obj = items[tensors + float_min.size() + i];
      if (!PyLong_CheckExact(obj)) return pybind11::none();
      int overflow = 0;
      const long long value = PyLong_AsLongLongAndOverflow(obj, &overflow);
      if (overflow != 0 || (value == -1 && PyErr_Occurred())) {
        PyErr_Clear();
        return pybind11::none();
      }
      int_values.push_back(value);
    }
    // the key's buffer is the thread's, reused from call to call (no allocation once it is grown)
    thread_local std::vector<int64_t> key;
    key.clear();
    std::vector<at::Tensor> given;
    given.reserve(tensors + kSlotsAhead);  // the program appends its allocations to the same vector
    bool grad = false;
    if (!signature(items, tensors, key, given, grad)) return pybind11::none();
    const auto found = programs.find(key);
    if (found == programs.end() || !found->second) return pybind11::none();
    const ProgramPtr program = found->second;  // kept alive while a hook (Python) may change the table
    FKH_REQUIRE(static_cast<bool>(program->backward) == grad, "a program recorded ",
                program->backward ? "with" : "without", " a backward for a call that ", grad ? "records" : "records no",
                " graph");
    // signature() refused dual tensors (plain())
    std::vector<at::Tensor> outputs = grad ? apply_given(program, std::move(given), floats, int_values, true)
                                           : run_given(program, std::move(given), floats, int_values, true);
    if (single) return wrap(std::move(outputs.at(0)));
    pybind11::list result(outputs.size());
    for (size_t i = 0; i < outputs.size(); ++i) result[i] = wrap(std::move(outputs[i]));
    return result;
  }

  static pybind11::object wrap(at::Tensor&& t) {
    PyObject* obj = THPVariable_Wrap(std::move(t));
    if (obj == nullptr) throw pybind11::error_already_set();
    return pybind11::reinterpret_steal<pybind11::object>(obj);
  }

  // Record `program` (None: the signature is not served) for the signature of `tensors`; false
  // where a tensor is one the table does not key (then the call keeps the Python path).
  bool remember(const pybind11::tuple& given, const std::optional<ProgramPtr>& program) {
    FKH_REQUIRE(static_cast<int64_t>(given.size()) == tensors, "an entry of ", tensors, " tensors given ",
                given.size());
    std::vector<int64_t> key;
    std::vector<at::Tensor> unused;
    bool grad = false;
    if (!signature(&PySequence_Fast_ITEMS(given.ptr())[0], tensors, key, unused, grad)) return false;
    if (program.has_value()) {
      FKH_REQUIRE(static_cast<bool>((*program)->backward) == grad, "a program ",
                  (*program)->backward ? "with" : "without", " a backward recorded for a call that ",
                  grad ? "records" : "records no", " graph");
    }
    const auto found = programs.find(key);
    if (found != programs.end()) {
      found->second = program.value_or(ProgramPtr());
      return true;
    }
    if (programs.size() >= limit) programs.clear();
    programs.emplace(std::move(key), program.value_or(ProgramPtr()));
    return true;
  }
};

// An Entry's call as a builtin function of Python's fast calling convention (METH_FASTCALL): its
// arguments arrive as an array, with none of pybind11's dispatch (a tuple of the arguments, the
// overload search, the conversion of `self`), which costs about what the rest of a small call's
// C++ does before it launches. Exceptions become Python's as torch's own bindings raise them
// (torch.OutOfMemoryError for an allocation that fails).
//
// The function also asks what kernels/_native.py's enabled() asks, from the same state (its
// `_STATE` list: [the module or None, Triton's runtime knobs or None]), so that an entry point's
// Python need not: the native path is on, and no Triton launch hook is installed (a hook is a
// function, or a HookChain whose `calls` is not empty). Where it is off, the call returns None.
struct EntryFunction {
  const Entry* entry;
  PyObject* owner;  // the Entry's Python object, kept alive
  PyObject* state;  // kernels/_native.py's _STATE
};

constexpr const char* kEntryCapsule = "fkh_native.EntryFunction";

// 1 where `runtime.<name>` is a hook that is set, 0 where not, -1 with a Python error
int hooked(PyObject* runtime, PyObject* name) {
  static PyObject* const calls_name = PyUnicode_InternFromString("calls");  // never freed
  PyObject* hook = PyObject_GetAttr(runtime, name);
  if (hook == nullptr) return -1;
  if (hook == Py_None) {
    Py_DECREF(hook);
    return 0;
  }
  PyObject* calls = PyObject_GetAttr(hook, calls_name);
  Py_DECREF(hook);
  if (calls == nullptr) {  // a plain function (older Triton): set
    if (!PyErr_ExceptionMatches(PyExc_AttributeError)) return -1;
    PyErr_Clear();
    return 1;
  }
  const int set = PyObject_IsTrue(calls);
  Py_DECREF(calls);
  return set;
}

// 1 where calls may take the native path, 0 where not, -1 with a Python error
int native_on(PyObject* state) {
  if (!PyList_Check(state) || PyList_GET_SIZE(state) < 1 || PyList_GET_ITEM(state, 0) == Py_None) return 0;
  PyObject* runtime = PyList_GET_SIZE(state) > 1 ? PyList_GET_ITEM(state, 1) : Py_None;
  if (runtime == Py_None) return 1;
  static PyObject* const names[] = {PyUnicode_InternFromString("launch_enter_hook"),
                                    PyUnicode_InternFromString("launch_exit_hook")};  // never freed
  for (PyObject* name : names) {
    const int set = hooked(runtime, name);
    if (set != 0) return set < 0 ? -1 : 0;
  }
  return 1;
}

PyObject* entry_fastcall(PyObject* capsule, PyObject* const* args, Py_ssize_t nargs) {
  try {
    const auto* function = static_cast<const EntryFunction*>(PyCapsule_GetPointer(capsule, kEntryCapsule));
    if (function == nullptr) return nullptr;
    const int on = native_on(function->state);
    if (on < 0) return nullptr;
    if (on == 0) Py_RETURN_NONE;
    return function->entry->call(args, static_cast<size_t>(nargs)).release().ptr();
  } catch (const std::exception&) {
    torch::translate_exception_to_python(std::current_exception());
    return nullptr;
  }
}

PyMethodDef entry_fastcall_def = {"call", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(entry_fastcall)),
                                  METH_FASTCALL, "An Entry's call (kernels/_native.py)"};

void release_entry_function(PyObject* capsule) {
  auto* function = static_cast<EntryFunction*>(PyCapsule_GetPointer(capsule, kEntryCapsule));
  if (function == nullptr) {
    PyErr_Clear();
    return;
  }
  Py_XDECREF(function->owner);
  Py_XDECREF(function->state);
  delete function;
}

// The function calling `entry` while `state` says the native path is on; it keeps both alive.
pybind11::object entry_function(pybind11::object owner, pybind11::list state) {
  auto* function = new EntryFunction{owner.cast<const Entry*>(), owner.inc_ref().ptr(), state.inc_ref().ptr()};
  PyObject* capsule = PyCapsule_New(function, kEntryCapsule, release_entry_function);
  if (capsule == nullptr) {
    owner.dec_ref();
    state.dec_ref();
    delete function;
    throw pybind11::error_already_set();
  }
  PyObject* callable = PyCFunction_NewEx(&entry_fastcall_def, capsule, nullptr);
  Py_DECREF(capsule);  // the function holds it
  if (callable == nullptr) throw pybind11::error_already_set();
  return pybind11::reinterpret_steal<pybind11::object>(callable);
}

Entry make_entry(int64_t tensors, std::vector<double> float_min, std::vector<int64_t> float_needs, int64_t ints,
                 bool single, int64_t limit) {
  FKH_REQUIRE(tensors >= 1 && ints >= 0 && limit > 0, "an entry takes at least one tensor, ints >= 0 and a limit > 0");
  FKH_REQUIRE(float_needs.size() == float_min.size(), "one float_needs per float");
  for (int64_t t : float_needs) FKH_REQUIRE(t >= -1 && t < tensors, "float_needs ", t, " of ", tensors);
  Entry entry;
  entry.tensors = tensors;
  entry.float_min = std::move(float_min);
  entry.float_needs = std::move(float_needs);
  entry.ints = ints;
  entry.single = single;
  entry.limit = static_cast<size_t>(limit);
  return entry;
}

using ParamTuple = std::tuple<int64_t, int64_t, int64_t, double>;
using LaunchTuple = std::tuple<int64_t, std::vector<int64_t>, int64_t, int64_t, std::vector<ParamTuple>, std::string,
                               std::vector<std::vector<int64_t>>>;
using AllocTuple = std::tuple<std::vector<int64_t>, c10::ScalarType>;
using LayoutTuple = std::tuple<c10::ScalarType, std::vector<int64_t>, std::vector<int64_t>>;

ProgramPtr make_program(int64_t given, const std::vector<AllocTuple>& allocs, const std::vector<LaunchTuple>& launches,
                        std::vector<int64_t> outputs, std::vector<bool> differentiable, std::vector<int64_t> saved,
                        std::vector<int64_t> rows, std::vector<c10::ScalarType> grad_dtypes,
                        std::vector<std::vector<int64_t>> grad_sizes, std::vector<std::vector<int64_t>> grad_strides,
                        std::vector<bool> grad_read, const std::vector<LayoutTuple>& saved_layouts,
                        std::optional<ProgramPtr> backward) {
  auto program = c10::make_intrusive<Program>();
  program->given = given;
  const int64_t slots = given + static_cast<int64_t>(allocs.size());
  for (const auto& [sizes, dtype] : allocs) program->allocs.push_back(Alloc{sizes, dtype});
  for (const auto& [function, grid, threads, shared, params, name, maps] : launches) {
    FKH_REQUIRE(grid.size() == 3, "", name, ": a grid has three dimensions");
    FKH_REQUIRE(params.size() <= kMaxParams, "", name, " has more than ", kMaxParams, " parameters");
    FKH_REQUIRE(maps.size() <= kMaxMaps, "", name, " has more than ", kMaxMaps, " tensor maps");
    FKH_REQUIRE(maps.empty() || driver().tensor_map_replace_address != nullptr, "", name,
                " takes tensor maps, and this driver has no cuTensorMapReplaceAddress");
    Launch launch;
    launch.function = reinterpret_cast<void*>(static_cast<uintptr_t>(function));
    for (int d = 0; d < 3; ++d) launch.grid[d] = static_cast<unsigned>(grid[d]);
    launch.threads = static_cast<unsigned>(threads);
    launch.shared = static_cast<unsigned>(shared);
    launch.name = name;
    for (const auto& words : maps) {
      FKH_REQUIRE(words.size() == 16, "", name, ": a tensor map is 16 words, not ", words.size());
      TensorMap map;
      for (size_t w = 0; w < 16; ++w) map.words[w] = static_cast<uint64_t>(words[w]);
      launch.maps.push_back(map);
    }
    for (const auto& [kind, index, value, fvalue] : params) {
      FKH_REQUIRE((kind != kTensor && kind != kTensorMap) || (index >= 0 && index < slots), "", name, " reads slot ",
                  index, " of ", slots);
      FKH_REQUIRE(kind != kTensorMap || (value >= 0 && value < static_cast<int64_t>(maps.size())), "", name,
                  " names tensor map ", value, " of ", maps.size());
      FKH_REQUIRE(kind >= kTensor && kind <= kTensorMap, "", name, ": unknown parameter kind ", kind);
      launch.params.push_back(Param{kind, index, value, fvalue});
    }
    program->launches.push_back(std::move(launch));
  }
  const bool is_backward = !grad_read.empty();  // its outputs are gradients: -1 for an input without one
  for (int64_t slot : outputs) {
    FKH_REQUIRE(slot < slots && (slot >= 0 || (is_backward && slot == -1)), "output slot ", slot, " of ", slots);
  }
  for (int64_t slot : saved) FKH_REQUIRE(slot >= 0 && slot < slots, "saved slot ", slot, " of ", slots);
  FKH_REQUIRE(differentiable.empty() || differentiable.size() == outputs.size(),
          "one differentiable flag per output");
  FKH_REQUIRE(rows.empty() || rows.size() == outputs.size(), "one row per gradient");
  program->outputs = std::move(outputs);
  program->differentiable = differentiable.empty() ? std::vector<bool>(program->outputs.size(), true)
                                                    : std::move(differentiable);
  program->saved = std::move(saved);
  program->rows = rows.empty() ? std::vector<int64_t>(program->outputs.size(), -1) : std::move(rows);
  program->grad_dtypes = std::move(grad_dtypes);
  program->grad_sizes = std::move(grad_sizes);
  program->grad_strides = std::move(grad_strides);
  FKH_REQUIRE(grad_read.size() == program->grad_dtypes.size() && program->grad_sizes.size() == grad_read.size() &&
                  program->grad_strides.size() == grad_read.size(),
              "one gradient layout per output");
  program->grad_read = std::move(grad_read);
  for (const auto& [dtype, sizes, strides] : saved_layouts) {
    program->saved_dtypes.push_back(dtype);
    program->saved_sizes.push_back(sizes);
    program->saved_strides.push_back(strides);
  }
  if (backward.has_value()) program->backward = *backward;
  return program;
}

}  // namespace fkh_native

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.doc() = "Triton's compiled kernels launched from C++, with a C++ autograd node (kernels/_native.py)";
  pybind11::class_<fkh_native::Program, fkh_native::ProgramPtr>(m, "Program")
      .def(pybind11::init(&fkh_native::make_program))
      .def_property_readonly("launches", [](const fkh_native::Program& p) { return p.launches.size(); })
      .def_property_readonly("allocations", [](const fkh_native::Program& p) { return p.allocs.size(); });
  pybind11::class_<fkh_native::Entry>(m, "Entry")
      .def(pybind11::init(&fkh_native::make_entry))
      .def("__call__", pybind11::overload_cast<const pybind11::args&>(&fkh_native::Entry::call, pybind11::const_))
      .def("function", &fkh_native::entry_function, pybind11::arg("state"),
           "The entry's call as a builtin function of Python's fast calling convention, on while "
           "`state` (kernels/_native.py's _STATE) says the native path is")
      .def("remember", &fkh_native::Entry::remember)
      .def("clear", [](fkh_native::Entry& e) { e.programs.clear(); })
      .def("__len__", [](const fkh_native::Entry& e) { return e.programs.size(); });
  m.def("run", &fkh_native::run, "Run a forward program with no graph recorded; returns its outputs");
  m.def("apply", &fkh_native::apply, "Run a forward program and record its backward; returns its outputs");
}
