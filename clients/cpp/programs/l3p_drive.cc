// l3p_drive: drives a served model at a fixed rate with the control-loop helper, as a robot's
// loop would: each tick pushes the next observation of a recorded episode (round and round)
// and applies the command the loop gives, printing it. Ctrl-C stops it with a summary.
#include <algorithm>
#include <cctype>
#include <csignal>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <thread>

#include "args.h"
#include "l3p/control_loop.h"
#include "script.h"

namespace {

const char kUsage[] =
    "usage: l3p_drive --episode FILE [--rate HZ] [--seconds S] [--max-age S] [--on-fault hold|last]\n"
    "                 [--mode l3p|naive|policy] [--seed N] [--target HOST:PORT] [--model NAME] [--timeout S]\n"
    "                 [--tls-ca PEM [--tls-cert PEM --tls-key PEM] [--tls-server-name NAME]] [--token-file FILE]\n"
    "FILE: a line 'goal G...' then lines 'obs O...' (a recorded episode's observations).\n";

volatile std::sig_atomic_t stop = 0;

void print(const std::vector<float>& values) {
  for (const float v : values) std::cout << ' ' << v;
}

}  // namespace

int main(int argc, char** argv) try {
  const l3p_programs::Args args(argc, argv, {"episode", "rate", "seconds", "max-age", "on-fault", "mode", "seed"}, {},
                                kUsage);
  std::ifstream file(args.text("episode"));
  if (!file) throw std::invalid_argument("give a readable --episode FILE\n" + std::string(kUsage));
  std::vector<float> goal;
  std::vector<std::vector<float>> observations;
  while (const auto line = l3p_programs::read_line(file)) {
    if (line->word == "goal") goal = l3p_programs::floats(line->args);
    if (line->word == "obs") observations.push_back(l3p_programs::floats(line->args));
  }
  if (goal.empty() || observations.empty()) {
    throw std::invalid_argument("the episode file needs a goal line and obs lines");
  }

  l3p::Client client(args.client_options());
  const l3p::v1::ModelInfo info = client.model_info();
  std::cout << "model " << info.model() << " (" << info.env_id() << "): obs " << info.obs_dim() << ", goal "
            << info.goal_dim() << ", action " << info.action_dim() << ", " << info.n_landmarks() << " landmarks\n";

  l3p::LoopOptions options;
  options.goal = goal;
  options.hold.assign(info.action_dim(), 0.0f);  // no motion
  options.max_age = l3p::Seconds(args.number("max-age", 0.2));
  options.on_fault = args.text("on-fault", "hold") == "last" ? l3p::OnFault::kLastAction : l3p::OnFault::kHold;
  if (args.has("mode")) {
    std::string mode = "PLANNER_MODE_" + args.text("mode");
    std::transform(mode.begin(), mode.end(), mode.begin(), ::toupper);
    l3p::v1::PlannerMode value;
    if (!l3p::v1::PlannerMode_Parse(mode, &value)) throw std::invalid_argument("unknown --mode " + args.text("mode"));
    options.episode.set_mode(value);
  }
  if (args.has("seed")) options.episode.set_seed(std::stoull(args.text("seed")));

  std::signal(SIGINT, [](int) { stop = 1; });
  std::signal(SIGTERM, [](int) { stop = 1; });
  const auto period = std::chrono::duration_cast<std::chrono::steady_clock::duration>(
      l3p::Seconds(1.0 / args.number("rate", 50.0)));
  const long ticks = static_cast<long>(args.number("seconds", 10.0) * args.number("rate", 50.0));
  long actions = 0, t = 0;
  l3p::ControlLoop loop(client, options);
  auto tick = std::chrono::steady_clock::now();
  for (; t < ticks && !stop; ++t, tick += period) {
    std::this_thread::sleep_until(tick);
    loop.push(observations[t % observations.size()]);
    const l3p::Command command = loop.command();  // the robot applies command.action here
    std::cout << "tick " << t;
    if (command.hold) {
      std::cout << " hold " << command.reason;
    } else {
      ++actions;
      std::cout << " act step " << command.step.step << " subgoal " << command.step.subgoal_index << " replanned "
                << command.step.replanned << " age " << std::fixed << std::setprecision(1)
                << command.age.count() * 1000 << " ms action" << std::defaultfloat << std::setprecision(6);
      print(command.action);
    }
    std::cout << std::endl;
  }
  const l3p::LoopStats stats = loop.stats();
  std::cout << "summary ticks=" << t << " actions=" << actions << " holds=" << t - actions
            << " observations=" << stats.observations << " dropped=" << stats.dropped << " faults=" << stats.faults
            << " reconnects=" << stats.reconnects << std::endl;
  return 0;
} catch (const std::exception& error) {
  std::cerr << "l3p_drive: " << error.what() << '\n';
  return 1;
}
