// metrics.jsonl and metrics.csv: the same records, the CSV one table with empty cells.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "io/metrics_log.h"
#include "test_helpers.h"

namespace folio {
namespace {

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

const nlohmann::json kTrainRecord = {
    {"type", "train"}, {"step", 10},   {"loss", 2.5},          {"lr", 0.001},
    {"ms_per_step", 12.5}, {"tokens_per_s", 61440.0}, {"time_s", 0.75}, {"tokens", 7680}};
const nlohmann::json kEvalRecord = {{"type", "eval"},     {"step", 250},   {"train_loss", 1.75},
                                    {"val_loss", 1.875}, {"time_s", 3.5}, {"tokens", 192000}};

constexpr const char* kHeader =
    "type,step,tokens,time_s,loss,lr,ms_per_step,tokens_per_s,mfu,train_loss,val_loss\n";

TEST(MetricsLog, WritesTheSameRecordsAsJsonLinesAndOneCsvTable) {
  testing::TempDir dir;
  {
    MetricsLog log(dir.file("metrics.jsonl"), false);
    EXPECT_EQ(log.csv_path(), dir.file("metrics.csv"));
    log.write(kTrainRecord);
    log.write(kEvalRecord);
  }
  EXPECT_EQ(read_file(dir.file("metrics.jsonl")),
            kTrainRecord.dump() + "\n" + kEvalRecord.dump() + "\n");
  EXPECT_EQ(read_file(dir.file("metrics.csv")),
            std::string(kHeader) +
                "train,10,7680,0.75,2.5,0.001,12.5,61440,,,\n"
                "eval,250,192000,3.5,,,,,,1.75,1.875\n");
}

TEST(MetricsLog, AResumedRunRebuildsTheCsvFromTheJsonLines) {
  testing::TempDir dir;
  {
    MetricsLog log(dir.file("metrics.jsonl"), false);
    log.write(kTrainRecord);
  }
  // The trainer cuts metrics.jsonl back to the resumed step (and a crash may cut a line short);
  // the CSV follows whatever metrics.jsonl holds.
  std::ofstream(dir.file("metrics.jsonl"), std::ios::app) << "{\"type\": \"tra";
  std::ofstream(dir.file("metrics.csv"), std::ios::app) << "stale,row\n";
  {
    MetricsLog log(dir.file("metrics.jsonl"), true);
    log.write(kEvalRecord);
  }
  EXPECT_EQ(read_file(dir.file("metrics.csv")),
            std::string(kHeader) +
                "train,10,7680,0.75,2.5,0.001,12.5,61440,,,\n"
                "eval,250,192000,3.5,,,,,,1.75,1.875\n");
}

TEST(MetricsLog, CellsWithCommasOrQuotesAreQuoted) {
  const nlohmann::json record = {{"type", "say \"hi\", twice"}, {"step", 1}};
  EXPECT_EQ(metrics_csv_row(record), "\"say \"\"hi\"\", twice\",1,,,,,,,,,");
}

TEST(MetricsLog, AFieldWithoutAColumnIsAnErrorBeforeAnythingIsWritten) {
  testing::TempDir dir;
  MetricsLog log(dir.file("metrics.jsonl"), false);
  const std::string message =
      testing::error_message([&] { log.write({{"type", "train"}, {"grad_norm", 1.0}}); });
  EXPECT_NE(message.find("metrics field 'grad_norm' has no metrics.csv column"),
            std::string::npos)
      << message;
  EXPECT_EQ(read_file(dir.file("metrics.jsonl")), "");
}

TEST(MetricsLog, AnUnwritableFolderNamesTheFile) {
  const std::string message =
      testing::error_message([] { MetricsLog("/nonexistent/folder/metrics.jsonl", false); });
  EXPECT_NE(message.find("cannot write /nonexistent/folder/metrics.jsonl"), std::string::npos);
}

}  // namespace
}  // namespace folio
