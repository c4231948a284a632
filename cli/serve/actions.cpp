#include "actions.hpp"

#include <nlohmann/json.hpp>

#include "../context.hpp"

namespace pgqueue_cli::dashboard {

namespace {

// The body's refusal: a message for the page (400).
struct bad_body : std::runtime_error {
  using std::runtime_error::runtime_error;
};

std::string queue_of(const nlohmann::json& body) {
  if (!body.contains("queue") || !body["queue"].is_string()) {
    throw bad_body("\"queue\" (a string) is missing");
  }
  return body["queue"].get<std::string>();
}

std::int64_t job_id_of(const nlohmann::json& v) {
  if (!v.is_number_integer() || v.get<std::int64_t>() < 1) {
    throw bad_body("a job id is a positive integer");
  }
  return v.get<std::int64_t>();
}

http_response error_response(int status, const std::string& message) {
  nlohmann::json body{{"error", message}};
  return http_response::json(status, body);
}

asio::awaitable<nlohmann::json> act(pgqueue::database& db, const std::string& name,
                                    const nlohmann::json& body) {
  if (name == "pause" || name == "resume") {
    pgqueue::queue q{db, queue_of(body)};
    bool changed = false;
    if (name == "pause") {
      changed = co_await q.pause();
    } else {
      changed = co_await q.resume();
    }
    co_return nlohmann::json{{"queue", q.name()}, {"changed", changed}};
  }
  if (name == "retry") {
    pgqueue::pg::params p{queue_of(body)};
    if (body.contains("ids")) {
      if (!body["ids"].is_array()) throw bad_body("\"ids\" is a list of job ids");
      std::vector<std::int64_t> ids;
      for (const auto& id : body["ids"]) ids.push_back(job_id_of(id));
      p.add(ids);
    } else {
      p.add(std::nullopt);
    }
    auto r = co_await db.query("SELECT pgqueue.retry_dead($1, $2::bigint[])", std::move(p));
    co_return nlohmann::json{{"retried", r.get<int>(0, 0)}};
  }
  // cancel
  if (!body.contains("id")) throw bad_body("\"id\" (a job id) is missing");
  pgqueue::pg::params p{job_id_of(body["id"])};
  auto r = co_await db.query("SELECT pgqueue.cancel($1)", std::move(p));
  co_return nlohmann::json{{"cancelled", r.get<bool>(0, 0)}};
}

}  // namespace

asio::awaitable<http_response> run_action(pgqueue::database& db, const std::string& name,
                                          const std::string& body) {
  auto parsed = nlohmann::json::parse(body, nullptr, false);
  if (parsed.is_discarded() || !parsed.is_object()) {
    co_return error_response(400, "the body is not a JSON object");
  }
  int status = 200;
  std::string message;
  nlohmann::json answer;
  try {
    answer = co_await act(db, name, parsed);
  } catch (const bad_body& e) {
    status = 400;
    message = e.what();
  } catch (const pgqueue::error& e) {
    // Input the server refuses (a bad queue name) is the request's fault; else the server's.
    status = refused_input(e) || e.code() == pgqueue::errc::invalid_argument ? 400 : 500;
    message = e.what();
    if (!e.sqlstate().empty()) message += " (SQLSTATE " + e.sqlstate() + ")";
  }
  if (status != 200) co_return error_response(status, message);
  co_return http_response::json(200, answer);
}

}  // namespace pgqueue_cli::dashboard
