// One planner step as a robot uses it: the action to apply and why it was chosen.
#pragma once

#include <vector>

#include "l3p/retry.h"
#include "l3p_planner.pb.h"

namespace l3p {

struct Step {
  std::vector<float> action;   // [action_dim], within the model's action bounds
  std::vector<float> subgoal;  // [goal_dim]: the goal pursued this step (a landmark or the final goal)
  int subgoal_index = -1;      // landmark index, or -1 for the final goal
  bool replanned = false;      // this step ran the graph search
  int counter = 0;             // steps left before the next re-plan
  int step = 0;                // 0-based step index within the episode (the server's count)
  float estimated_distance = 0;  // D(obs, subgoal) in steps when re-planned, else 0
  Seconds latency{0};          // round trip measured by this client
  bool resumed = false;        // answered by a new session after the episode's server was lost

  static Step from(const v1::ActResponse& response, Seconds latency);
};

struct EpisodeSummary {
  int steps = 0;
  int replans = 0;
};

}  // namespace l3p
