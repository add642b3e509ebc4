#include "l3p/episode.h"

#include <stdexcept>

namespace l3p {

Episode::Episode(Client& client, std::vector<float> goal, v1::EpisodeOptions options, bool resume)
    : client_(client), goal_(std::move(goal)), options_(std::move(options)), resume_(resume) {
  open();
}

Episode::~Episode() {
  try {
    end(false);
  } catch (const PlannerError&) {  // never mask what unwinds; the TTL frees the session
  }
}

void Episode::open() {
  const v1::StartEpisodeResponse started = client_.start_episode(goal_, options_);
  session_id_ = started.session_id();
  landmark_to_goal_.assign(started.landmark_to_goal().begin(), started.landmark_to_goal().end());
}

Step Episode::act(const std::vector<float>& observation, std::optional<Seconds> timeout) {
  if (ended_) throw std::logic_error("episode already ended");
  try {
    return client_.act(session_id_, observation, timeout);
  } catch (const PlannerError& lost) {
    if (!resume_ || !is_lost(lost.code())) throw;
  }
  open();
  ++resumes_;
  Step step = client_.act(session_id_, observation, timeout);
  step.resumed = true;
  return step;
}

std::optional<EpisodeSummary> Episode::end(bool retry) {
  if (ended_) return summary_;
  try {
    summary_ = client_.end_episode(session_id_, {}, retry);
  } catch (const NotFound&) {
    // Expired, or a retried EndEpisode whose first attempt did arrive: gone either way.
  } catch (const Unavailable&) {
    if (!resume_) throw;
    // Its server is gone, and the session with it (or freed by that server's TTL).
  }
  ended_ = true;
  return summary_;
}

}  // namespace l3p
