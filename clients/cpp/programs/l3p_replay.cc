// l3p_replay: replays a script of goals and observations through the C++ client and writes what
// the server answered, one JSON line per command, floats as their float32 bit patterns (hex): the
// tests compare them with the Python client's bit for bit, and benchmarks/cpp_client.py times it.
#include <chrono>
#include <cstdint>
#include <cstring>
#include <iostream>
#include <memory>
#include <optional>
#include <sstream>

#include "args.h"
#include "l3p/control_stream.h"
#include "l3p/episode.h"
#include "l3p/stream_episode.h"
#include "script.h"

namespace {

const char kUsage[] =
    "usage: l3p_replay [--target HOST:PORT] [--model NAME] [--timeout S] [--unary] [--resume]\n"
    "                  [--tls-ca PEM [--tls-cert PEM --tls-key PEM] [--tls-server-name NAME]] [--token-file FILE]\n"
    "Reads commands on stdin, one a line, and writes a JSON line for each on stdout:\n"
    "  info               the served model: env id, dims, landmarks, bundle digest\n"
    "  goal G...          starts an episode (a Control stream; unary calls with --unary), which\n"
    "                     carries on in a new session when its server is lost with --resume\n"
    "  obs O...           one step of it: action, subgoal, ..., and the client's latency\n"
    "  end                ends it\n"
    "  act SESSION O...   a unary Act on the session named\n"
    "  stream-obs O...    a new Control stream whose first message is an observation\n"
    "A failed command writes {\"error\": TYPE, \"code\": CODE, \"message\": ...}; the script goes on.\n";

std::string quoted(const std::string& text) {
  std::ostringstream out;
  out << '"';
  for (const unsigned char c : text) {
    if (c == '"' || c == '\\') {
      out << '\\' << c;
    } else if (c < 0x20) {
      char escaped[8];
      std::snprintf(escaped, sizeof escaped, "\\u%04x", c);
      out << escaped;
    } else {
      out << c;
    }
  }
  out << '"';
  return out.str();
}

std::string bits(float value) {
  std::uint32_t word;
  std::memcpy(&word, &value, sizeof word);
  char hex[9];
  std::snprintf(hex, sizeof hex, "%08x", word);
  return std::string("\"") + hex + '"';
}

std::string bits(const std::vector<float>& values) {
  std::string out = "[";
  for (std::size_t i = 0; i < values.size(); ++i) out += (i ? "," : "") + bits(values[i]);
  return out + "]";
}

// The typed error's name, as the Python client's classes are named.
const char* kind(const l3p::PlannerError& error) {
  if (dynamic_cast<const l3p::InvalidArgument*>(&error)) return "InvalidArgument";
  if (dynamic_cast<const l3p::NotFound*>(&error)) return "NotFound";
  if (dynamic_cast<const l3p::FailedPrecondition*>(&error)) return "FailedPrecondition";
  if (dynamic_cast<const l3p::ResourceExhausted*>(&error)) return "ResourceExhausted";
  if (dynamic_cast<const l3p::Unavailable*>(&error)) return "Unavailable";
  if (dynamic_cast<const l3p::DeadlineExceeded*>(&error)) return "DeadlineExceeded";
  if (dynamic_cast<const l3p::Unauthenticated*>(&error)) return "Unauthenticated";
  return "PlannerError";
}

std::string step_json(const l3p::Step& step, std::chrono::steady_clock::duration took) {
  std::ostringstream out;
  out << "{\"action\":" << bits(step.action) << ",\"subgoal\":" << bits(step.subgoal)
      << ",\"subgoal_index\":" << step.subgoal_index << ",\"replanned\":" << (step.replanned ? "true" : "false")
      << ",\"counter\":" << step.counter << ",\"step\":" << step.step
      << ",\"estimated_distance\":" << bits(step.estimated_distance)
      << ",\"resumed\":" << (step.resumed ? "true" : "false")
      << ",\"latency_us\":" << std::chrono::duration<double, std::micro>(took).count() << "}";
  return out.str();
}

class Replay {
 public:
  Replay(l3p::Client& client, bool unary, bool resume) : client_(client), unary_(unary), resume_(resume) {}

  std::string run(const l3p_programs::Line& line) {
    const auto& w = line.word;
    if (w == "info") return info();
    if (w == "goal") return start(l3p_programs::floats(line.args));
    if (w == "obs") return act(l3p_programs::floats(line.args));
    if (w == "end") return end();
    if (w == "act" && !line.args.empty()) return act_on(line.args[0], l3p_programs::floats(line.args, 1));
    if (w == "stream-obs") return observation_first(l3p_programs::floats(line.args));
    throw std::invalid_argument("unknown command: " + w);
  }

 private:
  std::string info() {
    const l3p::v1::ModelInfo info = client_.model_info();
    std::ostringstream out;
    out << "{\"env_id\":" << quoted(info.env_id()) << ",\"model\":" << quoted(info.model())
        << ",\"obs_dim\":" << info.obs_dim() << ",\"goal_dim\":" << info.goal_dim()
        << ",\"action_dim\":" << info.action_dim() << ",\"n_landmarks\":" << info.n_landmarks()
        << ",\"bundle_sha256\":" << quoted(info.bundle_sha256()) << "}";
    return out.str();
  }

  std::string start(const std::vector<float>& goal) {
    end();
    if (unary_) {
      unary_episode_ = std::make_unique<l3p::Episode>(client_, goal, l3p::v1::EpisodeOptions(), resume_);
      return started(unary_episode_->session_id(), unary_episode_->landmark_to_goal());
    }
    l3p::StreamOptions stream;
    stream.resume = resume_;
    stream_episode_ = std::make_unique<l3p::StreamEpisode>(client_, goal, l3p::v1::EpisodeOptions(), stream);
    return started(stream_episode_->session_id(), stream_episode_->landmark_to_goal());
  }

  static std::string started(const std::string& session_id, const std::vector<float>& landmark_to_goal) {
    return "{\"session_id\":" + quoted(session_id) + ",\"landmark_to_goal\":" + bits(landmark_to_goal) + "}";
  }

  std::string act(const std::vector<float>& observation) {
    if (!unary_episode_ && !stream_episode_) throw std::logic_error("obs before any goal");
    const auto started = std::chrono::steady_clock::now();
    const l3p::Step step = unary_episode_ ? unary_episode_->act(observation) : stream_episode_->act(observation);
    return step_json(step, std::chrono::steady_clock::now() - started);
  }

  std::string end() {
    std::optional<l3p::EpisodeSummary> summary;  // none from a unary session the server forgot
    if (unary_episode_) summary = unary_episode_->end();
    if (stream_episode_) summary = stream_episode_->end();
    unary_episode_.reset();
    stream_episode_.reset();
    if (!summary) return "{\"ended\":true}";
    return "{\"ended\":true,\"steps\":" + std::to_string(summary->steps) +
           ",\"replans\":" + std::to_string(summary->replans) + "}";
  }

  std::string act_on(const std::string& session_id, const std::vector<float>& observation) {
    const auto started = std::chrono::steady_clock::now();
    const l3p::Step step = client_.act(session_id, observation);
    return step_json(step, std::chrono::steady_clock::now() - started);
  }

  std::string observation_first(const std::vector<float>& observation) {
    l3p::ControlStream stream(client_, std::nullopt);
    l3p::v1::ControlRequest request;
    request.mutable_observation()->mutable_observation()->Add(observation.begin(), observation.end());
    const auto started = std::chrono::steady_clock::now();
    const auto reply = stream.exchange(request, l3p::v1::ControlResponse::kAction, client_.options().timeout);
    return step_json(l3p::Step::from(reply.action(), {}), std::chrono::steady_clock::now() - started);
  }

  l3p::Client& client_;
  const bool unary_;
  const bool resume_;
  std::unique_ptr<l3p::Episode> unary_episode_;
  std::unique_ptr<l3p::StreamEpisode> stream_episode_;
};

}  // namespace

int main(int argc, char** argv) try {
  const l3p_programs::Args args(argc, argv, {}, {"unary", "resume"}, kUsage);
  l3p::Client client(args.client_options());
  Replay replay(client, args.has("unary"), args.has("resume"));
  while (const auto line = l3p_programs::read_line(std::cin)) {
    try {
      std::cout << replay.run(*line) << '\n';
    } catch (const l3p::PlannerError& error) {
      std::cout << "{\"error\":" << quoted(kind(error)) << ",\"code\":" << quoted(l3p::code_name(error.code()))
                << ",\"message\":" << quoted(error.message()) << "}\n";
    }
    std::cout.flush();
  }
  return 0;
} catch (const std::exception& error) {  // a script or connection option that cannot work
  std::cerr << "l3p_replay: " << error.what() << '\n';
  return 2;
}
