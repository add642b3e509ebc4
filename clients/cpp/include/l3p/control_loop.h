// A robot's control loop around a StreamEpisode, in the pattern of Trossen's PolicyClient: the
// robot thread pushes observations and reads the command to apply whenever its loop ticks; a
// planner thread sends the newest observation and keeps the latest action. The robot never
// waits on the network, and never gets a stale action:
// - the newest observation wins: one pushed before the previous was sent replaces it;
// - on any fault (server down, deadline, refused observation) the command is the hold, or the
//   last action while it is fresh (OnFault::kLastAction), and the planner thread reopens the
//   stream with the episode's goal (backing off) until actions come again;
// - an action answering an observation older than max_age is replaced by the hold.
#pragma once

#include <condition_variable>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "l3p/client.h"
#include "l3p/stream_episode.h"

namespace l3p {

enum class OnFault { kHold, kLastAction };

struct LoopOptions {
  std::vector<float> goal;
  v1::EpisodeOptions episode;  // mode, seed, planner overrides; unset fields: the bundle's defaults
  std::vector<float> hold;     // the action that keeps the robot still (e.g. zeros): required
  // An action answering an observation pushed longer ago than this is stale. A few of the robot's
  // control periods: the command a tick reads answers an earlier tick's observation.
  Seconds max_age{0.2};
  OnFault on_fault = OnFault::kHold;
  std::optional<Seconds> step_timeout;  // the client's timeout when unset
  Seconds max_backoff{1.0};  // the longest wait between failed steps (from 0.1 s, doubling, jittered)
};

struct Command {
  std::vector<float> action;  // what to apply now: the planner's action, or the hold
  bool hold = true;
  Seconds age{0};      // since the observation this action answers was pushed (0 for a hold)
  Step step;           // the planner step the action came from (not for a hold)
  std::string reason;  // why a hold ("no action yet", stale, or the fault); the fault ridden out, if any
};

struct LoopStats {
  long observations = 0;  // pushed
  long dropped = 0;       // replaced by a newer one before they were sent
  long actions = 0;       // answered by the planner
  long faults = 0;        // failed steps and failed stream openings
  long reconnects = 0;    // streams opened after the first (each a new session: one re-plan)
  std::string last_error;
};

class ControlLoop {
 public:
  // Starts the planner thread, which opens the stream at once.
  ControlLoop(Client& client, LoopOptions options);
  // Stops the planner thread and closes the stream, which ends the session: waits at most for the
  // step in flight and the stream's close, each within its deadline.
  ~ControlLoop();
  ControlLoop(const ControlLoop&) = delete;
  ControlLoop& operator=(const ControlLoop&) = delete;

  void push(std::vector<float> observation);  // robot thread: never blocks on the network
  Command command() const;                    // robot thread: what to apply now
  LoopStats stats() const;

 private:
  using Clock = std::chrono::steady_clock;
  struct Observation {
    std::vector<float> values;
    Clock::time_point pushed;
  };
  struct Answer {
    Step step;
    Clock::time_point pushed;  // of the observation it answers
  };

  void run();                           // the planner thread
  bool next(Observation* observation);  // waits for one; false when stopping
  bool pause(Seconds wait);             // false when stopping
  void failed(const std::exception& error);

  Client& client_;
  const LoopOptions options_;
  std::mt19937 rng_;  // the planner thread's backoff jitter
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  bool stopping_ = false;
  std::optional<Observation> pending_;  // the newest observation, not sent yet
  std::optional<Answer> last_;          // the latest action
  std::string fault_;                   // while the planner fails: why
  LoopStats stats_;
  std::thread planner_;  // last: starts once everything it uses exists
};

}  // namespace l3p
