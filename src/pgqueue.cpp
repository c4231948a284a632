// For builds that define PGQUEUE_SEPARATE_COMPILATION (Meson: `pgqueue_compiled_dep`, or
// dependency('pgqueue-compiled') from a parent project). Header-only users do not need it.

// The library, compiled once (the only file that includes pgqueue/src.hpp)
#include <pgqueue/src.hpp>
