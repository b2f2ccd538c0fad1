// out_dir/metrics.jsonl: one JSON object per line, flushed as it is written, so a run that dies
// keeps every record up to its last line.
#pragma once

#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

namespace folio {

class MetricsLog {
 public:
  MetricsLog() = default;
  // Truncates the file unless `append` (a resumed run continues its log).
  MetricsLog(const std::string& path, bool append);
  void write(const nlohmann::json& record);
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  std::ofstream file_;
};

}  // namespace folio
