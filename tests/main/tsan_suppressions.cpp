// ThreadSanitizer's built-in suppressions for tpl's test programs (linked into each of them in
// TSan builds; see tpl_configure_test_target in cmake/tplHelpers.cmake).
//
// Over libc++ (the tsan preset), a weak_ptr's count lives in libc++'s shared library, which TSan
// does not instrument: the decrement that orders a shared_ptr's last release on one thread before
// the control block's deletion by a weak_ptr on another is invisible to it, and it reports the two
// as a race (periodic_timer's tick callback holds its state by weak_ptr). The one suppression names
// libc++'s weak_ptr, so it never applies to libstdc++ builds, whose shared_ptr is all in headers.
#include <version>

#if defined(_LIBCPP_VERSION)
extern "C" const char* __tsan_default_suppressions();
extern "C" const char* __tsan_default_suppressions() { return "race:std::__1::weak_ptr<\n"; }
#endif
