// The client's typed errors: one per gRPC status the planner answers with, each carrying the
// server's message, so a robot's code can react per kind (fix the request, reconnect, hold).
#pragma once

#include <grpcpp/support/status.h>

#include <stdexcept>
#include <string>

namespace l3p {

// A failed planner call. what() reads "Method: CODE: message", as the Python client's errors do.
class PlannerError : public std::runtime_error {
 public:
  PlannerError(grpc::StatusCode code, std::string message, std::string method);
  grpc::StatusCode code() const noexcept { return code_; }
  const std::string& message() const noexcept { return message_; }
  const std::string& method() const noexcept { return method_; }

 private:
  grpc::StatusCode code_;
  std::string message_;
  std::string method_;
};

// Wrong length, NaN/Inf or a bad option: fix the request.
struct InvalidArgument : PlannerError {
  using PlannerError::PlannerError;
};
// Unknown, ended or expired session.
struct NotFound : PlannerError {
  using PlannerError::PlannerError;
};
// Out-of-order use, e.g. an observation before the goal on a stream.
struct FailedPrecondition : PlannerError {
  using PlannerError::PlannerError;
};
// The server's session (or concurrency) limit is reached.
struct ResourceExhausted : PlannerError {
  using PlannerError::PlannerError;
};
// The server cannot be reached (down, restarting, network).
struct Unavailable : PlannerError {
  using PlannerError::PlannerError;
};
// No answer within the call's deadline.
struct DeadlineExceeded : PlannerError {
  using PlannerError::PlannerError;
};
// The server wants a bearer token and got none or a wrong one.
struct Unauthenticated : PlannerError {
  using PlannerError::PlannerError;
};

// The status's name as gRPC spells it: "INVALID_ARGUMENT".
const char* code_name(grpc::StatusCode code);

// Throws the typed error for a failed call's status.
[[noreturn]] void throw_error(grpc::StatusCode code, const std::string& message, const std::string& method);

// A call that may be repeated (not Act) is, after these: the server cannot be reached, or
// cancelled the call as it was stopping.
bool is_retried(grpc::StatusCode code);

// After these an episode's session is gone or out of reach, so a new session can carry it on:
// unreachable, not held after a restart, cancelled while stopping, or reset by a proxy whose
// replica died. Never the caller's own errors, nor DEADLINE_EXCEEDED (a slow server may answer).
bool is_lost(grpc::StatusCode code);

}  // namespace l3p
