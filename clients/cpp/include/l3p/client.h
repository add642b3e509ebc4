// A connection to one planner server: the channel (plaintext on loopback, or TLS with a bearer
// token), a deadline on every call, and the unary calls of the protocol (protos/l3p_planner.proto).
// Episodes build on it: Episode (unary calls), StreamEpisode (one Control stream), ControlLoop.
#pragma once

#include <grpcpp/grpcpp.h>

#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "l3p/errors.h"
#include "l3p/retry.h"
#include "l3p/step.h"
#include "l3p_planner.grpc.pb.h"

namespace l3p {

// TLS: trust ca_file (PEM; the system's roots when empty) and, for mutual TLS, present cert_file
// with key_file.
struct Tls {
  std::string ca_file;
  std::string cert_file;
  std::string key_file;
  std::string server_name;  // the name to check the certificate against, when the target is not one it names
};

struct ClientOptions {
  std::string target;  // host:port
  // The deadline of every call that gives none (gRPC's default is none: a dead server would block
  // the robot forever).
  Seconds timeout{5.0};
  std::optional<Tls> tls;  // plaintext when unset: the server's only default is loopback without TLS
  std::string token;       // bearer token sent with every call (l3p serve --auth-token-file)
  std::string model;       // the served model this client's calls use; "": the server's default model
  RetryPolicy retry;       // for calls that may be repeated; max_attempts = 1: never retried
  // HTTP/2 keepalive ping interval, 0 for none. Servers answer pings more frequent than they
  // permit (l3p serve: one per 10 s) by closing the connection, so keep it >= 60 s.
  Seconds keepalive{60.0};
};

// The bearer token in a file: its first line that is not blank or a '#' comment, as "token" or
// "name:token" (the server's token-file format).
std::string read_token(const std::string& path);

// Thread-safe: calls and episodes may run from several threads on one client.
class Client {
 public:
  explicit Client(ClientOptions options);

  const ClientOptions& options() const { return options_; }

  // Env id, dims, landmark count, bundle hash and planner defaults. Retried.
  v1::ModelInfo model_info(std::optional<Seconds> timeout = {});
  // Opens a session (low level; prefer Episode). Retried: a first attempt that did reach the
  // server leaves at most one orphan session, which the server's idle TTL frees.
  v1::StartEpisodeResponse start_episode(const std::vector<float>& goal, const v1::EpisodeOptions& options = {},
                                         std::optional<Seconds> timeout = {}, bool retry = true);
  // One observation in, one action out (low level). Never retried: an Act that reached the
  // server before the connection broke has already advanced the episode's planner.
  Step act(const std::string& session_id, const std::vector<float>& observation,
           std::optional<Seconds> timeout = {});
  // Frees a session. Retried: ending twice is harmless (the second answers NOT_FOUND).
  EpisodeSummary end_episode(const std::string& session_id, std::optional<Seconds> timeout = {},
                             bool retry = true);

  // For streams: the stub, a context with this client's metadata and an optional deadline, and
  // the wait before retry `retry` under this client's policy.
  v1::Planner::Stub& stub() { return *stub_; }
  void prepare(grpc::ClientContext& context, std::optional<Seconds> deadline,
               const std::string& session_id = "") const;
  Seconds backoff(int retry);

 private:
  template <typename Rpc>
  void call(const char* method, Rpc&& rpc, std::optional<Seconds> timeout, bool retry,
            const std::string& session_id = "");

  ClientOptions options_;
  std::unique_ptr<v1::Planner::Stub> stub_;  // holds the channel
  std::mutex rng_mutex_;
  std::mt19937 rng_;
};

}  // namespace l3p
