// The run's records, written as they happen and flushed line by line, so that a run that dies
// keeps every record up to its last line:
//
//   out_dir/metrics.jsonl  one JSON object per line (the source of truth; `folio plot` reads it)
//   out_dir/metrics.csv    the same records as one table for spreadsheets: a header, then a row
//                          per record, a column per field (metrics_csv_columns()); a field a
//                          record does not have is an empty cell (an eval row has no lr, a train
//                          row no val_loss). Sort or filter on `type` to split the two.
#pragma once

#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace folio {

class MetricsLog {
 public:
  MetricsLog() = default;
  // Starts both files afresh, or with `append` (a resumed run) continues metrics.jsonl and
  // rewrites metrics.csv from the records it already holds, so the two always agree.
  // `jsonl_path` names metrics.jsonl; the CSV is the same path with the extension .csv.
  MetricsLog(const std::string& jsonl_path, bool append);
  // A field without a CSV column is an error (add the column): a table must not drop data.
  void write(const nlohmann::json& record);
  const std::string& path() const { return jsonl_path_; }
  const std::string& csv_path() const { return csv_path_; }

 private:
  std::string jsonl_path_, csv_path_;
  std::ofstream jsonl_, csv_;
};

// The CSV's columns, in order: type, step, tokens, time_s, then the training fields (loss, lr,
// ms_per_step, tokens_per_s, mfu), then the evaluation fields (train_loss, val_loss).
const std::vector<std::string>& metrics_csv_columns();

// One CSV row of `record` (no newline), cells in metrics_csv_columns() order.
std::string metrics_csv_row(const nlohmann::json& record);

}  // namespace folio
