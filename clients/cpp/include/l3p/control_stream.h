// One Control call (the protocol's bidirectional stream), one request and its one reply at a
// time, each within its own deadline. gRPC's synchronous streams have none per message, so this
// drives the call's completion queue from the caller's thread: no thread of its own, no hop.
#pragma once

#include <grpcpp/grpcpp.h>

#include <memory>
#include <optional>
#include <string>

#include "l3p/client.h"

namespace l3p {

// Used by one thread at a time.
class ControlStream {
 public:
  // Starts the call; `max_duration` optionally bounds the whole stream.
  ControlStream(Client& client, std::optional<Seconds> max_duration);
  // Cancels the call unless it was closed (the server then ends the session).
  ~ControlStream();
  ControlStream(const ControlStream&) = delete;
  ControlStream& operator=(const ControlStream&) = delete;

  // Sends `request` and waits at most `timeout` for the reply, which must carry `expect`
  // ("started" or "action"). A failure throws its typed error and leaves the stream dead: a
  // timeout cancels it (DeadlineExceeded), a refused message ends it with the server's status.
  v1::ControlResponse exchange(const v1::ControlRequest& request, v1::ControlResponse::MsgCase expect,
                               Seconds timeout);
  // Half-closes and waits at most `timeout` for the server to complete the call, then cancels.
  void close(Seconds timeout);

 private:
  enum Op : unsigned { kWrite = 1, kRead = 2, kWritesDone = 4, kFinish = 8 };
  // Waits for every op in flight; false if `deadline` passed first. *ok: all of them succeeded.
  bool settle(std::chrono::system_clock::time_point deadline, bool* ok);
  // Cancels and collects every op still in flight; the call is over.
  void abandon();
  [[noreturn]] void fail(const std::string& expect);

  std::string target_;
  grpc::ClientContext context_;
  grpc::CompletionQueue queue_;
  std::unique_ptr<grpc::ClientAsyncReaderWriter<v1::ControlRequest, v1::ControlResponse>> call_;
  v1::ControlResponse response_;
  grpc::Status status_;
  unsigned pending_ = 0;  // ops started whose completion the queue has not returned yet
  bool done_ = false;     // the call is over: cancelled, failed or finished
};

}  // namespace l3p
