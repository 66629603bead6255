// distcomm's headers use C++17 (std::optional, std::string_view, inline variables): a program
// built as C++14 got dozens of errors from deep inside them. One line instead. Included by the
// public headers that include no other distcomm header, so every public header has it.
#pragma once

#if !defined(__cplusplus) || __cplusplus < 201703L
#error "distcomm needs C++17 or later: build with -std=c++17 (CMake: target_compile_features(... cxx_std_17))"
#endif
