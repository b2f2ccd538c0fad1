// One error type for everything a user can get wrong (bad file, bad flag, bad checkpoint).
// The message is a single line that names the problem and, where there is one, the fix;
// main() prints it once as "folio: error: <message>" and exits non-zero.
#pragma once

#include <stdexcept>
#include <string>

namespace folio {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
};

// A user error whose natural exit code is 2 (command-line usage), as with getopt tools.
class UsageError : public Error {
 public:
  explicit UsageError(const std::string& message) : Error(message) {}
};

}  // namespace folio
