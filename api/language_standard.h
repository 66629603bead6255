// Most of distcomm's headers use C++17 (std::optional, std::string_view, inline variables): a
// program built as C++14 got dozens of errors from deep inside them. One line instead.
// Included by work.h and store/store.h, which use C++17 and which the API's headers reach;
// the light ones (errors.h, half.h, dtype.h, cuda_stream.h, ...) stay usable from C++14
// (nvcc 11 defaults to it).
#pragma once

#if !defined(__cplusplus) || __cplusplus < 201703L
#error "distcomm needs C++17 or later: build with -std=c++17 (CMake: target_compile_features(... cxx_std_17))"
#endif
