#include "data/fetch.h"

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/sha256.h"
#include "core/signal_thread.h"

namespace folio {

std::string resolve_data_path(const std::string& configured) {
  if (!configured.empty()) return configured;
  const std::string path = kTinyShakespearePath;
  if (std::filesystem::exists(path)) return path;

  std::fprintf(stderr, "folio: fetching tiny-Shakespeare from %s\n", kTinyShakespeareUrl);
  download_checked(kTinyShakespeareUrl, kTinyShakespeareSha256, path,
                   "no training text: " + path + " is absent; download it yourself from " +
                       kTinyShakespeareUrl + " or pass --data FILE (any UTF-8 text)");
  return path;
}

void download_checked(const std::string& url, const std::string& sha256, const std::string& path,
                      const std::string& instead) {
  // The folders this fetch creates, outermost first: a failed fetch removes them again.
  std::vector<std::filesystem::path> created;
  for (std::filesystem::path folder = std::filesystem::path(path).parent_path();
       !folder.empty() && !std::filesystem::exists(folder); folder = folder.parent_path())
    created.insert(created.begin(), folder);
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  const std::string partial = path + ".download";
  const std::string command =
      "curl -fsSL --max-time 120 -o '" + partial + "' '" + url + "' 2>/dev/null";
  const int status = run_shell_command(command);
  const auto failed = [&](const std::string& why) {
    std::error_code ignored;
    std::filesystem::remove(partial, ignored);
    for (auto folder = created.rbegin(); folder != created.rend(); ++folder)
      std::filesystem::remove(*folder, ignored);  // only if still empty
    return Error(why + ": " + instead);
  };
  if (status != 0)
    throw failed("fetching " + url + " failed (no network, or curl missing)");
  const std::string digest = sha256_file_hex(partial);
  if (digest != sha256)
    throw failed("the file downloaded from " + url + " has sha256 " + digest +
                 ", not the expected " + sha256);
  std::filesystem::rename(partial, path);
}

}  // namespace folio
