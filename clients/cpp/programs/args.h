// The programs' command lines: --name value options, and the connection options both share.
#pragma once

#include <cstdlib>
#include <iostream>
#include <map>
#include <set>
#include <string>

#include "l3p/client.h"

namespace l3p_programs {

// --target, --model, --timeout and the TLS and token options: the connection, as `l3p run` takes it.
inline const std::set<std::string> kConnection = {"target", "model", "timeout", "tls-ca", "tls-cert",
                                                  "tls-key", "tls-server-name", "token-file"};

class Args {
 public:
  // Exits with `usage` on an option not in `names` (or `flags`, which take no value) or --help.
  Args(int argc, char** argv, std::set<std::string> names, const std::set<std::string>& flags, const char* usage) {
    names.insert(kConnection.begin(), kConnection.end());
    for (int i = 1; i < argc; ++i) {
      const std::string arg = argv[i];
      const std::string name = arg.rfind("--", 0) == 0 ? arg.substr(2) : "";
      if (flags.count(name)) {
        values_[name] = "1";
      } else if (names.count(name) && i + 1 < argc) {
        values_[name] = argv[++i];
      } else if (name == "help") {
        std::cout << usage;
        std::exit(0);
      } else {
        std::cerr << "unknown or incomplete option " << arg << '\n' << usage;
        std::exit(2);
      }
    }
  }

  bool has(const std::string& name) const { return values_.count(name) > 0; }
  std::string text(const std::string& name, const std::string& fallback = "") const {
    return has(name) ? values_.at(name) : fallback;
  }
  double number(const std::string& name, double fallback) const {
    return has(name) ? std::stod(values_.at(name)) : fallback;
  }

  l3p::ClientOptions client_options() const {
    l3p::ClientOptions options;
    options.target = text("target", "127.0.0.1:50051");
    options.model = text("model");
    options.timeout = l3p::Seconds(number("timeout", 5.0));
    if (has("tls-ca") || has("tls-cert") || has("tls-key")) {
      options.tls = l3p::Tls{text("tls-ca"), text("tls-cert"), text("tls-key"), text("tls-server-name")};
    }
    if (has("token-file")) options.token = l3p::read_token(text("token-file"));
    return options;
  }

 private:
  std::map<std::string, std::string> values_;
};

}  // namespace l3p_programs
