// Errors carry their context (file:line, section, key, utterance) in the message; the CLI catches
// them once, prints one line and exits with code 1. Nothing in the library calls exit().
#pragma once

#include <stdexcept>
#include <string>

namespace nabu {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
};

// A problem in a configuration file (INI syntax, a missing or malformed value).
class ConfigError : public Error {
 public:
  using Error::Error;
};

// A problem with data: audio, list files, HDF5 stores.
class DataError : public Error {
 public:
  using Error::Error;
};

}  // namespace nabu
