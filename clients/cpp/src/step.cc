#include "l3p/step.h"

namespace l3p {

Step Step::from(const v1::ActResponse& response, Seconds latency) {
  Step step;
  step.action.assign(response.action().begin(), response.action().end());
  step.subgoal.assign(response.subgoal().begin(), response.subgoal().end());
  step.subgoal_index = response.subgoal_index();
  step.replanned = response.replanned();
  step.counter = response.counter();
  step.step = response.step();
  step.estimated_distance = response.estimated_distance();
  step.latency = latency;
  return step;
}

}  // namespace l3p
