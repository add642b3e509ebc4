#include "l3p/stream_episode.h"

#include <algorithm>
#include <stdexcept>
#include <thread>

namespace l3p {

StreamEpisode::StreamEpisode(Client& client, std::vector<float> goal, v1::EpisodeOptions options,
                             StreamOptions stream)
    : client_(client), goal_(std::move(goal)), options_(std::move(options)), stream_options_(stream) {
  open();
}

StreamEpisode::~StreamEpisode() { end(); }

void StreamEpisode::open() {
  const int attempts = stream_options_.retry_open ? std::max(1, client_.options().retry.max_attempts) : 1;
  for (int attempt = 1;; ++attempt) {
    try {
      return open_once();
    } catch (const PlannerError& error) {
      if (!is_lost(error.code()) || attempt == attempts) throw;
    }
    std::this_thread::sleep_for(client_.backoff(attempt));
  }
}

void StreamEpisode::open_once() {
  error_ = nullptr;
  stream_ = std::make_unique<ControlStream>(client_, stream_options_.max_duration);
  v1::ControlRequest request;
  v1::StartEpisodeRequest& start = *request.mutable_start();
  start.mutable_goal()->Add(goal_.begin(), goal_.end());
  *start.mutable_options() = options_;
  start.set_model(client_.options().model);
  const v1::StartEpisodeResponse started =
      exchange(request, v1::ControlResponse::kStarted, client_.options().timeout).started();
  session_id_ = started.session_id();
  landmark_to_goal_.assign(started.landmark_to_goal().begin(), started.landmark_to_goal().end());
}

v1::ControlResponse StreamEpisode::exchange(const v1::ControlRequest& request, v1::ControlResponse::MsgCase expect,
                                            Seconds timeout) {
  if (error_) std::rethrow_exception(error_);
  try {
    return stream_->exchange(request, expect, timeout);
  } catch (const PlannerError& error) {
    error_ = std::current_exception();
    error_code_ = error.code();
    throw;
  }
}

Step StreamEpisode::act(const std::vector<float>& observation, std::optional<Seconds> timeout) {
  if (ended_) throw std::logic_error("stream episode already ended");
  if (error_ && error_code_ == grpc::StatusCode::INVALID_ARGUMENT) {
    open();  // the refused message ended the stream, not the episode
    ++reopens_;
  }
  v1::ControlRequest request;
  request.mutable_observation()->mutable_observation()->Add(observation.begin(), observation.end());
  const Seconds wait = timeout.value_or(client_.options().timeout);
  const auto started = std::chrono::steady_clock::now();
  Step step;
  try {
    step = Step::from(exchange(request, v1::ControlResponse::kAction, wait).action(),
                      std::chrono::steady_clock::now() - started);
  } catch (const PlannerError& lost) {
    if (!stream_options_.resume || !is_lost(lost.code())) throw;
    open();
    ++resumes_;
    const auto again = std::chrono::steady_clock::now();
    step = Step::from(exchange(request, v1::ControlResponse::kAction, wait).action(),
                      std::chrono::steady_clock::now() - again);
    step.resumed = true;
  }
  ++counted_.steps;
  counted_.replans += step.replanned;
  return step;
}

EpisodeSummary StreamEpisode::end() {
  ended_ = true;
  if (stream_) stream_->close(client_.options().timeout);  // a dead stream is already over
  return counted_;
}

}  // namespace l3p
