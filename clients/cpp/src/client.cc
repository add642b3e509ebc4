#include "l3p/client.h"

#include <algorithm>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>

namespace l3p {

namespace {

// Sent with Act and EndEpisode so a proxy can route a session's calls to the replica that holds
// it (the session id starts with the replica's id, see deploy/nginx).
constexpr char kSessionHeader[] = "l3p-session";

std::string read_file(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  if (!file) throw std::runtime_error("cannot read " + path);
  std::ostringstream text;
  text << file.rdbuf();
  return text.str();
}

std::shared_ptr<grpc::ChannelCredentials> credentials(const std::optional<Tls>& tls) {
  if (!tls) return grpc::InsecureChannelCredentials();
  if (tls->cert_file.empty() != tls->key_file.empty()) {
    throw std::invalid_argument("a client certificate needs its key, and a key its certificate");
  }
  grpc::SslCredentialsOptions ssl;
  if (!tls->ca_file.empty()) ssl.pem_root_certs = read_file(tls->ca_file);
  if (!tls->cert_file.empty()) {
    ssl.pem_cert_chain = read_file(tls->cert_file);
    ssl.pem_private_key = read_file(tls->key_file);
  }
  return grpc::SslCredentials(ssl);
}

grpc::ChannelArguments channel_arguments(const ClientOptions& options) {
  grpc::ChannelArguments args;
  args.SetUserAgentPrefix("l3p-cpp-client/1");
  // Reconnect quickly after a server restart (gRPC's default backoff grows to 120 s).
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 200);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 2000);
  if (options.keepalive.count() > 0) {
    args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, static_cast<int>(options.keepalive.count() * 1000));
    args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 20000);
    // Idle pings are what servers count as abuse; robots idle between episodes.
    args.SetInt(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 0);
  }
  if (options.tls && !options.tls->server_name.empty()) args.SetSslTargetNameOverride(options.tls->server_name);
  return args;
}

std::string seconds_text(Seconds s) {
  std::ostringstream text;
  text << s.count();
  return text.str();
}

}  // namespace

std::string read_token(const std::string& path) {
  std::istringstream lines(read_file(path));
  for (std::string line; std::getline(lines, line);) {
    const auto first = line.find_first_not_of(" \t\r");
    if (first == std::string::npos || line[first] == '#') continue;
    line = line.substr(first, line.find_last_not_of(" \t\r") + 1 - first);
    const auto colon = line.find(':');
    return colon == std::string::npos || colon + 1 == line.size() ? line : line.substr(colon + 1);
  }
  throw std::runtime_error(path + " holds no token");
}

Client::Client(ClientOptions options) : options_(std::move(options)), rng_(std::random_device{}()) {
  if (options_.timeout.count() <= 0) throw std::invalid_argument("timeout must be > 0");
  stub_ = v1::Planner::NewStub(
      grpc::CreateCustomChannel(options_.target, credentials(options_.tls), channel_arguments(options_)));
}

void Client::prepare(grpc::ClientContext& context, std::optional<Seconds> deadline,
                     const std::string& session_id) const {
  if (deadline) {
    context.set_deadline(std::chrono::system_clock::now() +
                         std::chrono::duration_cast<std::chrono::system_clock::duration>(*deadline));
  }
  if (!options_.token.empty()) context.AddMetadata("authorization", "Bearer " + options_.token);
  if (!session_id.empty()) context.AddMetadata(kSessionHeader, session_id);
}

Seconds Client::backoff(int retry) {
  std::lock_guard<std::mutex> lock(rng_mutex_);
  return options_.retry.backoff(retry, rng_);
}

template <typename Rpc>
void Client::call(const char* method, Rpc&& rpc, std::optional<Seconds> timeout, bool retry,
                  const std::string& session_id) {
  const Seconds wait = timeout.value_or(options_.timeout);
  const int attempts = retry ? std::max(1, options_.retry.max_attempts) : 1;
  for (int attempt = 1;; ++attempt) {
    grpc::ClientContext context;
    prepare(context, wait, session_id);
    const grpc::Status status = rpc(context);
    if (status.ok()) return;
    const grpc::StatusCode code = status.error_code();
    std::string message = status.error_message();
    if (code == grpc::StatusCode::DEADLINE_EXCEEDED) {  // say which deadline and where
      throw DeadlineExceeded(code, message + " (timeout " + seconds_text(wait) + " s, server " + options_.target + ")",
                             method);
    }
    if (!is_retried(code) || attempt == attempts) {
      if (attempt > 1) message += " (gave up after " + std::to_string(attempt) + " attempts)";
      throw_error(code, message, method);
    }
    std::this_thread::sleep_for(backoff(attempt));
  }
}

v1::ModelInfo Client::model_info(std::optional<Seconds> timeout) {
  v1::GetModelInfoRequest request;
  request.set_model(options_.model);
  v1::ModelInfo reply;
  call("GetModelInfo", [&](grpc::ClientContext& c) { return stub_->GetModelInfo(&c, request, &reply); }, timeout, true);
  return reply;
}

v1::StartEpisodeResponse Client::start_episode(const std::vector<float>& goal, const v1::EpisodeOptions& options,
                                               std::optional<Seconds> timeout, bool retry) {
  v1::StartEpisodeRequest request;
  request.mutable_goal()->Add(goal.begin(), goal.end());
  *request.mutable_options() = options;
  request.set_model(options_.model);
  v1::StartEpisodeResponse reply;
  call("StartEpisode", [&](grpc::ClientContext& c) { return stub_->StartEpisode(&c, request, &reply); }, timeout,
       retry);
  return reply;
}

Step Client::act(const std::string& session_id, const std::vector<float>& observation,
                 std::optional<Seconds> timeout) {
  v1::ActRequest request;
  request.set_session_id(session_id);
  request.mutable_observation()->Add(observation.begin(), observation.end());
  v1::ActResponse reply;
  const auto started = std::chrono::steady_clock::now();
  call("Act", [&](grpc::ClientContext& c) { return stub_->Act(&c, request, &reply); }, timeout, false, session_id);
  return Step::from(reply, std::chrono::steady_clock::now() - started);
}

EpisodeSummary Client::end_episode(const std::string& session_id, std::optional<Seconds> timeout, bool retry) {
  v1::EndEpisodeRequest request;
  request.set_session_id(session_id);
  v1::EndEpisodeResponse reply;
  call("EndEpisode", [&](grpc::ClientContext& c) { return stub_->EndEpisode(&c, request, &reply); }, timeout, retry,
       session_id);
  return {reply.steps(), reply.replans()};
}

}  // namespace l3p
