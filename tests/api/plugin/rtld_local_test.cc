// A program that does not link distcomm opens a library that does with RTLD_LOCAL
// (dlopen's default, Python's ctypes.CDLL): the plugins that library's group loads must
// still find the core's symbols (plugin_registry.cc make_core_global). A plain cc_test:
// linking the core here would put it in the global scope and hide the fault.
#include <dlfcn.h>
#include <stdlib.h>
#include <unistd.h>

#include <string>

#include <gtest/gtest.h>

#include "tests/testing/test_files.h"

namespace {

using AllReduceAlone = const char* (*)(const char*, const char*);

class RtldLocal : public ::testing::TestWithParam<const char*> {};

TEST_P(RtldLocal, APluginLoadsForALibraryOpenedLocally) {
  const std::string backend = GetParam();
  ::setenv("DISTCOMM_PLUGIN_PATH", distcomm::testing::runfile("backends/" + backend).c_str(), 1);
  const std::string library = distcomm::testing::runfile("tests/api/plugin/librtld_local_user.so");
  void* user = ::dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(user, nullptr) << ::dlerror();
  auto run = reinterpret_cast<AllReduceAlone>(::dlsym(user, "all_reduce_alone"));
  ASSERT_NE(run, nullptr) << ::dlerror();
  char dir[] = "/tmp/rtld_local_test_XXXXXX";
  ASSERT_NE(::mkdtemp(dir), nullptr);
  const std::string store = std::string(dir) + "/store";
  EXPECT_EQ(std::string(run(backend.c_str(), store.c_str())), "ok 4.000000");
  ::unlink(store.c_str());
  ::rmdir(dir);
}

INSTANTIATE_TEST_SUITE_P(Backends, RtldLocal, ::testing::Values("gloo", "shm"));

}  // namespace
