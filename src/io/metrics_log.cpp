#include "io/metrics_log.h"

#include <algorithm>
#include <filesystem>

#include "core/error.h"
#include "core/text_format.h"

namespace folio {

namespace {

// RFC 4180: a cell with a comma, quote or line break is quoted, its quotes doubled.
std::string csv_cell(const std::string& text) {
  if (text.find_first_of(",\"\r\n") == std::string::npos) return text;
  std::string quoted = "\"";
  for (char c : text) quoted += c == '"' ? std::string("\"\"") : std::string(1, c);
  return quoted + "\"";
}

std::string cell_text(const nlohmann::json& value) {
  if (value.is_null()) return "";
  if (value.is_string()) return value.get<std::string>();
  if (value.is_boolean()) return value.get<bool>() ? "true" : "false";
  if (value.is_number_unsigned()) return std::to_string(value.get<uint64_t>());
  if (value.is_number_integer()) return std::to_string(value.get<int64_t>());
  if (value.is_number_float()) return shortest_double(value.get<double>());
  return value.dump();
}

std::string csv_header() {
  std::string header;
  for (const std::string& column : metrics_csv_columns())
    header += (header.empty() ? "" : ",") + column;
  return header;
}

void check_written(const std::ofstream& file, const std::string& path) {
  if (!file) throw Error("cannot write " + path + ": is the disk full?");
}

}  // namespace

const std::vector<std::string>& metrics_csv_columns() {
  static const std::vector<std::string> columns = {
      "type", "step", "tokens", "time_s",                         // every record
      "loss", "lr", "ms_per_step", "tokens_per_s", "mfu",         // training
      "train_loss", "val_loss"};                                  // evaluation
  return columns;
}

std::string metrics_csv_row(const nlohmann::json& record) {
  const std::vector<std::string>& columns = metrics_csv_columns();
  for (const auto& [field, value] : record.items()) {
    if (std::find(columns.begin(), columns.end(), field) == columns.end())
      throw Error("metrics field '" + field +
                  "' has no metrics.csv column: add it to metrics_csv_columns() in "
                  "io/metrics_log.cpp");
  }
  std::string row;
  for (size_t i = 0; i < columns.size(); ++i) {
    if (i > 0) row += ',';
    if (record.contains(columns[i])) row += csv_cell(cell_text(record[columns[i]]));
  }
  return row;
}

MetricsLog::MetricsLog(const std::string& jsonl_path, bool append)
    : jsonl_path_(jsonl_path),
      csv_path_(std::filesystem::path(jsonl_path).replace_extension(".csv").string()) {
  std::vector<nlohmann::json> earlier;
  if (append) {
    std::ifstream existing(jsonl_path_);
    std::string line;
    while (std::getline(existing, line)) {
      // A last line cut short by a crash is no record.
      nlohmann::json record = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
      if (record.is_object()) earlier.push_back(std::move(record));
    }
  }
  jsonl_.open(jsonl_path_, append ? std::ios::app : std::ios::trunc);
  if (!jsonl_) throw Error("cannot write " + jsonl_path_ + ": is out_dir writable?");
  csv_.open(csv_path_, std::ios::trunc);
  if (!csv_) throw Error("cannot write " + csv_path_ + ": is out_dir writable?");
  csv_ << csv_header() << '\n';
  for (const nlohmann::json& record : earlier) csv_ << metrics_csv_row(record) << '\n';
  csv_.flush();
  check_written(csv_, csv_path_);
}

void MetricsLog::write(const nlohmann::json& record) {
  if (!jsonl_.is_open()) return;
  const std::string row = metrics_csv_row(record);  // checks the fields before writing either
  jsonl_ << record.dump() << '\n';
  jsonl_.flush();
  check_written(jsonl_, jsonl_path_);
  csv_ << row << '\n';
  csv_.flush();
  check_written(csv_, csv_path_);
}

}  // namespace folio
