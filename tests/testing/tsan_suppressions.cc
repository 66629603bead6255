// What ThreadSanitizer must not report in the tests (bazel test --config=tsan); read only by TSan.
//
// exception_ptr: a Work's error is one exception object shared by every waiter
// (std::rethrow_exception does not copy it). Whichever thread drops the last reference
// destroys it, after the others are done: libstdc++ counts the references with atomics, but
// libstdc++ is not instrumented, so TSan does not see that ordering and reports the
// destructor racing with a waiter's earlier e.what() (seen in hier_mismatch_test: the
// hierarchical backend's thread drops its Work while the caller has just read the Desync).
extern "C" const char* __tsan_default_suppressions() {
  return "race:std::__exception_ptr::exception_ptr::_M_release\n";
}
