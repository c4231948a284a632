// Compile check: this public header must build on its own.
#include "pgqueue/pg/error.hpp"
