// How the library's functions are compiled: inline in every translation unit that includes
// them (the default, header-only), or once, in the one translation unit that includes
// pgqueue/src.hpp, when PGQUEUE_SEPARATE_COMPILATION is defined for the whole program.
#pragma once

#if defined(PGQUEUE_SEPARATE_COMPILATION)
#define PGQUEUE_DECL
#else
#define PGQUEUE_DECL inline
#endif
