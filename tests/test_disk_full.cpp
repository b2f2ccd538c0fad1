// A disk that fills up in the middle of a checkpoint save. This executable is linked with the
// fault-injection shim (fault_injection/disk_full.cpp), which takes the place of write, fsync
// and close for everything in it; the environment variables set here tell it which file fails
// and when. After every failure the previous checkpoint must be there, unchanged and loadable,
// with no temporary file left beside it, and the error must name the file and the full disk.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>

#include "data/token_shards.h"
#include "io/checkpoint.h"
#include "io/safetensors.h"
#include "model/gpt.h"
#include "safetensors_bytes.h"
#include "test_helpers.h"

namespace folio {
namespace {

using testing::error_message;
using testing::read_all;
using testing::TempDir;

// Sets the shim's variables for one scope: files whose path contains `path_part` fail.
class FullDisk {
 public:
  FullDisk(const std::string& path_part, long long bytes_that_fit, bool fsync_fails = false) {
    ::setenv("FOLIO_DISK_FULL_PATH", path_part.c_str(), 1);
    ::setenv("FOLIO_DISK_FULL_AFTER", std::to_string(bytes_that_fit).c_str(), 1);
    if (fsync_fails) ::setenv("FOLIO_DISK_FULL_FSYNC", "1", 1);
  }
  ~FullDisk() {
    ::unsetenv("FOLIO_DISK_FULL_PATH");
    ::unsetenv("FOLIO_DISK_FULL_AFTER");
    ::unsetenv("FOLIO_DISK_FULL_FSYNC");
  }
};

std::vector<std::string> folder_entries(const TempDir& dir) {
  std::vector<std::string> names;
  for (const auto& entry : std::filesystem::directory_iterator(dir.file("")))
    names.push_back(entry.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

void write_tensor(const std::string& path, const std::vector<float>& values) {
  write_safetensors(path, {{"w", {static_cast<int64_t>(values.size())}, values.data()}}, {});
}

TEST(DiskFull, AFailedWriteKeepsThePreviousFile) {
  TempDir dir;
  const std::string path = dir.file("ckpt.safetensors");
  const std::vector<float> old_values(1000, 1.0f), new_values(5000, 2.0f);
  write_tensor(path, old_values);
  const std::string old_bytes = read_all(path);
  write_tensor(dir.file("size_probe"), new_values);
  const long long new_size = static_cast<long long>(read_all(dir.file("size_probe")).size());
  std::filesystem::remove(dir.file("size_probe"));
  // Fails at once, part-way through the header, part-way through the data, and one byte short.
  for (long long fits : {0LL, 5LL, 3000LL, new_size - 1}) {
    std::string message;
    {
      FullDisk full("ckpt.safetensors.tmp", fits);
      message = error_message([&] { write_tensor(path, new_values); });
    }
    EXPECT_NE(message.find("cannot write " + path + ": the disk is full"), std::string::npos)
        << message;
    EXPECT_EQ(message.find('\n'), std::string::npos) << message;
    EXPECT_TRUE(read_all(path) == old_bytes) << "the file changed after " << fits << " bytes";
    EXPECT_EQ(SafetensorsFile::read(path).to_float32(*SafetensorsFile::read(path).find("w")),
              old_values);
    EXPECT_EQ(folder_entries(dir), std::vector<std::string>{"ckpt.safetensors"});
  }
  // With room again the same save succeeds.
  write_tensor(path, new_values);
  EXPECT_EQ(SafetensorsFile::read(path).find("w")->shape[0], 5000);
}

TEST(DiskFull, AFailedFsyncKeepsThePreviousFile) {
  TempDir dir;
  const std::string path = dir.file("ckpt.safetensors");
  write_tensor(path, std::vector<float>(10, 1.0f));
  const std::string old_bytes = read_all(path);
  std::string message;
  {
    FullDisk full("ckpt.safetensors.tmp", 1LL << 40, /*fsync_fails=*/true);
    message = error_message([&] { write_tensor(path, std::vector<float>(10, 2.0f)); });
  }
  EXPECT_NE(message.find("the disk is full"), std::string::npos) << message;
  EXPECT_TRUE(read_all(path) == old_bytes) << "the file changed";
  EXPECT_EQ(folder_entries(dir), std::vector<std::string>{"ckpt.safetensors"});
}

// Token files (folio prepare) and tokenizers go through the same atomic writer: a full disk or
// a failed fsync, where the data may never reach the disk, leaves the previous shard whole.
TEST(DiskFull, AFailedTokenShardWriteOrFsyncKeepsThePreviousShard) {
  TempDir dir;
  const std::string path = dir.file("train_000000.bin");
  const std::vector<uint32_t> old_ids(100, 7), new_ids(3000, 9);
  write_token_file(path, TokenFileLayout::kShard, old_ids, 50257);
  const std::string old_bytes = read_all(path);
  for (bool fsync_fails : {false, true}) {
    std::string message;
    {
      FullDisk full("train_000000.bin.tmp", fsync_fails ? 1LL << 40 : 2000, fsync_fails);
      message = error_message(
          [&] { write_token_file(path, TokenFileLayout::kShard, new_ids, 50257); });
    }
    EXPECT_NE(message.find("cannot write " + path + ": the disk is full"), std::string::npos)
        << message;
    EXPECT_TRUE(read_all(path) == old_bytes) << "the shard changed, fsync failing " << fsync_fails;
    EXPECT_EQ(folder_entries(dir), std::vector<std::string>{"train_000000.bin"});
  }
}

TEST(DiskFull, AFailedCheckpointSaveKeepsThePreviousCheckpointLoadable) {
  TempDir dir;
  const std::string path = dir.file("ckpt.safetensors");
  Config config;
  config.n_layer = 1, config.n_head = 2, config.n_embd = 8, config.block_size = 8;
  const Vocabulary vocabulary = Vocabulary::from_text(U"abcdefgh");
  auto backend = make_backend("cpu", 1);
  GPT model(*backend, ModelShape::from_config(config, vocabulary.size()));
  model.initialize(1, 0.02, false);
  save_checkpoint(path, model, config, vocabulary, 100, 2.0, 2.1);
  const std::vector<float> saved = model.read_parameters();
  model.initialize(2, 0.02, false);  // training moved on
  std::string message;
  {
    FullDisk full("ckpt.safetensors.tmp", 2048);
    message =
        error_message([&] { save_checkpoint(path, model, config, vocabulary, 200, 1.9, 2.0); });
  }
  EXPECT_NE(message.find(path + ": the disk is full"), std::string::npos) << message;
  const LoadedCheckpoint loaded = load_checkpoint(path, Config{}, nullptr);
  EXPECT_EQ(loaded.step, 100);
  EXPECT_EQ(loaded.parameters->read_all(), saved);
  EXPECT_EQ(folder_entries(dir), std::vector<std::string>{"ckpt.safetensors"});
}

}  // namespace
}  // namespace folio
