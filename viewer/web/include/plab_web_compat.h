// What emscripten 3.1.6's libc++ (Debian 12) lacks of the C++20 the engine uses,
// force-included into every file of the web build (viewer/web/CMakeLists.txt).
// Each shim is defined only where the library does not have it.
#pragma once

#include <bit>
#include <type_traits>

#if !defined(__cpp_lib_bit_cast)
namespace std {
// std::bit_cast (C++20, <bit>) through the compiler builtin libc++ later wraps too.
template <class To, class From>
requires(sizeof(To) == sizeof(From) && is_trivially_copyable_v<To> &&
         is_trivially_copyable_v<From>) constexpr To bit_cast(const From& from) noexcept {
    return __builtin_bit_cast(To, from);
}
}  // namespace std
#endif
