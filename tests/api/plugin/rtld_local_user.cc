// A library of a user's that links the core and runs a collective, for rtld_local_test,
// which opens it RTLD_LOCAL as Python's ctypes and a program's plugin system do.
#include <cstdio>
#include <string>

#include "api/init.h"
#include "api/process_group.h"
#include "api/tensor.h"

// "ok <sum>" or "error: <what>", in a buffer of the library's.
extern "C" const char* all_reduce_alone(const char* backend, const char* store_file) {
  static std::string result;
  try {
    distcomm::InitOptions o;
    o.backend = backend;
    o.rank = 0;
    o.world_size = 1;
    o.init_method = std::string("file://") + store_file;
    distcomm::ProcessGroupPtr pg = distcomm::init_process_group(o);
    distcomm::Tensor t = distcomm::Tensor::of<float>({1.5f, 2.5f});
    pg->all_reduce(t)->wait();
    const float* v = t.data_as<float>();
    result = "ok " + std::to_string(v[0] + v[1]);
    distcomm::destroy_process_group();
  } catch (const std::exception& e) {
    result = std::string("error: ") + e.what();
  }
  return result.c_str();
}
