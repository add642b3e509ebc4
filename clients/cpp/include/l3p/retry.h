// How long to wait before repeating a call that may be repeated (GetModelInfo, StartEpisode,
// EndEpisode, opening a stream): exponential backoff with jitter, as the Python client waits.
#pragma once

#include <chrono>
#include <random>

namespace l3p {

using Seconds = std::chrono::duration<double>;

struct RetryPolicy {
  int max_attempts = 8;  // total tries, the first included; 1: no retry
  Seconds initial_backoff{0.2};
  Seconds max_backoff{3.0};
  double multiplier = 2.0;

  // The wait before retry `retry` (1, 2, ...): uniform in [cap/2, cap], cap growing from
  // initial_backoff by multiplier up to max_backoff. Half fixed so a restart gets time, half
  // random so many robots reconnecting at once spread out.
  Seconds backoff(int retry, std::mt19937& rng) const;
};

}  // namespace l3p
