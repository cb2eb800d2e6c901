// libtorch calls tch 0.24 does not expose, for Rust (agent/src/aten.rs; read it
// first): a count of the ops a stretch of work dispatches, Adam's fused kernel, a
// product with its bias and ReLU as one op, and a storage's handle count. Compiled by agent/build.rs against the installed PyTorch's
// headers (no CUDA headers needed), as torch-sys compiles its own wrapper. The tensors
// come in as tch's handles, which are `at::Tensor*` (torch-sys's `tensor`).
//
// The op count: a thread-local RecordFunction observer (at::addThreadLocalCallback)
// that notes each op called from outside another op, in order. Why top-level ops: each is one dispatch from our code, and on CUDA one kernel or a
// few; the ops they call inside (linear's addmm, an out variant's resize) are theirs.
// A depth counter tells them apart: only a start at depth 0 is noted.
//
// A top-level op that makes the host wait for the device is marked: those that read a
// value back (item, _local_scalar_dense, is_nonzero, equal, allclose), those whose
// result's size depends on the data (nonzero, masked_select, unique), and a copy
// between devices (a tensor input or a device argument on another device than the
// first; a 0-dimensional CPU tensor is a scalar operand and does not count).
//
// No C++ exception crosses into Rust: every entry point catches and returns the
// message (0 on success).

#include <ATen/ATen.h>
#include <ATen/record_function.h>
#include <ATen/core/ivalue.h>

#include <cstring>
#include <exception>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

namespace {

struct Counter {
  bool on = false;
  // Also note each op's arguments (what a CUDA graph's recorded kernels keep of them).
  bool with_args = false;
  at::CallbackHandle handle = 0;
  int depth = 0;
  // One line per top-level op: its name, a tab and "sync" when it makes the host wait;
  // with arguments, a tab and their description.
  std::vector<std::string> ops;
};

thread_local Counter counter;

bool reads_back(const std::string& name) {
  static const char* names[] = {"aten::item", "aten::_local_scalar_dense", "aten::is_nonzero", "aten::equal", "aten::allclose",
                                "aten::nonzero", "aten::masked_select", "aten::unique", "aten::_unique", "aten::_unique2",
                                "aten::unique_consecutive", "aten::unique_dim", "aten::cpu"};
  for (const char* n : names) {
    if (name == n) {
      return true;
    }
  }
  return false;
}

// Whether the op's inputs span two devices (a copy between them waits on one).
bool crosses_devices(const at::RecordFunction& fn) {
  std::optional<c10::Device> first;
  for (const c10::IValue& v : fn.inputs()) {
    std::optional<c10::Device> d;
    if (v.isTensor() && v.toTensor().defined()) {
      const at::Tensor& t = v.toTensor();
      // A 0-dimensional CPU tensor is a scalar operand, read on the host (no wait).
      if (t.dim() == 0 && t.device().is_cpu()) {
        continue;
      }
      d = t.device();
    } else if (v.isDevice()) {
      d = v.toDevice();
    }
    if (!d) {
      continue;
    }
    if (!first) {
      first = d;
    } else if (*d != *first) {
      return true;
    }
  }
  return false;
}

// An op's arguments as a capture would keep them: a tensor's kind, shape and device
// (its contents are read at each replay), in a list each tensor so, every other value as
// it is.
void describe_value(std::ostringstream& out, const c10::IValue& v) {
  if (v.isTensor()) {
    const at::Tensor& t = v.toTensor();
    if (t.defined()) {
      out << t.scalar_type() << t.sizes() << "@" << t.device();
    } else {
      out << "undefined";
    }
  } else if (v.isList()) {
    out << "[";
    for (const c10::IValue& e : v.toListRef()) {
      describe_value(out, e);
      out << ", ";
    }
    out << "]";
  } else {
    out << v;
  }
}

std::string describe(const at::RecordFunction& fn) {
  std::ostringstream out;
  for (const c10::IValue& v : fn.inputs()) {
    describe_value(out, v);
    out << "; ";
  }
  return out.str();
}

std::unique_ptr<at::ObserverContext> on_start(const at::RecordFunction& fn) {
  if (counter.depth++ == 0) {
    std::string name = fn.name();
    bool sync = reads_back(name) || crosses_devices(fn);
    std::string line = name + (sync ? "\tsync" : "\t");
    if (counter.with_args) {
      line += "\t" + describe(fn);
    }
    counter.ops.push_back(line);
  }
  return nullptr;
}

void on_end(const at::RecordFunction&, at::ObserverContext*) { --counter.depth; }

int fail(char* err, size_t len, const char* what) {
  if (err != nullptr && len > 0) {
    std::strncpy(err, what, len - 1);
    err[len - 1] = '\0';
  }
  return 1;
}

template <typename F>
int guarded(char* err, size_t len, F&& f) {
  try {
    f();
    return 0;
  } catch (const std::exception& e) {
    return fail(err, len, e.what());
  } catch (...) {
    return fail(err, len, "unknown C++ exception");
  }
}

}  // namespace

extern "C" {

// Start noting this thread's top-level ops (an error if already started), with their
// arguments if `with_args`.
int shine_op_count_begin(int with_args, char* err, size_t len) {
  return guarded(err, len, [&] {
    if (counter.on) {
      throw std::runtime_error("op counting already started on this thread");
    }
    counter.ops.clear();
    counter.depth = 0;
    counter.with_args = with_args != 0;
    counter.handle = at::addThreadLocalCallback(
        at::RecordFunctionCallback(on_start, on_end).needsInputs(true).scopes({at::RecordScope::FUNCTION}));
    counter.on = true;
  });
}

// Stop, and write the ops noted, one per line ("name\t" or "name\tsync", then with
// arguments "\t" and their description), into `out`
// (`out_len` bytes, NUL-ended, cut short if it does not fit); `*needed` is the bytes
// the whole list takes. Call with out = nullptr to learn the size: the list is kept
// until the next begin.
int shine_op_count_end(char* out, size_t out_len, size_t* needed, char* err, size_t len) {
  return guarded(err, len, [&] {
    if (counter.on) {
      at::removeCallback(counter.handle);
      counter.on = false;
    }
    std::string text;
    for (const std::string& op : counter.ops) {
      text += op;
      text += '\n';
    }
    *needed = text.size() + 1;
    if (out != nullptr && out_len > 0) {
      size_t m = text.size() < out_len - 1 ? text.size() : out_len - 1;
      std::memcpy(out, text.data(), m);
      out[m] = '\0';
    }
  });
}

// Adam's fused kernel (torch.optim.Adam(fused=True)'s) on one parameter tensor, with
// its learning rate as a tensor (read on the device: a captured graph needs no host
// value), no weight decay, no AMSGrad. `found_inf` may be null; where it holds 1 the
// kernel leaves everything as it was. `step` is the update's number, already counted.
int shine_fused_adam(at::Tensor* param, at::Tensor* grad, at::Tensor* exp_avg, at::Tensor* exp_avg_sq, at::Tensor* step,
                     at::Tensor* lr, double beta1, double beta2, double eps, at::Tensor* found_inf, char* err, size_t len) {
  return guarded(err, len, [&] {
    std::optional<at::Tensor> inf;
    if (found_inf != nullptr) {
      inf = *found_inf;
    }
    at::_fused_adam_({*param}, {*grad}, {*exp_avg}, {*exp_avg_sq}, {}, {*step}, *lr, beta1, beta2, 0.0, eps,
                     /*amsgrad=*/false, /*maximize=*/false, /*grad_scale=*/std::nullopt, inf);
  });
}

// relu(bias + mat1 @ mat2) as one op (`at::_addmm_activation`; on CUDA, cuBLASLt
// applies the bias and the ReLU in the product's epilogue). tch 0.24's own wrapper of
// it passes its `use_gelu` where the op takes `beta`, so the bias would be dropped.
int shine_addmm_relu(at::Tensor** out, at::Tensor* bias, at::Tensor* mat1, at::Tensor* mat2, char* err, size_t len) {
  return guarded(err, len, [&] {
    *out = new at::Tensor(at::_addmm_activation(*bias, *mat1, *mat2, /*beta=*/1, /*alpha=*/1, /*use_gelu=*/false));
  });
}

// How many tensors hold `t`'s storage (`t` among them): 1 when `t` is the last.
int shine_storage_use_count(at::Tensor* t, long* count, char* err, size_t len) {
  return guarded(err, len, [&] { *count = static_cast<long>(t->storage().use_count()); });
}

}  // extern "C"
