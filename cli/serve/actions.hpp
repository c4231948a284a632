// What the dashboard's buttons do (POST /api/pause, /api/resume, /api/retry, /api/cancel),
// through the same SQL functions as `pgqueue pause`, `resume`, `retry` and `cancel`. Each
// takes the request's JSON body and answers JSON: 200 with what changed, 400 for a body or a
// name the server refuses. Whether the request may act at all is routes.cpp's business.
#pragma once

#include <string>

#include <asio/awaitable.hpp>
#include <pgqueue/pgqueue.hpp>

#include "http.hpp"

namespace pgqueue_cli::dashboard {

/// `name` is "pause", "resume", "retry" or "cancel". Bodies: `{"queue": Q}` (pause, resume),
/// `{"queue": Q, "ids": [..]}` (retry: only those dead jobs; without ids, all of Q's),
/// `{"id": N}` (cancel). Answers `{"queue": Q, "changed": bool}`, `{"retried": n}`,
/// `{"cancelled": bool}`.
asio::awaitable<http_response> run_action(pgqueue::database& db, const std::string& name,
                                          const std::string& body);

}  // namespace pgqueue_cli::dashboard
