// Where the training text comes from: --data FILE, or the seeds' tiny-Shakespeare file, which is
// downloaded from its public address (and checked against its known sha256) when absent.
#pragma once

#include <string>

namespace folio {

inline constexpr const char* kTinyShakespeareUrl =
    "https://raw.githubusercontent.com/karpathy/char-rnn/master/data/tinyshakespeare/input.txt";
inline constexpr const char* kTinyShakespeareSha256 =
    "86c4e6aa9db7c042ec79f339dcb96d42b0075e16b8fc2e86bf0ca57e2dc565ed";
inline constexpr const char* kTinyShakespearePath = "data/tinyshakespeare/input.txt";

// `configured` (the data key) when set; else the default path, fetched with curl if missing.
std::string resolve_data_path(const std::string& configured);

// Downloads `url` to `path` with curl (through `path`.download, renamed once its sha256 is
// `sha256`). Failing, it removes the partial file and throws an Error that says why, then
// `instead` (what the user can do without the network).
void download_checked(const std::string& url, const std::string& sha256, const std::string& path,
                      const std::string& instead);

}  // namespace folio
