#include "l3p/errors.h"

namespace l3p {

namespace {
std::string describe(grpc::StatusCode code, const std::string& message, const std::string& method) {
  return (method.empty() ? "" : method + ": ") + code_name(code) + ": " + message;
}
}  // namespace

PlannerError::PlannerError(grpc::StatusCode code, std::string message, std::string method)
    : std::runtime_error(describe(code, message, method)),
      code_(code),
      message_(std::move(message)),
      method_(std::move(method)) {}

const char* code_name(grpc::StatusCode code) {
  switch (code) {
    case grpc::StatusCode::OK: return "OK";
    case grpc::StatusCode::CANCELLED: return "CANCELLED";
    case grpc::StatusCode::UNKNOWN: return "UNKNOWN";
    case grpc::StatusCode::INVALID_ARGUMENT: return "INVALID_ARGUMENT";
    case grpc::StatusCode::DEADLINE_EXCEEDED: return "DEADLINE_EXCEEDED";
    case grpc::StatusCode::NOT_FOUND: return "NOT_FOUND";
    case grpc::StatusCode::ALREADY_EXISTS: return "ALREADY_EXISTS";
    case grpc::StatusCode::PERMISSION_DENIED: return "PERMISSION_DENIED";
    case grpc::StatusCode::RESOURCE_EXHAUSTED: return "RESOURCE_EXHAUSTED";
    case grpc::StatusCode::FAILED_PRECONDITION: return "FAILED_PRECONDITION";
    case grpc::StatusCode::ABORTED: return "ABORTED";
    case grpc::StatusCode::OUT_OF_RANGE: return "OUT_OF_RANGE";
    case grpc::StatusCode::UNIMPLEMENTED: return "UNIMPLEMENTED";
    case grpc::StatusCode::INTERNAL: return "INTERNAL";
    case grpc::StatusCode::UNAVAILABLE: return "UNAVAILABLE";
    case grpc::StatusCode::DATA_LOSS: return "DATA_LOSS";
    case grpc::StatusCode::UNAUTHENTICATED: return "UNAUTHENTICATED";
    default: return "UNKNOWN";
  }
}

void throw_error(grpc::StatusCode code, const std::string& message, const std::string& method) {
  switch (code) {
    case grpc::StatusCode::INVALID_ARGUMENT: throw InvalidArgument(code, message, method);
    case grpc::StatusCode::NOT_FOUND: throw NotFound(code, message, method);
    case grpc::StatusCode::FAILED_PRECONDITION: throw FailedPrecondition(code, message, method);
    case grpc::StatusCode::RESOURCE_EXHAUSTED: throw ResourceExhausted(code, message, method);
    case grpc::StatusCode::UNAVAILABLE: throw Unavailable(code, message, method);
    case grpc::StatusCode::DEADLINE_EXCEEDED: throw DeadlineExceeded(code, message, method);
    case grpc::StatusCode::UNAUTHENTICATED: throw Unauthenticated(code, message, method);
    default: throw PlannerError(code, message, method);
  }
}

bool is_retried(grpc::StatusCode code) {
  return code == grpc::StatusCode::UNAVAILABLE || code == grpc::StatusCode::CANCELLED;
}

bool is_lost(grpc::StatusCode code) {
  switch (code) {
    case grpc::StatusCode::UNAVAILABLE:
    case grpc::StatusCode::NOT_FOUND:
    case grpc::StatusCode::CANCELLED:
    case grpc::StatusCode::INTERNAL:
    case grpc::StatusCode::UNKNOWN:
      return true;
    default:
      return false;
  }
}

}  // namespace l3p
