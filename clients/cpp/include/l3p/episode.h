// An episode over unary calls: one server-side session, started on construction and always ended
// (also when the control loop throws).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "l3p/client.h"

namespace l3p {

// Used by one thread at a time.
class Episode {
 public:
  // Starts the session (StartEpisode, retried). With `resume`, when the server that holds the
  // session is lost (is_lost), act starts a new session with the same goal and options and sends
  // it the same observation: the robot gets its action, the planner re-plans once.
  Episode(Client& client, std::vector<float> goal, v1::EpisodeOptions options = {}, bool resume = false);
  // Ends the session if end() was not called: best effort, no retry (the server's TTL frees it).
  ~Episode();
  Episode(const Episode&) = delete;
  Episode& operator=(const Episode&) = delete;

  // One observation in, one action out. A refused observation (InvalidArgument) leaves the
  // session untouched: the next act goes on.
  Step act(const std::vector<float>& observation, std::optional<Seconds> timeout = {});
  // Ends the session (idempotent); nullopt if the server no longer knew it.
  std::optional<EpisodeSummary> end(bool retry = true);

  const std::string& session_id() const { return session_id_; }
  // Solved steps from each landmark to the goal; -1: no path to it.
  const std::vector<float>& landmark_to_goal() const { return landmark_to_goal_; }
  int resumes() const { return resumes_; }  // sessions replaced after their server was lost

 private:
  void open();

  Client& client_;
  std::vector<float> goal_;
  v1::EpisodeOptions options_;
  bool resume_;
  int resumes_ = 0;
  std::string session_id_;
  std::vector<float> landmark_to_goal_;
  std::optional<EpisodeSummary> summary_;
  bool ended_ = false;
};

}  // namespace l3p
