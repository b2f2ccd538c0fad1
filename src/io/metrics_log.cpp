#include "io/metrics_log.h"

#include "core/error.h"

namespace folio {

MetricsLog::MetricsLog(const std::string& path, bool append)
    : path_(path), file_(path, append ? std::ios::app : std::ios::trunc) {
  if (!file_) throw Error("cannot write " + path + ": is out_dir writable?");
}

void MetricsLog::write(const nlohmann::json& record) {
  if (!file_.is_open()) return;
  file_ << record.dump() << '\n';
  file_.flush();
  if (!file_) throw Error("cannot write " + path_ + ": is the disk full?");
}

}  // namespace folio
