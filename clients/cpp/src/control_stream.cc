#include "l3p/control_stream.h"

#include <sstream>
#include <stdexcept>

namespace l3p {

namespace {

using Clock = std::chrono::system_clock;

Clock::time_point after(Seconds wait) { return Clock::now() + std::chrono::duration_cast<Clock::duration>(wait); }

void* tag(unsigned op) { return reinterpret_cast<void*>(static_cast<std::uintptr_t>(op)); }

const char* name(v1::ControlResponse::MsgCase kind) {
  switch (kind) {
    case v1::ControlResponse::kStarted: return "started";
    case v1::ControlResponse::kAction: return "action";
    default: return "nothing";
  }
}

// A call that failed has ended, so its last ops and status arrive at once; this bounds the wait
// should the network say otherwise.
constexpr Seconds kEndingWait{2.0};

}  // namespace

ControlStream::ControlStream(Client& client, std::optional<Seconds> max_duration)
    : target_(client.options().target) {
  client.prepare(context_, max_duration);
  // The call's headers go with its first message: no round of the queue before it.
  context_.set_initial_metadata_corked(true);
  call_ = client.stub().PrepareAsyncControl(&context_, &queue_);
  call_->StartCall(nullptr);  // corked: no op, no tag
}

ControlStream::~ControlStream() {
  abandon();
  queue_.Shutdown();
  void* ignored;
  bool ok;
  while (queue_.Next(&ignored, &ok)) {
  }
}

bool ControlStream::settle(Clock::time_point deadline, bool* ok) {
  *ok = true;
  while (pending_) {
    void* done;
    bool success;
    if (queue_.AsyncNext(&done, &success, deadline) != grpc::CompletionQueue::GOT_EVENT) return false;
    const auto op = static_cast<unsigned>(reinterpret_cast<std::uintptr_t>(done));
    pending_ &= ~op;
    *ok = *ok && success;
  }
  return true;
}

v1::ControlResponse ControlStream::exchange(const v1::ControlRequest& request, v1::ControlResponse::MsgCase expect,
                                            Seconds timeout) {
  if (done_) throw std::logic_error("the Control stream is over");
  call_->Write(request, tag(kWrite));
  call_->Read(&response_, tag(kRead));
  pending_ |= kWrite | kRead;
  bool ok;
  if (!settle(after(timeout), &ok)) {
    abandon();
    std::ostringstream message;
    message << "no '" << name(expect) << "' reply within " << timeout.count() << " s (server " << target_
            << "); stream cancelled";
    throw DeadlineExceeded(grpc::StatusCode::DEADLINE_EXCEEDED, message.str(), "Control");
  }
  if (!ok) fail(name(expect));
  if (response_.msg_case() != expect) {
    abandon();
    throw PlannerError(grpc::StatusCode::UNKNOWN,
                       std::string("expected '") + name(expect) + "', got '" + name(response_.msg_case()) + "'",
                       "Control");
  }
  return response_;
}

void ControlStream::fail(const std::string& expect) {
  // An op failed: the call has ended, and its status says why (the server's error, or UNAVAILABLE).
  bool ok, finished = false;
  const auto deadline = after(kEndingWait);
  if (settle(deadline, &ok)) {
    call_->Finish(&status_, tag(kFinish));
    pending_ |= kFinish;
    finished = settle(deadline, &ok);
  }
  abandon();
  if (!finished) {
    throw Unavailable(grpc::StatusCode::UNAVAILABLE, "the stream broke (server " + target_ + ")", "Control");
  }
  if (status_.ok()) {
    throw PlannerError(grpc::StatusCode::UNKNOWN, "the server closed the stream while a " + expect + " was expected",
                       "Control");
  }
  throw_error(status_.error_code(), status_.error_message(), "Control");
}

void ControlStream::close(Seconds timeout) {
  if (done_) return;
  const auto deadline = after(timeout);
  bool ok;
  call_->WritesDone(tag(kWritesDone));
  pending_ |= kWritesDone;
  // Half-closed: the server ends the session and completes the call.
  if (settle(deadline, &ok)) {
    call_->Finish(&status_, tag(kFinish));
    pending_ |= kFinish;
    if (settle(deadline, &ok)) done_ = true;
  }
  abandon();
}

void ControlStream::abandon() {
  if (done_ && pending_ == 0) return;
  done_ = true;
  context_.TryCancel();
  void* op;
  bool ok;
  while (pending_ && queue_.Next(&op, &ok)) {
    pending_ &= ~static_cast<unsigned>(reinterpret_cast<std::uintptr_t>(op));
  }
}

}  // namespace l3p
