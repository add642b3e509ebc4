#include "l3p/control_loop.h"

#include <memory>
#include <sstream>
#include <stdexcept>

namespace l3p {

ControlLoop::ControlLoop(Client& client, LoopOptions options)
    : client_(client), options_(std::move(options)), rng_(std::random_device{}()) {
  if (options_.hold.empty()) throw std::invalid_argument("LoopOptions.hold: give the action that holds the robot");
  planner_ = std::thread(&ControlLoop::run, this);
}

ControlLoop::~ControlLoop() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  planner_.join();
}

void ControlLoop::push(std::vector<float> observation) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    ++stats_.observations;
    if (pending_) ++stats_.dropped;
    pending_ = Observation{std::move(observation), Clock::now()};
  }
  wake_.notify_all();
}

Command ControlLoop::command() const {
  std::lock_guard<std::mutex> lock(mutex_);
  Command hold{options_.hold, true, Seconds(0), Step{}, fault_};
  if (!last_) {
    if (hold.reason.empty()) hold.reason = "no action yet";
    return hold;
  }
  const Seconds age = Clock::now() - last_->pushed;
  if (age > options_.max_age) {
    if (hold.reason.empty()) {
      std::ostringstream reason;
      reason << "stale: the last action answers an observation " << age.count() * 1000 << " ms old";
      hold.reason = reason.str();
    }
    return hold;
  }
  if (!fault_.empty() && options_.on_fault == OnFault::kHold) return hold;
  return Command{last_->step.action, false, age, last_->step, fault_};
}

LoopStats ControlLoop::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return stats_;
}

bool ControlLoop::next(Observation* observation) {
  std::unique_lock<std::mutex> lock(mutex_);
  wake_.wait(lock, [this] { return stopping_ || pending_; });
  if (stopping_) return false;
  *observation = std::move(*pending_);
  pending_.reset();
  return true;
}

bool ControlLoop::pause(Seconds wait) {
  std::unique_lock<std::mutex> lock(mutex_);
  return !wake_.wait_for(lock, wait, [this] { return stopping_; });
}

void ControlLoop::failed(const std::exception& error) {
  std::lock_guard<std::mutex> lock(mutex_);
  fault_ = stats_.last_error = error.what();
  ++stats_.faults;
}

void ControlLoop::run() {
  const RetryPolicy backoff{1, Seconds(0.1), options_.max_backoff, 2.0};
  const StreamOptions once{false, std::nullopt, false};  // this loop reconnects, and backs off, itself
  std::unique_ptr<StreamEpisode> episode;
  int failures = 0;    // in a row, for the backoff
  long opened = 0;     // streams
  bool fresh = false;  // the stream's first step: a new session after a fault
  Observation observation;
  while (true) {
    if (!episode) {
      try {
        episode = std::make_unique<StreamEpisode>(client_, options_.goal, options_.episode, once);
        fresh = opened++ > 0;
        std::lock_guard<std::mutex> lock(mutex_);
        stats_.reconnects = opened - 1;
      } catch (const std::exception& error) {
        failed(error);
        if (!pause(backoff.backoff(++failures, rng_))) return;
        continue;
      }
    }
    if (!next(&observation)) return;
    try {
      Step step = episode->act(observation.values, options_.step_timeout);
      step.resumed = fresh;
      fresh = false;
      failures = 0;
      std::lock_guard<std::mutex> lock(mutex_);
      last_ = Answer{std::move(step), observation.pushed};
      fault_.clear();
      ++stats_.actions;
    } catch (const std::exception& error) {
      failed(error);
      // A refused observation leaves the episode usable (its next act reopens the stream);
      // anything else drops the stream, and the next one starts with the goal. Either way back
      // off: a sensor sending NaN must not cost the server a new session per observation.
      if (dynamic_cast<const InvalidArgument*>(&error) == nullptr) episode.reset();
      if (!pause(backoff.backoff(++failures, rng_))) return;
    }
  }
}

}  // namespace l3p
