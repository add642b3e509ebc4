// The programs' input: lines of a word and numbers, e.g. an episode file
//     goal 1.30 0.70 0.42
//     obs 1.25 0.69 0.42 ...
// Numbers are read with strtof, so a float32 written with enough digits (9, or Python's repr of
// it) is read back bit for bit; "nan" and "inf" are numbers too.
#pragma once

#include <cstdlib>
#include <istream>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace l3p_programs {

struct Line {
  std::string word;
  std::vector<std::string> args;
};

// The next line that is not blank or a '#' comment.
inline std::optional<Line> read_line(std::istream& in) {
  for (std::string text; std::getline(in, text);) {
    std::istringstream words(text);
    Line line;
    if (!(words >> line.word) || line.word[0] == '#') continue;
    for (std::string word; words >> word;) line.args.push_back(word);
    return line;
  }
  return std::nullopt;
}

inline std::vector<float> floats(const std::vector<std::string>& words, std::size_t from = 0) {
  std::vector<float> values;
  for (std::size_t i = from; i < words.size(); ++i) {
    char* end = nullptr;
    values.push_back(std::strtof(words[i].c_str(), &end));
    if (*end != '\0') throw std::invalid_argument("not a number: " + words[i]);
  }
  return values;
}

}  // namespace l3p_programs
