#include "plot/run_metrics.h"

#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "core/error.h"

namespace folio {

namespace {

std::string run_label(const std::filesystem::path& run) {
  std::filesystem::path folder = run.extension() == ".jsonl" ? run.parent_path() : run;
  if (folder.filename().empty()) folder = folder.parent_path();  // "out/baby/"
  const std::string name = std::filesystem::absolute(folder).lexically_normal().filename();
  return name.empty() ? run.string() : name;
}

void add_point(std::vector<Point>& series, const nlohmann::json& record, const char* field) {
  const auto value = record.find(field);
  if (value != record.end() && value->is_number())
    series.push_back({record.at("step").get<double>(), value->get<double>()});
}

}  // namespace

RunMetrics read_run_metrics(const std::string& run) {
  const std::filesystem::path run_path(run);
  const std::filesystem::path file =
      run_path.extension() == ".jsonl" ? run_path : run_path / "metrics.jsonl";
  std::ifstream in(file);
  if (!in)
    throw Error(file.string() + " does not exist or cannot be read: pass the out_dir of a " +
                "`folio train` run");
  RunMetrics metrics;
  metrics.label = run_label(run_path);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  for (size_t i = 0; i < lines.size(); ++i) {
    const nlohmann::json record = nlohmann::json::parse(lines[i], nullptr, false);
    const bool is_record = record.is_object() && record.contains("step") &&
                           record["step"].is_number() && record.contains("type");
    if (!is_record) {
      if (i + 1 == lines.size()) break;  // cut short while being written
      throw Error(file.string() + ":" + std::to_string(i + 1) +
                  ": not a metrics record (a JSON object with type and step)");
    }
    if (record["type"] == "train") {
      add_point(metrics.train_loss, record, "loss");
      add_point(metrics.tokens_per_second, record, "tokens_per_s");
    } else if (record["type"] == "eval") {
      add_point(metrics.eval_train_loss, record, "train_loss");
      add_point(metrics.val_loss, record, "val_loss");
    }
  }
  if (metrics.train_loss.empty() && metrics.val_loss.empty() && metrics.eval_train_loss.empty())
    throw Error(file.string() + " holds no training or evaluation records yet");
  return metrics;
}

}  // namespace folio
