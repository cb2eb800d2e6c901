// A CUDA graph of libtorch work, for Rust: tch 0.24 does not expose
// at::cuda::CUDAGraph, so this small shim does (compiled by manager/build.rs against
// the installed PyTorch's headers, as torch-sys compiles its own wrapper). The Rust
// side is manager/src/trainer/cuda_graph.rs; read it first.
//
// Capture happens on a side stream (CUDA cannot capture the legacy default stream),
// made current for the calling thread between begin and end, so every libtorch op the
// thread issues meanwhile is recorded, not run. The side stream waits for the current
// stream before the capture and the current stream waits for it after, as PyTorch's
// torch.cuda.graph context manager does. Replays run on the calling thread's current
// stream, in order with the rest of its work.
//
// Memory: a graph's tensors live in a private memory pool. Each owner of graphs (a group
// of runs, for its life) has one pool and one capture stream (shine_graph_pool_new), so
// its graphs share one pool instead of leaving one each behind; the pool's memory goes
// back to the device once its graphs are gone and the cache is emptied
// (shine_cuda_empty_cache, after a group is rebuilt).
//
// No C++ exception crosses into Rust: every entry point catches and returns the
// message (0 on success).

#include <ATen/cuda/CUDAGraph.h>
#include <ATen/cuda/CUDAEvent.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include <cxxabi.h>

// cuda_profiler_api.h's two functions (the CUDA runtime has them; the header is not
// among the headers PyTorch's CUDA wheels install).
extern "C" cudaError_t cudaProfilerStart(void);
extern "C" cudaError_t cudaProfilerStop(void);

#include <cstdlib>
#include <cstring>
#include <exception>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace {

struct Graph {
  // keep_graph: the recorded graph stays readable after instantiation, so that its
  // kernels can be counted (benchmarks); replay instantiates it on first use.
  at::cuda::CUDAGraph graph{true};
  // The stream that was current before the capture, restored after it.
  std::optional<c10::cuda::CUDAStream> previous;
  std::optional<c10::cuda::CUDAStream> side;
};

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

void* shine_cuda_graph_new(char* err, size_t len) {
  Graph* g = nullptr;
  guarded(err, len, [&] { g = new Graph(); });
  return g;
}

void shine_cuda_graph_free(void* g) { delete static_cast<Graph*>(g); }

// A memory pool for the graphs of one owner, and the stream they are captured on: the
// pool's id (two numbers) and the stream's id, on `device`.
int shine_graph_pool_new(int device, unsigned long long* pool_a, unsigned long long* pool_b, long long* stream, char* err, size_t len) {
  return guarded(err, len, [&] {
    c10::cuda::CUDAGuard guard(static_cast<c10::DeviceIndex>(device));
    at::cuda::MempoolId_t id = at::cuda::graph_pool_handle();
    auto side = c10::cuda::getStreamFromPool(false, static_cast<c10::DeviceIndex>(device));
    *pool_a = id.first;
    *pool_b = id.second;
    *stream = static_cast<long long>(side.id());
  });
}

int shine_cuda_graph_capture_begin(void* handle, int device, unsigned long long pool_a, unsigned long long pool_b, long long stream,
                                   char* err, size_t len) {
  return guarded(err, len, [&] {
    auto* g = static_cast<Graph*>(handle);
    auto index = static_cast<c10::DeviceIndex>(device);
    c10::cuda::CUDAGuard guard(index);
    auto current = c10::cuda::getCurrentCUDAStream();
    auto side = c10::cuda::CUDAStream::unpack3(static_cast<c10::StreamId>(stream), index, c10::DeviceType::CUDA);
    // The side stream starts after everything queued so far.
    at::cuda::CUDAEvent ready;
    ready.record(current);
    ready.block(side);
    g->previous = current;
    g->side = side;
    c10::cuda::setCurrentCUDAStream(side);
    g->graph.capture_begin(at::cuda::MempoolId_t{pool_a, pool_b});
  });
}

// The profiler on (cudaProfilerStart) or off (cudaProfilerStop): under
// `ncu --profile-from-start off`, only what runs between the two is profiled.
int shine_cuda_profiler(int on, char* err, size_t len) {
  return guarded(err, len, [&] { C10_CUDA_CHECK(on ? cudaProfilerStart() : cudaProfilerStop()); });
}

// Memory the caching allocator holds but no tensor uses goes back to the device.
int shine_cuda_empty_cache(char* err, size_t len) {
  return guarded(err, len, [&] { c10::cuda::CUDACachingAllocator::emptyCache(); });
}

// Bytes of device memory in tensors (`allocated`) and held by the caching allocator
// (`reserved`, what nvidia-smi counts of it) on `device`, now.
int shine_cuda_memory(int device, unsigned long long* allocated, unsigned long long* reserved, char* err, size_t len) {
  return guarded(err, len, [&] {
    auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(static_cast<c10::DeviceIndex>(device));
    auto all = static_cast<size_t>(c10::CachingAllocator::StatType::AGGREGATE);
    *allocated = static_cast<unsigned long long>(stats.allocated_bytes[all].current);
    *reserved = static_cast<unsigned long long>(stats.reserved_bytes[all].current);
  });
}

int shine_cuda_graph_capture_end(void* handle, char* err, size_t len) {
  return guarded(err, len, [&] {
    auto* g = static_cast<Graph*>(handle);
    if (!g->previous || !g->side) {
      throw std::runtime_error("capture_end without capture_begin");
    }
    auto restore = [&] {
      c10::cuda::setCurrentCUDAStream(*g->previous);
      at::cuda::CUDAEvent done;
      done.record(*g->side);
      done.block(*g->previous);
      g->previous.reset();
      g->side.reset();
    };
    try {
      g->graph.capture_end();
    } catch (...) {
      restore();
      throw;
    }
    restore();
  });
}

int shine_cuda_graph_replay(void* handle, char* err, size_t len) {
  return guarded(err, len, [&] { static_cast<Graph*>(handle)->graph.replay(); });
}

// The recorded graph's nodes, and how many of them are kernels.
int shine_cuda_graph_count(void* handle, size_t* nodes, size_t* kernels, char* err, size_t len) {
  return guarded(err, len, [&] {
    cudaGraph_t g = static_cast<Graph*>(handle)->graph.raw_cuda_graph();
    size_t n = 0;
    C10_CUDA_CHECK(cudaGraphGetNodes(g, nullptr, &n));
    std::vector<cudaGraphNode_t> all(n);
    C10_CUDA_CHECK(cudaGraphGetNodes(g, all.data(), &n));
    size_t k = 0;
    for (auto node : all) {
      cudaGraphNodeType type;
      C10_CUDA_CHECK(cudaGraphNodeGetType(node, &type));
      k += type == cudaGraphNodeTypeKernel;
    }
    *nodes = n;
    *kernels = k;
  });
}

// The recorded graph's kernels by name, one per line in the graph's node order,
// demangled where the name can be: written into `out` (`out_len` bytes, NUL-ended,
// cut short if it does not fit), and the bytes the whole list needs in `*needed` (call
// with out = nullptr first). A kernel whose name the runtime cannot tell (one launched
// through the driver API by a library) is listed as "(unnamed kernel)". With `dot` not
// null, the graph is also written there in Graphviz form (cudaGraphDebugDotPrint,
// with each kernel node's parameters).
int shine_cuda_graph_kernel_names(void* handle, const char* dot, char* out, size_t out_len, size_t* needed, char* err, size_t len) {
  return guarded(err, len, [&] {
    cudaGraph_t g = static_cast<Graph*>(handle)->graph.raw_cuda_graph();
    if (dot != nullptr) {
      C10_CUDA_CHECK(cudaGraphDebugDotPrint(g, dot, cudaGraphDebugDotFlagsVerbose));
    }
    size_t n = 0;
    C10_CUDA_CHECK(cudaGraphGetNodes(g, nullptr, &n));
    std::vector<cudaGraphNode_t> all(n);
    C10_CUDA_CHECK(cudaGraphGetNodes(g, all.data(), &n));
    std::string names;
    for (auto node : all) {
      cudaGraphNodeType type;
      C10_CUDA_CHECK(cudaGraphNodeGetType(node, &type));
      if (type != cudaGraphNodeTypeKernel) {
        continue;
      }
      std::string name = "(unnamed kernel)";
      cudaKernelNodeParams params{};
      const char* mangled = nullptr;
      if (cudaGraphKernelNodeGetParams(node, &params) == cudaSuccess && cudaFuncGetName(&mangled, params.func) == cudaSuccess && mangled != nullptr) {
        int status = 0;
        char* demangled = abi::__cxa_demangle(mangled, nullptr, nullptr, &status);
        name = status == 0 && demangled != nullptr ? demangled : mangled;
        std::free(demangled);
      }
      // A failed lookup is not an error of the graph: clear it so it is not reported
      // by the next CUDA call.
      (void)cudaGetLastError();
      names += name;
      names += '\n';
    }
    *needed = names.size() + 1;
    if (out != nullptr && out_len > 0) {
      size_t m = names.size() < out_len - 1 ? names.size() : out_len - 1;
      std::memcpy(out, names.data(), m);
      out[m] = '\0';
    }
  });
}

}  // extern "C"
