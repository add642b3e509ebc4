#include "l3p/retry.h"

#include <algorithm>
#include <cmath>

namespace l3p {

Seconds RetryPolicy::backoff(int retry, std::mt19937& rng) const {
  const double cap = std::min(max_backoff.count(), initial_backoff.count() * std::pow(multiplier, retry - 1));
  return Seconds(std::uniform_real_distribution<double>(cap / 2, cap)(rng));
}

}  // namespace l3p
