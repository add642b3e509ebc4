// An episode on one Control stream (lower per-step latency than unary calls): the goal opens
// it, then one observation, one action; the server ends the session when the stream ends.
#pragma once

#include <exception>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "l3p/client.h"
#include "l3p/control_stream.h"

namespace l3p {

struct StreamOptions {
  // A stream lost with its server (is_lost) is replaced by a new one carrying the same goal and
  // options, and the observation is sent again: one re-plan, counted by resumes().
  bool resume = false;
  std::optional<Seconds> max_duration;  // bounds each stream as a whole
  // Open again, under the client's retry policy, while a stream breaks before its 'started'
  // reply (such a stream took its session with it). Off: one attempt (ControlLoop backs off itself).
  bool retry_open = true;
};

// Used by one thread at a time.
class StreamEpisode {
 public:
  // Opens the stream and starts the episode.
  StreamEpisode(Client& client, std::vector<float> goal, v1::EpisodeOptions options = {}, StreamOptions stream = {});
  // Closes the stream (cancels it after a failure): the server ends the session either way.
  ~StreamEpisode();
  StreamEpisode(const StreamEpisode&) = delete;
  StreamEpisode& operator=(const StreamEpisode&) = delete;

  // One observation in, one action out, within `timeout` (the client's by default; past it the
  // stream is cancelled). The server ends a stream on a refused message (InvalidArgument); the
  // next act then goes on in a new one with the same goal (one re-plan, counted by reopens()).
  Step act(const std::vector<float>& observation, std::optional<Seconds> timeout = {});
  // Closes the stream (idempotent): steps and re-plans as counted by this client.
  EpisodeSummary end();

  const std::string& session_id() const { return session_id_; }
  const std::vector<float>& landmark_to_goal() const { return landmark_to_goal_; }
  int resumes() const { return resumes_; }
  int reopens() const { return reopens_; }

 private:
  void open();
  void open_once();
  // One exchange on the current stream; a failure is kept (the stream is dead) and rethrown.
  v1::ControlResponse exchange(const v1::ControlRequest& request, v1::ControlResponse::MsgCase expect,
                               Seconds timeout);

  Client& client_;
  std::vector<float> goal_;
  v1::EpisodeOptions options_;
  StreamOptions stream_options_;
  std::unique_ptr<ControlStream> stream_;
  std::exception_ptr error_;  // what ended the current stream
  grpc::StatusCode error_code_ = grpc::StatusCode::OK;
  std::string session_id_;
  std::vector<float> landmark_to_goal_;
  int resumes_ = 0;
  int reopens_ = 0;
  EpisodeSummary counted_;
  bool ended_ = false;
};

}  // namespace l3p
