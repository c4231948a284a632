// Typed payloads cost nothing unless included: pgqueue.hpp does not pull in nlohmann/json.
#include <pgqueue/pgqueue.hpp>

#ifdef NLOHMANN_JSON_VERSION_MAJOR
#error "pgqueue/pgqueue.hpp includes nlohmann/json; only pgqueue/json.hpp may"
#endif
