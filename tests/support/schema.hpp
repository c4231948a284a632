// What the installed pgqueue schema consists of, as text: for comparing installs made by
// different paths (a fresh install against an upgrade from each earlier version).
#pragma once

#include <string>

#include "support/session.hpp"

namespace pgq_test {

// The version this checkout's sql/pgqueue.sql installs (the number of its last migration).
constexpr int current_schema_version = 13;

// One line per object of the pgqueue schema, sorted: tables with their columns (type, NOT
// NULL, default) and storage options, constraints, indexes, triggers, views, and functions
// with their definition, SECURITY DEFINER flag and grants, then the schema version. Nothing
// that differs between two equal installs (oids, file nodes, install times) is in it.
std::string schema_structure(session& s);

}  // namespace pgq_test
